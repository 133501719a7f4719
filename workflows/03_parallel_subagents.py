"""Parallel subagents: N tasks write to one store at the same time, and nothing is lost.

A parent task opens the keyed store and fans out N subagent tasks at once (``asyncio.gather``), each
holding the same store. Every subagent writes its own ``findings/agent-<i>.md``, appends a message to the
shared transcript, and adds its line to one shared file, ``shared/summary.md``, through ``expected_sha``
(compare-and-swap): when another subagent saved first, ``save`` raises ``ConcurrencyError``, and the
subagent refreshes, re-reads the file, re-applies its line and saves again. Disjoint changes (its findings,
its message) merge on their own and are never retried away. A last task opens the store anew, proves that
every finding, message and summary line of this batch landed, and prints the merged transcript, the
audit trail and what the conflicts cost.

Run: python workflows/03_parallel_subagents.py [--s3 | --remote] [--key KEY] [--n N]
"""

from __future__ import annotations

import asyncio
import uuid

import _support
import flyte
from _support import plural

from flyteplugins_memory import ConcurrencyError, MemoryStore

SUMMARY = "shared/summary.md"
MAX_ATTEMPTS = 50

env = flyte.TaskEnvironment(name="memory_parallel_subagents", image=_support.task_image())


async def add_line(memory: MemoryStore, line: str, actor: str) -> int:
    """Append `line` to the shared summary and save, retrying on conflict; returns the retries it took."""
    for retries in range(MAX_ATTEMPTS):
        sha = await memory.current_sha.aio(SUMMARY)
        text = await memory.read_text.aio(SUMMARY, default="# Summary\n")
        try:
            await memory.write_text.aio(SUMMARY, f"{text}{line}\n", actor=actor, reason="summary", expected_sha=sha)
            await memory.save.aio(actor=actor, reason="findings and summary line")
            return retries
        except ConcurrencyError:
            # another subagent saved first: take its state (our findings and message stay), then re-apply
            await memory.refresh.aio()
    raise RuntimeError(f"{actor}: still conflicting after {MAX_ATTEMPTS} attempts")


@env.task
async def subagent(memory: MemoryStore, index: int, batch: str) -> int:
    """One subagent: its findings file, a transcript message, its line in the shared summary."""
    actor = f"agent-{index}"
    finding = f"{actor} of batch {batch}: looked at topic #{index} and found {index * index} things"
    await memory.write_text.aio(f"findings/{actor}.md", f"# {actor}\n{finding}\n", actor=actor, reason="finding")
    memory.append({"role": "assistant", "name": actor, "content": finding})
    return await add_line(memory, f"- {actor} (batch {batch}): {index * index} things", actor)


@env.task
async def fan_out(key: str, n: int, batch: str) -> list[int]:
    """Open the store once and run N subagents on it at the same time; returns each one's retries."""
    memory = await MemoryStore.get_or_create.aio(key=key)
    return list(await asyncio.gather(*(subagent(memory, i, batch) for i in range(n))))


@env.task
async def prove_nothing_lost(key: str, n: int, batch: str, retries: list[int]) -> str:
    """Open the store anew and check every subagent's finding, message and summary line; report."""
    memory = await MemoryStore.get_or_create.aio(key=key)
    actors = [f"agent-{i}" for i in range(n)]
    findings = [await memory.read_text.aio(f"findings/{a}.md") for a in actors]
    messages = [m for m in memory.messages if batch in str(m.get("content", ""))]
    summary = [line for line in (await memory.read_text.aio(SUMMARY)).splitlines() if f"(batch {batch})" in line]
    lost = [a for a, f in zip(actors, findings, strict=True) if batch not in f]
    lost += [f"message of {a}" for a in actors if not any(m.get("name") == a for m in messages)]
    lost += [f"summary line of {a}" for a in actors if not any(line.startswith(f"- {a} ") for line in summary)]
    if lost or len(messages) != n or len(summary) != n:
        raise AssertionError(f"lost or duplicated: {lost}; {len(messages)} messages, {len(summary)} summary lines")
    return report(memory, n, batch, messages, summary, retries) + "\n" + await trail(memory, actors)


def report(memory: MemoryStore, n: int, batch: str, messages: list, summary: list[str], retries: list[int]) -> str:
    costs = ", ".join(f"agent-{i}: {r}" for i, r in enumerate(retries))
    return "\n".join(
        [
            f"store: {memory.remote_path}",
            (
                f"batch {batch}: {plural(n, 'findings file')}, {plural(len(messages), 'transcript message')},"
                f" {plural(len(summary), 'summary line')}"
            ),
            "NOTHING LOST",
            (
                f"conflicts: {plural(sum(retries), 'retry', 'retries')} in all"
                f" ({sum(1 for r in retries if r)} of {plural(n, 'subagent')} retried)"
            ),
            f"retries per subagent: {costs}",
            "\nmerged transcript (this batch):",
            *(f"  [{m['name']}] {m['content']}" for m in messages),
            f"\n{SUMMARY} (this batch):",
            *(f"  {line}" for line in summary),
        ]
    )


async def trail(memory: MemoryStore, actors: list[str]) -> str:
    # a key reused across runs holds every earlier batch's writes too, under the same subagent names
    events = [e for e in await memory.audit_tail.aio(0) if e.get("actor") in actors]
    shown = events[-2 * len(actors) :]  # this batch: each subagent wrote its findings and the summary once
    commits = await memory.log.aio(limit=len(actors))
    return "\n".join(
        [
            (
                f"audit trail (newest {plural(len(shown), 'write')} by these subagents;"
                f" {len(events)} on this key, all runs):"
            ),
            *(f"  {e['ts']} {e['actor']:<9} {e['op']:<6} {e['path']}" for e in shown),
            "commits (newest first):",
            *(f"  #{c.seq} {c.actor}: wrote {list(c.wrote)}, +{plural(c.appended, 'message')}" for c in commits),
        ]
    )


def main() -> None:
    cli = _support.parser(__doc__, default_key="parallel-subagents")
    cli.add_argument("--n", type=int, default=8, help="how many subagents write at the same time (default 8)")
    args = cli.parse_args()
    if args.n < 1:
        cli.error("--n must be at least 1")
    batch = uuid.uuid4().hex[:8]
    with _support.connect(args) as target:
        print(f"{args.n} subagents write to the store {target.key!r} on {target.where()} at once (batch {batch}).")
        retries = target.run(fan_out, key=target.key, n=args.n, batch=batch)[0]
        print(target.run(prove_nothing_lost, key=target.key, n=args.n, batch=batch, retries=list(retries))[0])
        print("\n" + target.look_inside("log --limit 20", "audit --tail 20", f"cat {SUMMARY}"))


if __name__ == "__main__":
    main()
