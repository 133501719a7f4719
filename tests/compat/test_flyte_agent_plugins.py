"""Flyte's own agent-SDK plugins keep their memory in our store: each plugin's real ``run_agent(...,
memory_key=...)`` with a scripted, offline model, in two separate local ``flyte.run``s on local disk and moto
S3, after `install()`. The second run continues the conversation the first saved, and our store's history,
search, audit and log show it. The plugins are Flyte's (``flyteplugins-agents-langgraph``, ``-langchain``,
``-deepagents``, ``-openai``: in the ``test`` extra), not fakes; ``test_flyte_agent_plugin_sdks.py`` has the
plugins whose SDKs are too heavy for it, and docs/frameworks.md lists every ``flyteplugins-agents-*`` plugin."""

from __future__ import annotations

import json
from typing import Any

import flyte
import pytest
from agents import RunConfig
from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
from agents.usage import Usage
from flyteplugins.agents import deepagents as flyte_deepagents
from flyteplugins.agents import langchain as flyte_langchain
from flyteplugins.agents import langgraph as flyte_langgraph
from flyteplugins.agents import openai as flyte_openai
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from agent_plugins import FIRST, SECOND, kept_in_our_store, reply, run
from flyteplugins_memory import MemoryStore, install, uninstall

env = flyte.TaskEnvironment(name="flyte_agent_plugins")


class ScriptedChatModel(BaseChatModel):
    """A LangChain chat model that runs offline (`reply` over the human messages it is sent)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any):
        said = [str(m.content) for m in messages if m.type == "human"]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply(said)))])


class ScriptedModel(Model):
    """An OpenAI Agents SDK model that runs offline (`reply` over the user items it is sent)."""

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any) -> ModelResponse:
        items = [input] if isinstance(input, str) else input
        said = [
            i if isinstance(i, str) else str(i.get("content"))
            for i in items
            if isinstance(i, str) or i.get("role") == "user"
        ]
        text = ResponseOutputText(type="output_text", text=reply(said), annotations=[])
        message = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[text])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # pragma: no cover - run_agent does not stream
        raise NotImplementedError


class ScriptedProvider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return ScriptedModel()


@env.task
async def langgraph_turn(key: str, message: str) -> str:
    model = ScriptedChatModel()
    return await flyte_langgraph.run_agent(message, model=model, memory_key=key, observability=False)


@env.task
async def langchain_turn(key: str, message: str) -> str:
    model = ScriptedChatModel()
    return await flyte_langchain.run_agent(message, model=model, memory_key=key, observability=False)


@env.task
async def deepagents_turn(key: str, message: str) -> str:
    model = ScriptedChatModel()
    return await flyte_deepagents.run_agent(message, model=model, memory_key=key, observability=False)


#: the plugins whose transcript is LangChain's ``messages_to_dict`` in one JSON file of the store
LANGCHAIN_FAMILY = {
    "langgraph": langgraph_turn,
    "langchain": langchain_turn,
    "deepagents": deepagents_turn,
}


@env.task
async def openai_turn(key: str, message: str) -> str:
    config = RunConfig(model_provider=ScriptedProvider(), tracing_disabled=True)
    return await flyte_openai.run_agent(message, memory_key=key, run_config=config, observability=False)


@pytest.mark.parametrize("plugin", sorted(LANGCHAIN_FAMILY))
def test_a_langchain_family_plugin_continues_a_conversation_across_runs_in_our_store(
    installed, durable_backend, key, plugin
):
    turn, path = LANGCHAIN_FAMILY[plugin], f"{plugin}/history.json"
    assert run(durable_backend, turn, key, FIRST) == "Nice to meet you, Ada!"
    assert run(durable_backend, turn, key, SECOND) == "Your name is Ada."

    stored = json.loads(durable_backend.objects(key)[path])  # what storage holds
    assert [(m["type"], m["data"]["content"]) for m in stored] == [
        ("human", FIRST),
        ("ai", "Nice to meet you, Ada!"),
        ("human", SECOND),
        ("ai", "Your name is Ada."),
    ]
    store = kept_in_our_store(durable_backend, key, path)
    older, newer = store.history(path)[1], store.history(path)[0]  # newest first: one version a run
    assert json.loads(store.read_version(path, older.version_id))[-1]["data"]["content"] == "Nice to meet you, Ada!"
    assert newer.sha256 == store.current_sha(path)


def test_openai_plugin_session_continues_a_conversation_across_runs_in_our_transcript(installed, durable_backend, key):
    assert run(durable_backend, openai_turn, key, FIRST) == "Nice to meet you, Ada!"
    assert run(durable_backend, openai_turn, key, SECOND) == "Your name is Ada."

    stored = json.loads(durable_backend.objects(key)["messages.json"])  # FlyteSession's items, in storage
    assert [m.get("role") for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[0]["content"] == FIRST and stored[-1]["content"][0]["text"] == "Your name is Ada."
    assert any("/log/" in name for name in durable_backend.journal(key)), "saved through our journal"
    store = MemoryStore.get_or_create(key=key)
    assert store.messages == stored
    assert [c.appended for c in store.log(limit=4)] == [1, 1, 1, 1]  # a commit per add_items: input, then reply
    hits = store.search("Ada Rust", include_transcript=True)
    assert hits and hits[0].path == "messages.json#0"


def test_without_install_the_plugins_keep_upstreams_store_and_ours_adopts_it_later(durable_backend, key):
    assert run(durable_backend, langgraph_turn, key, FIRST) == "Nice to meet you, Ada!"
    assert durable_backend.journal(key) == {}, "nothing changes for a user who does not opt in"
    install()
    try:
        assert run(durable_backend, langgraph_turn, key, SECOND) == "Your name is Ada."
    finally:
        uninstall()
    assert durable_backend.journal(key), "the first save through ours adopted the store"
    store = MemoryStore.get_or_create(key=key)
    assert [m["data"]["content"] for m in store.read_json("langgraph/history.json")][-1] == "Your name is Ada."
