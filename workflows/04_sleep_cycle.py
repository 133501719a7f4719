"""Sleep cycle: agents propose memories by day, a trusted reviewer promotes them at night, the next run
recalls them by search.

The store is created with ``memory/`` as a read-only prefix, persisted with the store: no agent can write
there, however it opens the store. By day, N agent tasks run at once on the same store, each talking with
a user (scripted, no model needed) and staging what it learned with ``propose`` (path, text, who, why,
metadata). One of them also tries to write into ``memory/`` directly and is refused (``ReadOnlyPath``,
printed). At night a reviewer task opens its own ``trusted=True`` handle, reads every draft, and decides
by a simple policy: a low confidence or a fact the memory already holds (found with ``search``) is
discarded, the rest is accepted, each decision one audited commit into ``memory/``. The next morning a
fresh agent run searches ``memory/`` for what it needs and answers from the hits.

Run: python workflows/04_sleep_cycle.py [--s3 | --remote] [--key KEY]
"""

from __future__ import annotations

import asyncio
import re
import uuid

import _support
import flyte
from _support import plural

from flyteplugins_memory import MemoryStore, Proposal, ReadOnlyPath

MEMORY = "memory/"
#: below this confidence (an agent's own estimate, in the proposal's metadata) a proposal is discarded
MIN_CONFIDENCE = 0.5
#: what each day agent learned from its conversation: (topic, fact, confidence)
DAY = {
    "travel-agent": [("travel/seat", "Alice prefers a window seat on long flights.", 0.9)],
    "food-agent": [("food/diet", "Alice is vegetarian and avoids fish.", 0.95)],
    "smalltalk-agent": [("smalltalk/weather", "Alice said the weather was grey today.", 0.2)],
    "booking-agent": [("travel/seat-again", "On long flights Alice prefers a window seat.", 0.8)],
}

env = flyte.TaskEnvironment(name="memory_sleep_cycle", image=_support.task_image())


#: the day agent that also tries to write into memory/ itself, to show the refusal
IMPATIENT = "travel-agent"


@env.task
async def day_agent(key: str, agent: str, run: str) -> tuple[list[str], str]:
    """One agent's day: it may not write into memory/ itself, so it proposes what it learned. Returns the
    ids it staged and, for the agent that tried the direct write, the refusal it met."""
    memory = await MemoryStore.open.aio(key=key)
    memory.append({"role": "user", "name": agent, "content": f"(run {run}) a conversation with Alice"})
    refusal = ""
    if agent == IMPATIENT:
        try:
            await memory.write_text.aio(f"{MEMORY}{agent}.md", "unreviewed", actor=agent)
            raise AssertionError("an agent wrote into the read-only memory/ prefix")
        except ReadOnlyPath as refused:  # as designed: only a trusted reviewer's accept writes there
            refusal = f"{agent} tried to write {MEMORY}{agent}.md itself: {type(refused).__name__}: {refused}"
    ids = []
    for topic, fact, confidence in DAY[agent]:
        staged = await memory.propose.aio(
            f"{MEMORY}{topic}.md",
            fact,
            actor=agent,
            reason=f"learned in run {run}",
            metadata={"user": "alice", "confidence": confidence, "run": run},
        )
        ids.append(staged.id)
    await memory.save.aio(actor=agent, reason="proposals of the day")
    return ids, refusal


@env.task
async def day(key: str, run: str) -> tuple[list[str], list[str]]:
    """The day: every agent at once, on one store; their proposals merge like any concurrent saves.
    Returns the staged ids and the refusals the agents met."""
    await MemoryStore.get_or_create.aio(key=key, read_only_prefixes=(MEMORY,))  # persisted at create
    days = await asyncio.gather(*(day_agent(key, agent, run) for agent in DAY))
    return [i for ids, _ in days for i in ids], [refusal for _, refusal in days if refusal]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


async def _verdict(memory: MemoryStore, proposal: Proposal) -> tuple[str, str]:
    """The reviewer's policy: low confidence and known facts are discarded, the rest accepted."""
    confidence = proposal.metadata.get("confidence", 0)
    if not isinstance(confidence, int | float) or confidence < MIN_CONFIDENCE:
        return "discard", f"confidence {confidence} below {MIN_CONFIDENCE}"
    for hit in await memory.search.aio(proposal.content or "", prefix=MEMORY, limit=3):
        known = await memory.read_text.aio(hit.path)
        overlap = len(_words(known) & _words(proposal.content or "")) / max(1, len(_words(known)))
        if overlap >= 0.8:
            return "discard", f"already known as {hit.path}"
    return "accept", f"confidence {confidence}"


@env.task
async def night(key: str) -> list[str]:
    """The trusted reviewer: decides every draft, one audited commit each."""
    memory = await MemoryStore.open.aio(key=key, trusted=True)
    decisions = []
    for proposal in await memory.proposals.aio(status="draft", prefix=MEMORY):
        verdict, why = await _verdict(memory, proposal)
        decide = memory.accept if verdict == "accept" else memory.discard
        await decide.aio(proposal.id, actor="reviewer", reason=why)
        decisions.append(f"{verdict:<7} {proposal.path} ({proposal.actor}): {why}")
    return decisions


@env.task
async def next_morning(key: str, question: str) -> str:
    """A fresh agent run: it recalls by searching the reviewed memory, and answers from the hits."""
    memory = await MemoryStore.open.aio(key=key)
    hits = await memory.search.aio(question, prefix=MEMORY, limit=3, where={"user": "alice"})
    if not hits:
        return f"Q: {question}\nA: I know nothing about that yet."
    best = await memory.read_text.aio(hits[0].path)
    lines = [f"Q: {question}", f"A: {best}  [recalled from {hits[0].path}]", "hits:"]
    return "\n".join([*lines, *(f"  {h.score:6.2f} {h.path}: {h.snippet}" for h in hits)])


@env.task
async def sleep_cycle(key: str, run: str) -> str:
    staged, refusals = await day(key, run)
    decisions = await night(key)
    answer = await next_morning(key, "Which seat does Alice like on a long flight?")
    memory = await MemoryStore.open.aio(key=key)
    accepted = await memory.proposals.aio(status="accepted", prefix=MEMORY)
    held = len(await memory.list_paths.aio(MEMORY))
    return "\n".join(
        [
            f"day: {plural(len(staged), 'proposal')} staged by {plural(len(DAY), 'agent')} (run {run})",
            *(f"  refused: {r}" for r in refusals),
            "night: the reviewer decided",
            *(f"  {d}" for d in decisions),
            (
                f"memory/ now holds {plural(held, 'reviewed file')}"
                f" ({plural(len(accepted), 'accepted proposal')} over all runs)"
            ),
            "next morning:",
            answer,
        ]
    )


if __name__ == "__main__":
    args = _support.parser(__doc__, default_key="sleep-cycle").parse_args()
    with _support.connect(args) as target:
        print(target.run(sleep_cycle, key=target.key, run=uuid.uuid4().hex[:8])[0])
        print(target.look_inside("proposals", "ls memory/", 'search "window seat"'))
