"""Frameworks: an OpenRath agent and a plain flyte Agent share one key's memory, task after task.

Two agent frameworks, one store. Each step is its own ``flyte.run``, so only the store carries state:

1. ``research``: an OpenRath (openrath 2.0) ``rath.flow.Agent`` whose memory is our OpenRath backend
   (``flyteplugins_memory.adapters.openrath``, registered as ``"flyte"``, opened on the task's store). It
   searches its sources and writes what it found as ``memory://agent/findings/<source>`` entries, and the
   user's preferred answer style as ``memory://user/preferences/answer-style``: plain files
   ``openrath/<scope>/....md`` of the store. After the run it commits its session (``commit_on_forward``),
   which reads back as ``memory://session/<id>/transcript`` (and, as JSON, at the commit's archive
   ``memory://session/<id>/commits/<stamp>/messages.json``).
2. ``advise``: a plain ``flyte.ai.agents.Agent`` run with the same key's `MemoryStore` as its memory
   (``agent.run(question, memory=store)``). Its tools search and read the store's files, so it answers from
   the researcher's findings, in the user's style, with their paths; it leaves the researcher a question
   (the file of ``memory://agent/questions/...``), and its turn is appended to the transcript
   (``messages.json``).
3. ``follow_up``: a new OpenRath agent lists ``memory://agent/questions``, reads the flyte Agent's question,
   answers it from another source and records the new finding and the answer.

A last task prints what the store holds: both frameworks' entries, transcripts and commits. Both "LLMs"
are small scripted functions that decide from the transcript they are given (no network, no API key): one
is an OpenRath chat client registered under its own provider kind, the other the flyte Agent's ``call_llm``.

Run: python workflows/06_frameworks.py [--s3 | --remote] [--key KEY]
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

import _support
import flyte
import rath.memory as rm
from _support import plural
from flyte.ai.agents import Agent, LLMMessage
from rath import flow
from rath.flow.tool import FlowToolCall
from rath.llm import Provider, RathLLMChatRequest
from rath.llm.chat_response import (
    RathLLMAssistantMessage,
    RathLLMChatChoice,
    RathLLMChatResponse,
    RathLLMToolCallFunction,
    RathLLMToolCallPart,
)
from rath.llm.registry import register_chat_client
from rath.memory import MemoryListResult, MemoryOpList, MemoryOpRead, MemoryOpWrite, MemoryStoreSpec
from rath.session import Session

import flyteplugins_memory.adapters.openrath  # noqa: F401  (registers the OpenRath backend "flyte")
from flyteplugins_memory import MemoryStore
from flyteplugins_memory.adapters.openrath import path_of

REQUEST = "Find out why the nightly training run got slow. I like answers as three short bullet points."
QUESTION = "Why did the nightly training run get slow?"
#: what the advisor asks the researcher to look into: the findings say the cache is shared, not by whom
FOLLOW_UP = "Is the evaluation job slower too?"
FOLLOW_UP_REQUEST = "Answer the open questions the advisor left under memory://agent/questions."
#: the researcher's sources: an offline stand-in for the documents, logs and dashboards it would search
SOURCES = {
    "ci-timings": "The nightly training run took 41 min on May 2 and 97 min on May 9.",
    "changelog": "On May 6 the nightly training data loader's cache moved from local SSD to network storage.",
    "profiler": "In the nightly training run, 92% of the extra time is the data loader waiting on cache reads.",
    "eval-timings": "The evaluation job reads the same cache: 12 min on May 2, 31 min on May 9.",
}
NUMBERS = ("one", "two", "three", "four", "five")
PREFERENCES = "openrath/user/preferences"  # where the advisor looks for how the user likes answers
COMMITS_SHOWN = 9  # what one run of this script commits (a new key also has its creation commit)

env = flyte.TaskEnvironment(name="memory_frameworks", image=_support.task_image(extras=("openrath",)))


# -- the OpenRath researcher: tools over its memory store, a scripted chat client ------------------------


class Tool(FlowToolCall):
    """An OpenRath tool from a function: the model sees its name, description and parameters."""

    def __init__(self, function: Any, description: str, **parameters: Mapping[str, Any]) -> None:
        self.function, self._description, self._parameters = function, description, parameters

    @property
    def name(self) -> str:
        return self.function.__name__

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": self._parameters, "required": list(self._parameters)}

    def __call__(self, session: Session, arguments: Mapping[str, Any]) -> Any:
        return self.function(**arguments)


def search_sources(query: str) -> dict[str, str]:
    """The sources sharing a word of four letters or more with `query`, most shared words first."""
    words = set(re.findall(r"\w{4,}", query.lower()))
    shared = {name: len(words & set(re.findall(r"\w{4,}", text.lower()))) for name, text in SOURCES.items()}
    return {name: SOURCES[name] for name in sorted(shared, key=lambda n: -shared[n]) if shared[name]}


def researcher_tools(memory: rm.MemoryStore) -> list[FlowToolCall]:
    """The researcher's tools: its sources, and its memory through OpenRath's own ops (memory:// URIs).
    OpenRath runs tools in worker threads of its own loop; the store's blocking API works from any thread."""

    def list_memory(uri: str) -> list[str]:
        listed = memory.dispatch(MemoryOpList(uri=uri))
        return [e.uri for e in listed.entries if not e.is_dir] if isinstance(listed, MemoryListResult) else []

    def read_memory(uri: str) -> str:
        return str(getattr(memory.dispatch(MemoryOpRead(uri=uri)), "data", "(not found)"))

    def write_memory(uri: str, content: str, mode: str) -> str:
        return repr(memory.dispatch(MemoryOpWrite(uri=uri, content=content, mode=mode)))

    string = {"type": "string"}
    return [
        Tool(search_sources, "Search the team's documents, logs and dashboards.", query=string),
        Tool(list_memory, "List the memories under a memory:// URI.", uri=string),
        Tool(read_memory, "Read one memory by its memory:// URI.", uri=string),
        Tool(write_memory, "Write a memory (mode replace or append).", uri=string, content=string, mode=string),
    ]


class ScriptedResearcher:
    """A scripted stand-in for the researcher's LLM, registered as an OpenRath chat client (openrath 2.0's
    ``model="..."`` alone builds an OpenAI client, which wants an API key). Like a model, it decides from
    the messages it is given: list and read the memories the request names, search the sources (for those
    questions, else for the request), record what it found, then report."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    def complete(self, request: RathLLMChatRequest) -> RathLLMChatResponse:
        messages = [m for m in request.messages if m.role != "system"]
        start = max(i for i, m in enumerate(messages) if m.role == "user" and not is_recalled(m.content))
        done = tool_results(messages[start:])
        calls = next_calls(str(messages[start].content), done)
        recalled = sum(is_recalled(m.content) for m in messages[:start])
        text = None if calls else report(done, recalled)
        return chat_response(text, calls)


def is_recalled(content: str | None) -> bool:
    """Whether a user message is one OpenRath's recall prepended (memories found for the request)."""
    return (content or "").startswith("[untrusted memory:")


def tool_results(messages: list[Any]) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Each tool called since the request: its (arguments, result) pairs, in call order."""
    called = {c["id"]: c["function"] for m in messages for c in m.tool_calls or ()}
    done: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for m in messages:
        if m.role == "tool":
            function = called[m.tool_call_id]
            done.setdefault(function["name"], []).append((json.loads(function["arguments"]), json.loads(m.content)))
    return done


def next_calls(request: str, done: Mapping[str, list[tuple[dict[str, Any], Any]]]) -> list[tuple[str, dict]]:
    named = re.search(r"memory://\S+\w", request)
    if named and "list_memory" not in done:
        return [("list_memory", {"uri": named.group()})]
    if "list_memory" in done and "read_memory" not in done:
        return [("read_memory", {"uri": uri}) for _, uris in done["list_memory"] for uri in uris]
    questions = {args["uri"]: text for args, text in done.get("read_memory", [])}
    if "search_sources" not in done:
        return [("search_sources", {"query": q}) for q in questions.values() or [request.split(". ", 1)[0]]]
    if "write_memory" not in done:
        return findings(done["search_sources"], questions, request)
    return []


def findings(searched: list[tuple[dict[str, Any], Any]], questions: dict[str, str], request: str) -> list:
    """What to remember: each source found as a finding, an answer under each question, the user's style."""
    calls = [write(f"memory://agent/findings/{name}", text) for _, found in searched for name, text in found.items()]
    for uri, (_, found) in zip(questions, searched, strict=False):  # one search per question, in order
        for name, text in list(found.items())[:1]:
            calls.append(write(uri, f"Answer (researcher): {text} See memory://agent/findings/{name}.", "append"))
    if style := re.search(r"\bI (?:like|prefer) (.+?)\.?$", request):
        calls.append(write("memory://user/preferences/answer-style", style.group(1)))
    return calls


def write(uri: str, content: str, mode: str = "replace") -> tuple[str, dict[str, str]]:
    return ("write_memory", {"uri": uri, "content": content, "mode": mode})


def report(done: Mapping[str, list[tuple[dict[str, Any], Any]]], recalled: int) -> str:
    written = [args["uri"] for args, _ in done.get("write_memory", [])]
    return f"Recorded {len(written)} memories: {', '.join(written)} (OpenRath recalled {recalled} for the request)."


def chat_response(text: str | None, calls: list[tuple[str, dict]]) -> RathLLMChatResponse:
    """A completion as an OpenAI-compatible API returns it: `text`, or the tool calls (name, arguments)."""
    parts = tuple(
        RathLLMToolCallPart(
            id=f"call_{uuid.uuid4().hex[:8]}",
            type="function",
            function=RathLLMToolCallFunction(name, json.dumps(args), args, arguments_parse_error=False),
        )
        for name, args in calls
    )
    message = RathLLMAssistantMessage(content=text, tool_calls=parts or None)
    choice = RathLLMChatChoice(index=0, finish_reason="tool_calls" if parts else "stop", message=message)
    return RathLLMChatResponse(id=uuid.uuid4().hex, choices=(choice,), created=int(time.time()), model="scripted")


# a provider kind of our own: OpenRath sends this model's calls to the scripted client, never to a network
register_chat_client("scripted-researcher", ScriptedResearcher)
RESEARCHER_MODEL = Provider(model="scripted-researcher", provider_kind="scripted-researcher")


def run_researcher(memory: MemoryStore, request: str) -> str:
    """One OpenRath session of the researcher on our store: its reply and its committed transcript."""
    # options["store"]: the handle this task opened by key, as the flyte Agent's task opens its own (one
    # key, one layout, whichever framework writes); options["key"] would have the backend open it. "actor"
    # names the researcher in the store's commits and audit trail.
    spec = MemoryStoreSpec(options={"store": memory, "actor": "researcher"})
    store = rm.get("flyte").open(spec)
    prompt = "You research questions for the team; keep what you find in memory."
    with flow.Agent(prompt, RESEARCHER_MODEL, researcher_tools(store), memory=store, commit_on_forward=True) as agent:
        out = agent(Session.from_user_message(request))  # recall, the tool loop, then the commit
        archived = f"memory://session/{out.id}/transcript"
        transcript = str(getattr(store.dispatch(MemoryOpRead(uri=archived)), "data", ""))
        return f"{out.text()}\n  (committed: {archived}, {len(transcript.splitlines())} messages)"


@env.task
async def research(key: str, request: str) -> str:
    """The OpenRath researcher, on the store of `key`."""
    memory = await MemoryStore.get_or_create.aio(key=key)
    # OpenRath's API is synchronous and refuses to block an event loop: it gets a thread of its own
    return await asyncio.to_thread(run_researcher, memory, request)


# -- the flyte Agent: reads the researcher's files through the store -----------------------------------


def advisor_tools(memory: MemoryStore) -> list[Any]:
    """The advisor's tools: the store's search and files (the researcher's entries among them)."""

    async def search_memory(query: str) -> str:
        """Search the team's shared memory; one 'path: snippet' line per hit, best first."""
        # the researcher's agent memories: not openrath/session/, where its commits archive its conversations
        hits = await memory.search.aio(query, prefix="openrath/agent")
        return "\n".join(f"{hit.path}: {hit.snippet}" for hit in hits) or "(nothing found)"

    async def list_memory(prefix: str) -> str:
        """List the files of shared memory under a folder."""
        return "\n".join(await memory.list_paths.aio(prefix))

    async def read_memory(path: str) -> str:
        """Read one file of shared memory."""
        return await memory.read_text.aio(path, default="(no such file)")

    async def ask_researcher(question: str) -> str:
        """Leave the researcher a question to look into next (an OpenRath memory under agent/questions)."""
        slug = "-".join(re.findall(r"\w+", question.lower()))
        path = path_of(f"memory://agent/questions/{slug}")  # the file OpenRath's backend reads that URI from
        await memory.write_text.aio(path, question, actor="advisor", reason="a question for the researcher")
        return f"left at {path}"

    return [search_memory, list_memory, read_memory, ask_researcher]


async def scripted_advisor(
    model: str, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> LLMMessage:
    """A scripted stand-in for the advisor's LLM: search for the question and list the user's preferences,
    read what it found, ask the researcher what the findings leave open, then answer from what it read."""
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    done = results_of(messages[start:])
    if not done:
        return call(("search_memory", {"query": messages[start]["content"]}), ("list_memory", {"prefix": PREFERENCES}))
    if "read_memory" not in done:
        hits = [line.split(": ", 1)[0] for line in done["search_memory"][0][1].splitlines() if ": " in line]
        return call(*(("read_memory", {"path": path}) for path in [*hits, *done["list_memory"][0][1].split()]))
    if "ask_researcher" not in done:
        return call(("ask_researcher", {"question": FOLLOW_UP}))
    return LLMMessage(content=answer({args["path"]: text for args, text in done["read_memory"]}))


def results_of(turn: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], str]]]:
    """Each tool called in `turn` (the messages since the question): its (arguments, result) pairs."""
    called = {c["id"]: json.loads(c["function"]["arguments"]) for m in turn for c in m.get("tool_calls") or ()}
    done: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for m in turn:
        if m["role"] == "tool":
            done.setdefault(m["name"], []).append((called[m["tool_call_id"]], m["content"]))
    return done


