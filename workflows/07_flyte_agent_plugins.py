"""Flyte's agent plugins: a LangGraph agent remembers across runs through its Flyte plugin and our store.

Flyte publishes agent-SDK plugins (``flyteplugins-agents-langgraph``, ``-openai``, ``-pydantic-ai``, ...);
each keeps cross-run memory behind one argument, ``run_agent(..., memory_key=...)``, which opens
``flyte.ai.agents.memory.MemoryStore`` through ``flyteplugins.agents.core.resolve_memory``. Opting in makes
that our store, with no change to the agent's code: the task environment sets
``FLYTEPLUGINS_MEMORY_INSTALL=1`` (read when Flyte loads this package's type plugin, in every task), and a
local run, whose tasks run in this process, calls ``flyteplugins_memory.install()``.

Each user message is its own ``flyte.run`` of one task: ``flyteplugins.agents.langgraph.run_agent`` with a
scripted chat model (offline, no API key) that answers from the transcript it is given. The plugin loads
the earlier conversation from ``langgraph/history.json`` and saves it back, so the second run answers from
what the first was told. A last task shows what our store adds to the plugin's memory: every version of the
transcript file, the commits, the audit trail and a search.

Run: python workflows/07_flyte_agent_plugins.py [--s3 | --remote] [--key KEY] [MESSAGE ...]
"""

from __future__ import annotations

import re
from typing import Any

import _support
import flyte
from _support import plural
from flyteplugins.agents.core import resolve_memory
from flyteplugins.agents.langgraph import run_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import flyteplugins_memory
from flyteplugins_memory import INSTALL_ENV, MemoryStore

env = flyte.TaskEnvironment(
    name="memory_flyte_agent_plugins",
    image=_support.task_image(extras=("agents-langgraph",)),
    env_vars={INSTALL_ENV: "1"},  # every task of this environment opens our store; the task code is unchanged
)

CONVERSATION = (
    "Hi! My name is Ada and my favourite language is Rust.",
    "What is my name, and which language do I like?",
)
HISTORY = "langgraph/history.json"  # where the LangGraph plugin keeps the transcript in the store


class ScriptedChatModel(BaseChatModel):
    """A stand-in for an LLM: it answers the newest user message from every user message it is given."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any):
        said = [str(m.content) for m in messages if m.type == "human"]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply(said)))])


def reply(said: list[str]) -> str:
    facts = {k: m.group(1) for text in said for k, p in PATTERNS.items() if (m := re.search(p, text, re.IGNORECASE))}
    if "?" not in said[-1]:
        noted = ", ".join(f"your {k} is {v}" for k, v in facts.items())
        return f"Nice to meet you! I will remember that {noted}." if noted else "Noted."
    if not facts:
        return "I don't know yet: you have not told me anything about yourself."
    return "From what you told me earlier: " + "; ".join(f"your {k} is {v}" for k, v in facts.items()) + "."


PATTERNS = {"name": r"my name is (\w+)", "favourite language": r"favourite language is (\w+)"}


@env.task
async def chat(key: str, message: str) -> str:
    """One turn: the plugin's agent, its memory keyed by `key` (our store once installed)."""
    return await run_agent(message, model=ScriptedChatModel(), memory_key=key, observability=False)


@env.task
async def what_the_store_shows(key: str) -> str:
    """What our store keeps beside the plugin's transcript file: versions, commits, audit, search."""
    memory = await resolve_memory(key)  # what the plugin opens: ours, installed by the environment
    if not isinstance(memory, MemoryStore):
        return f"the plugin opened {type(memory).__module__}.{type(memory).__name__}: {INSTALL_ENV} is not set"
    transcript = await memory.read_json.aio(HISTORY, default=[])
    versions = await memory.history.aio(HISTORY)
    lines = [
        f"store: {memory.remote_path} ({type(memory).__module__}.{type(memory).__name__})",
        f"{HISTORY}: {plural(len(transcript), 'message')}, {plural(len(versions), 'version')}, newest first:",
        *(f"  {v.version_id} by {v.actor}: {v.size} bytes" for v in versions),
        "commits, newest first:",
        *(f"  #{c.seq} by {c.actor}: wrote {list(c.wrote)}" for c in await memory.log.aio(limit=len(versions))),
        "audit trail:",
        *(f"  {e['op']} {e['path']} by {e['actor']}" for e in await memory.audit_tail.aio(len(versions))),
    ]
    hits = await memory.search.aio("Rust")
    lines.append(f"search 'Rust': {[h.path for h in hits]}")
    return "\n".join(lines)


def main() -> None:
    cli = _support.parser(__doc__, default_key="flyte-agent-plugins")
    cli.add_argument("messages", nargs="*", default=list(CONVERSATION), help="one run per message")
    args = cli.parse_args()
    with _support.connect(args) as target:
        if target.mode != "remote":  # a local run's tasks run here; on a cluster, env_vars above does it
            flyteplugins_memory.install()
        print(f"A LangGraph agent (flyteplugins-agents-langgraph) with memory_key={target.key!r} on {target.where()}.")
        for number, message in enumerate(args.messages, 1):
            print(f"\n--- run {number} ---\nuser:  {message}")
            print(f"agent: {target.run(chat, key=target.key, message=message)[0]}")
        print("\n=== What our store shows ===")
        print(target.run(what_the_store_shows, key=target.key)[0])
        print(target.look_inside(f"cat {HISTORY}", f"history {HISTORY}", "log"))


if __name__ == "__main__":
    main()
