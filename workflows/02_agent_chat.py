"""Agent chat: a `flyte.ai.agents.Agent` with tools remembers you across separate runs.

Each user message is its own ``flyte.run``: a task opens the keyed store, runs the agent with the store as
its memory (``agent.run(message, memory=store)``: the earlier transcript is prepended, the new turn
appended back) and saves. The agent's tools keep notes in the store (``remember_note`` writes
``notes/user.md``, ``recall_notes`` reads it), so the second run knows what the first was told. Nothing
else carries over: a new process, a new run, only the store. Each turn publishes the store's report
(``store.report(publish=True)``) to a "Memory" tab of its run's Flyte report.

By default the "LLM" is a small scripted function that decides from the transcript it is given, as a real
model would (no network, no account); ``--model NAME`` uses flyte's default LLM call through litellm
(``pip install litellm`` and set the provider's key, e.g. ``ANTHROPIC_API_KEY``). Your own messages:
``python workflows/02_agent_chat.py "I'm Grace" "Who am I?"``.

Run: python workflows/02_agent_chat.py [--s3 | --remote] [--key KEY] [--model NAME] [MESSAGE ...]
"""

from __future__ import annotations

import json
import pathlib
import re
import uuid
from typing import Any

import _support
import flyte
from _support import plural
from flyte.ai.agents import Agent, LLMMessage

from flyteplugins_memory import MemoryStore

NOTES = "notes/user.md"
NOTES_HEADER = "# What I know about the user\n"
CONVERSATION = (
    "Hi! My name is Ada and my favourite language is Rust.",
    "What is my name, and what is my favourite language?",
)

env = flyte.TaskEnvironment(name="memory_agent_chat", image=_support.task_image())


# -- the agent's tools: its long-term notes live in the store ------------------------------------------


def notes_tools(memory: MemoryStore) -> list[Any]:
    """The tools of an agent whose notes live in `memory` (the Agent reads names and docstrings)."""

    async def remember_note(text: str) -> str:
        """Save a fact about the user to long-term memory, for later conversations."""
        sha = await memory.current_sha.aio(NOTES)  # "" while there is no file yet
        notes = await memory.read_text.aio(NOTES, default=NOTES_HEADER)
        await memory.write_text.aio(
            NOTES, f"{notes}- {text}\n", actor="agent-chat/remember_note", reason="the user told me", expected_sha=sha
        )
        return f"saved to {NOTES}"

    async def recall_notes() -> str:
        """Read every note saved about the user in earlier conversations."""
        return await memory.read_text.aio(NOTES, default="(no notes yet)")

    return [remember_note, recall_notes]


# -- a scripted stand-in for the LLM: it decides from the transcript, as a model would --------------------

FACTS = {
    "name": re.compile(r"\b(?:my name is|i'm|i am|call me)\s+([A-Z][\w-]*)", re.IGNORECASE),
    "favourite language": re.compile(r"\bfavou?rite language is\s+([\w+#-]+)", re.IGNORECASE),
}


