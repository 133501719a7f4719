"""Flyte's Mistral plugin (``flyteplugins-agents-mistral``) continues a conversation through our store, driven as
in ``test_flyte_agent_plugins.py``: its real ``run_agent(..., memory_key=...)`` in two separate local
``flyte.run``s on local disk and moto S3, after `install()`. Mistral keeps the conversation on its servers (the
Conversations API) and the plugin keeps only its id in the store, so the scripted model here is a stand-in for
those servers on 127.0.0.1: it holds each conversation by id and answers from all of it. The plugin builds its
own client on Mistral's default server URL, so the test points the SDK's client class at the stand-in (the
only change to the SDK; its request code runs as is). ``make test-agent-plugins`` (by hand, not in CI:
decision 0099) runs this file in ``.venv-agents/``, where the plugin is installed; elsewhere it is skipped."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import ClassVar

import flyte
import pytest

pytest.importorskip("flyteplugins.agents.mistral", reason="Flyte's Mistral plugin: make test-agent-plugins")

import mistralai.client
from flyteplugins.agents import mistral as flyte_mistral

from agent_plugins import FIRST, SECOND, kept_in_our_store, local_server, reply, run

env = flyte.TaskEnvironment(name="flyte_agent_plugin_mistral")
ENDPOINT_ENV = "SCRIPTED_MISTRAL_ENDPOINT"


class ScriptedConversations(BaseHTTPRequestHandler):
    """Mistral's Conversations API as far as the plugin uses it: `POST /v1/conversations` starts a conversation,
    `POST /v1/conversations/<id>` appends to it; the answer is `reply` over every user input it holds."""

    conversations: ClassVar[dict[str, list[str]]] = {}
    ids = itertools.count(1)

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path == "/v1/conversations":
            conversation_id = f"conv-{next(self.ids)}"
            self.conversations[conversation_id] = []
        else:
            conversation_id = self.path.rsplit("/", 1)[-1]
        said = self.conversations[conversation_id]  # a KeyError answers 500: an id the server never gave out
        said.append(_text(body["inputs"]))
        now = datetime.now(UTC).isoformat()
        answer = {
            "object": "conversation.response",
            "conversation_id": conversation_id,
            "outputs": [
                {
                    "object": "entry",
                    "type": "message.output",
                    "role": "assistant",
                    "content": reply(said),
                    "created_at": now,
                    "completed_at": now,
                    "id": f"msg-{len(said)}",
                    "model": body.get("model") or "scripted",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _text(inputs: object) -> str:
    """The user's text from a request's `inputs`: a string, or a list of entries whose content is text."""
    if isinstance(inputs, str):
        return inputs
    entries = inputs if isinstance(inputs, list) else [inputs]
    return " ".join(str(e.get("content", "")) for e in entries if isinstance(e, dict) and e.get("role") == "user")


class LocalMistral(mistralai.client.Mistral):
    """The SDK's client, on the stand-in's URL instead of Mistral's default server."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(server_url=os.environ[ENDPOINT_ENV], **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def endpoint(monkeypatch) -> Iterator[str]:
    ScriptedConversations.conversations = {}
    monkeypatch.setenv("MISTRAL_API_KEY", "offline")
    monkeypatch.setattr(mistralai.client, "Mistral", LocalMistral)  # run_agent imports it from here when called
    with local_server(ScriptedConversations) as url:
        monkeypatch.setenv(ENDPOINT_ENV, url)  # a local run's tasks run in this process
        yield url


@env.task
async def mistral_turn(key: str, message: str) -> str:
    return await flyte_mistral.run_agent(message, model="scripted", memory_key=key, observability=False)


def test_mistral_plugin_continues_a_server_side_conversation_across_runs_through_our_store(
    installed, endpoint, durable_backend, key
):
    path = "mistral/conversation_id"
    assert run(durable_backend, mistral_turn, key, FIRST) == "Nice to meet you, Ada!"
    first_id = json.loads(durable_backend.objects(key)[path])  # the id, as storage holds it
    assert first_id in ScriptedConversations.conversations

    # the second run knows the name only through the id the first left in our store
    assert run(durable_backend, mistral_turn, key, SECOND) == "Your name is Ada."
    assert ScriptedConversations.conversations == {first_id: [FIRST, SECOND]}, "one conversation, continued"
    assert json.loads(durable_backend.objects(key)[path]) == first_id
    store = kept_in_our_store(durable_backend, key, path, actor="mistral-agent", searchable=False)
    assert store.read_json(path) == first_id
