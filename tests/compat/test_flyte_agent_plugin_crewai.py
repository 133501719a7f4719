"""Flyte's CrewAI plugin (``flyteplugins-agents-crewai``) keeps its conversation in our store, driven as in
``test_flyte_agent_plugins.py``: its real ``run_agent(agent=Agent(llm=<scripted BaseLLM>), memory_key=...)`` in
two separate local ``flyte.run``s on local disk and moto S3, after `install()`. CrewAI moves pydantic (2.12),
openai (2.x) and rich (14) below what the suite's environment has, so it has a virtualenv of its own:
``make test-agent-plugins`` (by hand, not in CI: decision 0099) runs this file in ``.venv-agents-crewai/``; elsewhere
it is skipped."""

from __future__ import annotations

import json
import os
from typing import Any

import flyte
import pytest

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # offline: no telemetry calls home
pytest.importorskip("flyteplugins.agents.crewai", reason="Flyte's CrewAI plugin: make test-agent-plugins")

from crewai import Agent
from crewai.llms.base_llm import BaseLLM
from flyteplugins.agents import crewai as flyte_crewai

from agent_plugins import FIRST, SECOND, kept_in_our_store, reply, run

env = flyte.TaskEnvironment(name="flyte_agent_plugin_crewai")


class ScriptedLLM(BaseLLM):
    """A CrewAI LLM that runs offline (`reply` over the user messages it is sent)."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        sent = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
        return reply([str(m.get("content")) for m in sent if m.get("role") == "user"])

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        return self.call(messages)


@env.task
async def crewai_turn(key: str, message: str) -> str:
    agent = Agent(role="assistant", goal="help", backstory="a helpful assistant", llm=ScriptedLLM(model="scripted"))
    return await flyte_crewai.run_agent(message, agent=agent, memory_key=key, observability=False)


def test_crewai_plugin_continues_a_conversation_across_runs_in_our_store(installed, durable_backend, key):
    path = "crewai/history.json"
    assert run(durable_backend, crewai_turn, key, FIRST) == "Nice to meet you, Ada!"
    assert run(durable_backend, crewai_turn, key, SECOND) == "Your name is Ada."

    stored = json.loads(durable_backend.objects(key)[path])  # the plugin's own transcript, as storage holds it
    assert stored == [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": "Nice to meet you, Ada!"},
        {"role": "user", "content": SECOND},
        {"role": "assistant", "content": "Your name is Ada."},
    ]
    kept_in_our_store(durable_backend, key, path)
