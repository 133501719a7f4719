"""Flyte's Hermes plugin (``flyteplugins-agents-hermes``) keeps its conversation in our store, driven as in
``test_flyte_agent_plugins.py``: its real ``run_agent(model=..., base_url=..., memory_key=...)`` in two separate
local ``flyte.run``s on local disk and moto S3, after `install()`. Hermes's ``AIAgent`` takes no model object,
only an OpenAI-compatible endpoint, so the scripted model answers from a server on 127.0.0.1 (chat
completions, streamed as server-sent events). hermes-agent moves cryptography, openai, pydantic and rich
below what the suite has, so it has a virtualenv of its own: ``make test-agent-plugins`` (by hand, not in CI:
decision 0099) runs this file in ``.venv-agents-hermes/``; elsewhere it is skipped."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import flyte
import pytest

pytest.importorskip("flyteplugins.agents.hermes", reason="Flyte's Hermes plugin: make test-agent-plugins")

from flyteplugins.agents import hermes as flyte_hermes

from agent_plugins import FIRST, SECOND, kept_in_our_store, local_server, reply, run

env = flyte.TaskEnvironment(name="flyte_agent_plugin_hermes")


class ScriptedEndpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat-completions endpoint whose answer is `reply` over the user messages sent."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        said = [str(m.get("content")) for m in body.get("messages", ()) if m.get("role") == "user"]
        text = reply(said) if said else "Hello!"
        head = {"id": "c1", "object": "chat.completion.chunk", "created": int(time.time()), "model": "scripted"}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": USAGE},
        ]
        data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


@pytest.fixture
def endpoint(monkeypatch, tmp_path) -> Iterator[str]:
    monkeypatch.setenv("HOME", str(tmp_path))  # Hermes keeps its sessions and dumps under ~/.hermes
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with local_server(ScriptedEndpoint) as url:
        monkeypatch.setenv(ENDPOINT_ENV, f"{url}/v1")  # the task reads it: a local run's tasks run in this process
        yield f"{url}/v1"


ENDPOINT_ENV = "SCRIPTED_OPENAI_ENDPOINT"


@env.task
async def hermes_turn(key: str, message: str) -> str:
    return await flyte_hermes.run_agent(
        message,
        model="scripted",
        base_url=os.environ[ENDPOINT_ENV],
        api_key="offline",
        memory_key=key,
        observability=False,
    )


def test_hermes_plugin_continues_a_conversation_across_runs_in_our_store(installed, endpoint, durable_backend, key):
    path = "hermes/history.json"
    assert run(durable_backend, hermes_turn, key, FIRST) == "Nice to meet you, Ada!"
    assert run(durable_backend, hermes_turn, key, SECOND) == "Your name is Ada."

    stored = json.loads(durable_backend.objects(key)[path])  # the plugin's own transcript, as storage holds it
    assert stored == [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": "Nice to meet you, Ada!"},
        {"role": "user", "content": SECOND},
        {"role": "assistant", "content": "Your name is Ada."},
    ]
    kept_in_our_store(durable_backend, key, path)
