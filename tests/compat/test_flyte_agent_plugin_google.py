"""Flyte's Google ADK plugin (``flyteplugins-agents-google``) keeps its session in our store, driven as in
``test_flyte_agent_plugins.py``: its real ``run_agent(agent=LlmAgent(model=<scripted BaseLlm>), memory_key=...)``
in two separate local ``flyte.run``s on local disk and moto S3, after `install()`. google-adk moves
opentelemetry to 1.44, which Pydantic AI's exporters refuse, so it has a virtualenv of its own:
``make test-agent-plugins`` (by hand, not in CI: decision 0099) runs this file in ``.venv-agents-google/``;
elsewhere it is skipped."""

from __future__ import annotations

import json
from typing import Any

import flyte
import pytest

pytest.importorskip("flyteplugins.agents.google", reason="Flyte's Google ADK plugin: make test-agent-plugins")

from flyteplugins.agents import google as flyte_google
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.genai import types as genai_types

from agent_plugins import FIRST, SECOND, kept_in_our_store, reply, run

env = flyte.TaskEnvironment(name="flyte_agent_plugin_google")


class ScriptedLlm(BaseLlm):
    """A Google ADK model that runs offline (`reply` over the user contents it is sent)."""

    model: str = "scripted"

    async def generate_content_async(self, llm_request: Any, stream: bool = False):
        said = [p.text for c in llm_request.contents if c.role == "user" for p in c.parts or () if p.text]
        part = genai_types.Part(text=reply(said))
        yield LlmResponse(content=genai_types.Content(role="model", parts=[part]))


@env.task
async def google_turn(key: str, message: str) -> str:
    agent = LlmAgent(name="assistant", model=ScriptedLlm())
    return await flyte_google.run_agent(message, agent=agent, memory_key=key, observability=False)


def test_google_adk_plugin_replays_a_session_across_runs_from_our_store(installed, durable_backend, key):
    path = "google/events.json"
    assert run(durable_backend, google_turn, key, FIRST) == "Nice to meet you, Ada!"
    assert run(durable_backend, google_turn, key, SECOND) == "Your name is Ada."

    stored = json.loads(durable_backend.objects(key)[path])  # ADK `Event`s, replayed into the next session
    assert [(e["author"], e["content"]["parts"][0]["text"]) for e in stored] == [
        ("user", FIRST),
        ("assistant", "Nice to meet you, Ada!"),
        ("user", SECOND),
        ("assistant", "Your name is Ada."),
    ]
    kept_in_our_store(durable_backend, key, path, actor="google-agent")