def answer(read: dict[str, str]) -> str:
    """The reply from the files read: the findings with their paths, in the style the user asked for."""
    style = " ".join(text for path, text in read.items() if path.startswith(PREFERENCES)).split()
    found = [f"{text} ({path})" for path, text in read.items() if "/findings/" in path]
    asked = f"I asked the researcher: {FOLLOW_UP}"
    if "bullet" not in " ".join(style):
        return " ".join([*found, asked])
    count = next((n for n, word in enumerate(NUMBERS, 1) if word in style), len(found))
    return "\n".join([*(f"- {line}" for line in found[:count]), asked])


def call(*calls: tuple[str, dict[str, Any]]) -> LLMMessage:
    """An assistant message calling `calls`, each (tool name, arguments)."""
    tool_calls = [{"id": f"call_{uuid.uuid4().hex[:8]}", "name": name, "arguments": args} for name, args in calls]
    return LLMMessage(content="", tool_calls=tool_calls)


@env.task
async def advise(key: str, question: str) -> str:
    """The flyte Agent, on the store of `key`: its transcript is the store's, its tools the store's files."""
    memory = await MemoryStore.get_or_create.aio(key=key)
    agent = Agent(
        name="advisor",
        instructions="Answer the team from shared memory: the researcher's findings, in the user's style.",
        tools=advisor_tools(memory),
        call_llm=scripted_advisor,
        parallel_tool_calls=False,
    )
    result = await agent.run.aio(question, memory=memory)
    await memory.save.aio(actor="advisor", reason="answered from the researcher's findings")
    return result.summary if not result.error else f"[agent error] {result.error}"