async def scripted_llm(
    model: str, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> LLMMessage:
    """Tell facts to `remember_note`, answer questions from `recall_notes`, and cite the earlier transcript."""
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    said, results = messages[start]["content"], [m["content"] for m in messages[start:] if m["role"] == "tool"]
    facts = {name: found.group(1) for name, pattern in FACTS.items() if (found := pattern.search(said))}
    if facts and not results:
        return tool_call("remember_note", text="; ".join(f"{k}: {v}" for k, v in facts.items()))
    if facts:
        return LLMMessage(content=f"Nice to meet you! I noted {', '.join(facts.values())} in {NOTES}.")
    if "?" in said and not results:
        return tool_call("recall_notes")
    if "?" in said:
        return LLMMessage(content=answer(read_notes(results[-1]), earlier_user_messages(messages[:start])))
    return LLMMessage(content="Noted.")


def tool_call(name: str, **arguments: str) -> LLMMessage:
    call = {"id": f"call_{uuid.uuid4().hex[:8]}", "name": name, "arguments": arguments}
    return LLMMessage(content="", tool_calls=[call])


def read_notes(text: str) -> dict[str, str]:
    """The newest value of each fact in notes lines like ``- name: Ada; favourite language: Rust``."""
    known: dict[str, str] = {}
    for line in text.splitlines():
        for part in line.removeprefix("- ").split(";"):
            name, sep, value = part.partition(":")
            if sep and line.startswith("- "):
                known[name.strip()] = value.strip()
    return known


def earlier_user_messages(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "user"]


def answer(known: dict[str, str], earlier: list[str]) -> str:
    if not known:
        return "I don't know yet: my notes about you are empty, and this is the first thing you have told me."
    facts = " and ".join(f"your {name} is {value}" for name, value in known.items())
    cited = f' Earlier you told me: "{earlier[-1]}"' if earlier else ""
    count = plural(len(earlier), "earlier message")
    return f"From my notes ({NOTES}), {facts}.{cited} ({count} of yours in my memory.)"


def build_agent(memory: MemoryStore, model: str) -> Agent:
    """The chat agent: scripted unless `model` names a real one (then flyte's default litellm call)."""
    options: dict[str, Any] = {"model": model} if model else {"call_llm": scripted_llm}
    return Agent(
        name="memory-chat",
        instructions="You are a friendly assistant. Save facts the user tells you with remember_note; "
        "before answering a question about the user, read your notes with recall_notes.",
        tools=notes_tools(memory),
        parallel_tool_calls=False,  # the tools edit one notes file
        **options,
    )


# -- the tasks -------------------------------------------------------------------------------------------


@env.task(report=True)
async def chat_turn(key: str, message: str, model: str = "") -> tuple[str, str]:
    """One user turn: open the store, let the agent answer with it as memory, save. Returns the reply and
    the tools the agent called."""
    memory = await MemoryStore.get_or_create.aio(key=key)
    before = len(memory.messages)
    result = await build_agent(memory, model).run.aio(message, memory=memory)
    await memory.save.aio(actor="agent-chat", reason="one chat turn")
    await memory.report.aio(publish=True)  # the store beside the run: a "Memory" tab in its Flyte report
    reply = result.summary if not result.error else f"[agent error] {result.error}"
    return reply, ", ".join(tools_called(memory.messages[before:]))


def tools_called(messages: list[dict[str, Any]]) -> list[str]:
    return [call["function"]["name"] for m in messages for call in m.get("tool_calls") or []]


@env.task
async def what_it_remembers(key: str) -> str:
    """What the store holds after the chat: where it is, the transcript, the notes and the last commits."""
    memory = await MemoryStore.get_or_create.aio(key=key)
    roles = [m["role"] for m in memory.messages]
    counts = ", ".join(f"{roles.count(r)} {r}" for r in ("user", "assistant", "tool"))
    log = await memory.log.aio(limit=3)
    return "\n".join(
        [
            f"store:       {memory.remote_path}",
            f"transcript:  {plural(len(roles), 'message')} ({counts})",
            f"files:       {json.dumps(await memory.list_paths.aio())}",
            f"{NOTES}:",
            *(f"    {line}" for line in (await memory.read_text.aio(NOTES, default="(none)")).splitlines()),
            "last commits, newest first:",
            *(
                f"    #{c.seq} {c.time} {c.kind} by {c.actor}: wrote {list(c.wrote)}, +{plural(c.appended, 'message')}"
                for c in log
            ),
        ]
    )


def main() -> None:
    cli = _support.parser(__doc__, default_key="agent-chat")
    cli.add_argument("--model", default="", help="a litellm model name (default: the scripted stand-in)")
    cli.add_argument("messages", nargs="*", default=list(CONVERSATION), help="one run per message")
    args = cli.parse_args()
    with _support.connect(args) as target:
        print(f"Chatting with an agent whose memory is the store {target.key!r} on {target.where()}.")
        for number, message in enumerate(args.messages, 1):
            print(f"\n--- run {number}: a new flyte.run; what it knows comes from the store ---")
            reply, tools = target.run(chat_turn, key=target.key, message=message, model=args.model)
            print(f"user:  {message}\nagent: {reply}" + (f"\n       (tools called: {tools})" if tools else ""))
        print("\n=== What the agent remembered across runs ===")
        print(target.run(what_it_remembers, key=target.key)[0])
        print("\n=== Where it lives and how to look inside ===")
        verbs = ("ls", "messages --tail 5", f"cat {NOTES}", "log --limit 10", "report --html memory.html")
        print(target.look_inside(*verbs))
        print(f"Each turn's Flyte report has a Memory tab (the store as a page); the last one: {report_of(target)}")


def report_of(target: _support.Target) -> str:
    """Where the last turn's report is: a local run's report.html, else the run's page in the Flyte UI."""
    url = target.run_urls[-2]  # the last chat turn (the last run is what_it_remembers)
    if target.mode == "remote":
        return url
    return str(next(pathlib.Path(url).rglob("report.html"), url))  # under the run's folder, by action


if __name__ == "__main__":
    main()
