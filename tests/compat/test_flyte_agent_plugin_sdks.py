"""Flyte's agent plugins whose SDKs are too heavy for the ``test`` extra (``flyteplugins-agents-pydantic-ai``,
``-claude``: docs/frameworks.md says why), driven as in ``test_flyte_agent_plugins.py``: the
plugin's real ``run_agent(..., memory_key=...)`` with a scripted, offline model, in two separate local
``flyte.run``s on local disk and moto S3, after `install()`. ``make test-agent-plugins`` (by hand, not in CI:
decision 0099) runs this file in ``.venv-agents/``, where they are installed; elsewhere it is skipped."""

from __future__ import annotations

import json
from typing import Any

import flyte
import pytest

pytest.importorskip("flyteplugins.agents.pydantic_ai", reason="Flyte's heavier agent plugins: make test-agent-plugins")
pytest.importorskip("flyteplugins.agents.claude", reason="Flyte's heavier agent plugins: make test-agent-plugins")

from claude_agent_sdk import ClaudeAgentOptions
from flyteplugins.agents import pydantic_ai as flyte_pydantic_ai
from flyteplugins.agents.claude._memory import memory_session_id, wire_memory_session
from pydantic_ai.messages import ModelRequest, TextPart, UserPromptPart
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent_plugins import FIRST, SECOND, kept_in_our_store, reply, run
from flyteplugins_memory import MemoryStore

env = flyte.TaskEnvironment(name="flyte_agent_plugin_sdks")


def scripted_pydantic_ai(messages: list[Any], info: AgentInfo) -> PydanticResponse:
    """A Pydantic AI `FunctionModel` function that runs offline (`reply` over the user prompts it is sent)."""
    said = [
        str(part.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, UserPromptPart)
    ]
    return PydanticResponse(parts=[TextPart(reply(said))])


@env.task
async def pydantic_ai_turn(key: str, message: str) -> str:
    model = FunctionModel(scripted_pydantic_ai)
    return await flyte_pydantic_ai.run_agent(message, model=model, memory_key=key, observability=False)


def test_pydantic_ai_plugin_continues_a_conversation_across_runs_in_our_store(installed, durable_backend, key):
    path = "pydantic_ai/history.json"
    assert run(durable_backend, pydantic_ai_turn, key, FIRST) == "Nice to meet you, Ada!"
    assert run(durable_backend, pydantic_ai_turn, key, SECOND) == "Your name is Ada."

    stored = json.loads(durable_backend.objects(key)[path])  # Pydantic AI's ModelMessagesTypeAdapter format
    parts = [(p["part_kind"], p["content"]) for m in stored for p in m["parts"] if p["part_kind"] != "system-prompt"]
    assert parts == [
        ("user-prompt", FIRST),
        ("text", "Nice to meet you, Ada!"),
        ("user-prompt", SECOND),
        ("text", "Your name is Ada."),
    ]
    kept_in_our_store(durable_backend, key, path)


@env.task
async def claude_turn(key: str, entry: str) -> dict:
    """What Claude's SDK does with the plugin's `MemorySessionStore`: wire it into the options (a resume when the
    key has a transcript), `load` the session, `append` this run's entry. The Claude CLI itself needs the network."""
    options = ClaudeAgentOptions()
    session = await wire_memory_session(options, memory_key=key)
    assert session is not None
    session_key = {"project_key": "p", "session_id": options.resume or options.session_id}
    before = await session.load(session_key) or []
    await session.append(session_key, [{"uuid": entry, "type": "user", "message": entry}])
    return {"resume": options.resume, "loaded": [e["uuid"] for e in before]}


def test_claude_plugin_session_store_resumes_a_session_across_runs_in_our_store(installed, durable_backend, key):
    assert run(durable_backend, claude_turn, key, "first") == {"resume": None, "loaded": []}
    assert run(durable_backend, claude_turn, key, "second") == {"resume": memory_session_id(key), "loaded": ["first"]}

    stored = json.loads(durable_backend.objects(key)["claude/transcript.json"])
    assert [e["uuid"] for e in stored[f"{memory_session_id(key)}::"]] == ["first", "second"]
    store = MemoryStore.get_or_create(key=key)
    assert [c.actor for c in store.log(limit=2)] == ["claude-agent", "claude-agent"]
    assert [(e["actor"], e["op"]) for e in store.audit_tail(0)] == [
        ("claude-agent", "create"),
        ("claude-agent", "update"),
    ]
    assert len(store.history("claude/transcript.json")) == 2