# -- what the store holds now ----------------------------------------------------------------------------


@env.task
async def what_is_shared(key: str) -> str:
    """Both frameworks' entries, the transcripts and the commits of the store of `key`."""
    memory = await MemoryStore.open.aio(key=key)
    lines = [f"store: {memory.remote_path}", "OpenRath entries (openrath/<scope>/...md):"]
    for path in await memory.list_paths.aio("openrath"):
        meta = await memory.get_meta.aio(path)
        lines.append(f"  {path} (by {meta.updated_by if meta else '?'})")
    roles = [m["role"] for m in memory.messages]
    counts = f"{plural(len(roles), 'message')}, {plural(roles.count('tool'), 'tool result')}"
    lines.append(f"flyte Agent transcript (messages.json): {counts}")
    sessions = {path.split("/")[1] for path in await memory.list_paths.aio("sessions")}
    lines.append(f"OpenRath sessions committed: {len(sessions)} (record logs sessions/openrath-<id>, two a run)")
    commits = await memory.log.aio(limit=COMMITS_SHOWN)  # newest first, as `log` and the other workflows
    lines += [
        f"the newest {COMMITS_SHOWN} commits (a reused key holds earlier runs' too), newest first:",
        *(f"  #{c.seq} {c.actor}: wrote {list(c.wrote)}, +{plural(c.appended, 'message')}" for c in commits),
    ]
    return "\n".join(lines)


def main() -> None:
    args = _support.parser(__doc__, default_key="frameworks").parse_args()
    with _support.connect(args) as target:
        print(f"An OpenRath agent and a flyte Agent share the store {target.key!r} on {target.where()}.")
        print(f"\n--- run 1: the OpenRath researcher ---\nuser: {REQUEST}")
        print(f"researcher: {target.run(research, key=target.key, request=REQUEST)[0]}")
        print(f"\n--- run 2: the flyte Agent, on the same key ---\nuser: {QUESTION}")
        print(f"advisor:\n{target.run(advise, key=target.key, question=QUESTION)[0]}")
        print(f"\n--- run 3: the OpenRath researcher again ---\nuser: {FOLLOW_UP_REQUEST}")
        print(f"researcher: {target.run(research, key=target.key, request=FOLLOW_UP_REQUEST)[0]}")
        print("\n=== What the store holds ===")
        print(target.run(what_is_shared, key=target.key)[0])
        print(
            target.look_inside(
                "ls openrath",
                "cat openrath/agent/questions/is-the-evaluation-job-slower-too.md",
                "messages --tail 3",
                "log",
            )
        )


if __name__ == "__main__":
    main()
