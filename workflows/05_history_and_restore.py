"""History and restore: an agent's plan edited over several runs, a bad edit, a diff, a restore.

A planning agent keeps its plan in ``plan.md`` of a keyed store. Each day is its own ``flyte.run``: the
task opens the store by key, reads the plan, revises it (scripted, no model needed), writes it with who
and why, and saves: every save is a commit and every committed content a version. On day 4 a buggy
"tidy" tool, meant to drop the finished steps, keeps only them and loses the heading. An auditor task
then lists the plan's versions (``history``: id, sha256, time, actor, reason, size), reads each one
(``read_version``) and checks it, prints what the bad edit changed (``diff``), and restores the last good
version (``restore``: a new audited write on top; the bad version stays in the history). A last task
travels in time: for each commit of the plan (``log``) it opens the whole store as of that commit
(``at``, a read-only view) and reads the plan and the transcript there.

Run: python workflows/05_history_and_restore.py [--s3 | --remote] [--key KEY]
"""

from __future__ import annotations

from collections.abc import Callable

import _support
import flyte
from _support import plural

from flyteplugins_memory import Commit, HistoryEntry, MemoryStore, ReadOnlySnapshot

PLAN = "plan.md"
HEADING = "# Plan: launch the docs site"
#: a plan with fewer steps than this lost some: no day of the script ever removes one
MIN_STEPS = 3
#: versions the auditor lists and checks, newest first (a reused key holds earlier runs' versions too)
HISTORY_SHOWN = 10

Revision = Callable[[str], str]


# -- the planning agent's scripted revisions, one a day ---------------------------------------------------


def start(_plan: str) -> str:
    """Day 1 writes a fresh plan, whatever is there: a reused key tells the whole story again."""
    steps = ("write the outline", "draft the pages", "review with the team")
    return f"{HEADING}\n" + "".join(f"- [ ] {step}\n" for step in steps)


def done(step: str) -> Revision:
    return lambda plan: plan.replace(f"- [ ] {step}\n", f"- [x] {step}\n")


def add(step: str) -> Revision:
    return lambda plan: f"{plan}- [ ] {step}\n"


def both(first: Revision, second: Revision) -> Revision:
    return lambda plan: second(first(plan))


def buggy_tidy(plan: str) -> str:
    """A tool meant to drop the finished steps: its test is inverted, so it keeps only those, and the
    heading (not a step) goes with the rest."""
    return "".join(line for line in plan.splitlines(keepends=True) if line.startswith("- [x]"))


#: each day's run: (actor, reason, revision)
DAYS: list[tuple[str, str, Revision]] = [
    ("planner", "start the plan", start),
    ("planner", "outline written; the site needs a domain", both(done("write the outline"), add("set up the domain"))),
    ("planner", "pages drafted; plan the announcement", both(done("draft the pages"), add("announce the launch"))),
    ("planner/tidy-tool", "tidy: drop finished steps", buggy_tidy),
]

env = flyte.TaskEnvironment(name="memory_history_and_restore", image=_support.task_image())


def steps(plan: str) -> list[str]:
    return [line for line in plan.splitlines() if line.startswith("- [")]


def problem(plan: str) -> str:
    """What is wrong with a version of the plan (``""``: nothing): the auditor's whole policy."""
    if not plan.startswith(HEADING):
        return "the heading is gone"
    if len(steps(plan)) < MIN_STEPS:
        return f"only {len(steps(plan))} steps left"
    return ""


@env.task
async def plan_day(key: str, day: int) -> str:
    """One run of the planning agent: open the store by key, revise the plan as day `day` says, save."""
    actor, reason, revise = DAYS[day - 1]
    memory = await MemoryStore.get_or_create.aio(key=key)
    plan = revise(await memory.read_text.aio(PLAN))
    await memory.write_text.aio(PLAN, plan, actor=actor, reason=reason)
    memory.append({"role": "assistant", "name": actor, "content": f"day {day}: {reason}"})
    await memory.save.aio(actor=actor, reason=reason)
    version = (await memory.history.aio(PLAN, limit=1))[0]
    return f"day {day}: {version.version_id} by {actor}: {reason} ({len(steps(plan))} steps, {version.size} bytes)"


# -- the auditor: history, diff, restore ----------------------------------------------------------------


def history_line(version: HistoryEntry, verdict: str = "") -> str:
    what = "deleted" if version.deleted else f"{version.size:>4} bytes sha256 {version.sha256[:12]}"
    line = f"  {version.version_id:<5} {version.time}  {version.actor:<18} {what}  {version.reason!r}"
    return f"{line}  <- {verdict}" if verdict else line


async def check(memory: MemoryStore, version: HistoryEntry) -> str:
    """What is wrong with `version` of the plan, read back from the store (``""``: nothing)."""
    if version.deleted:
        return "deleted"
    return problem(await memory.read_version.aio(PLAN, version.version_id))


@env.task
async def audit(key: str) -> str:
    """Check every listed version of the plan; if the newest are bad, restore the last good one."""
    memory = await MemoryStore.open.aio(key=key)
    versions = await memory.history.aio(PLAN, limit=HISTORY_SHOWN)
    verdicts = [await check(memory, v) for v in versions]
    lines = [f"history of {PLAN} (newest first):", *map(history_line, versions, verdicts)]
    good = next((i for i, verdict in enumerate(verdicts) if not verdict), None)
    if good is None:
        return "\n".join([*lines, f"no good version among the newest {len(versions)}: nothing to restore"])
    if good == 0:
        return "\n".join([*lines, f"{PLAN} is good as it is: nothing to restore"])
    good_version, bad_version = versions[good], versions[good - 1]  # the bad one: the edit that broke it
    lines += [
        f"\nlast good version: {good_version.version_id}; the edit that broke it: {bad_version.version_id}",
        f"what {bad_version.version_id} ({bad_version.actor}) changed:",
        await memory.diff.aio(PLAN, good_version.version_id, bad_version.version_id),
    ]
    why = f"undo {bad_version.version_id} by {bad_version.actor}: {verdicts[good - 1]}"
    # expected_sha: restore only over what was reviewed, not over a fix someone saved meanwhile
    await memory.restore.aio(
        PLAN, good_version.version_id, actor="auditor", reason=why, expected_sha=versions[0].sha256
    )
    await memory.save.aio(actor="auditor", reason=why)
    return "\n".join([*lines, *await after_restore(memory, good_version, bad_version)])


async def after_restore(memory: MemoryStore, good: HistoryEntry, bad: HistoryEntry) -> list[str]:
    """The history after the restore: a new newest version, the bad one still listed under it."""
    versions = await memory.history.aio(PLAN, limit=HISTORY_SHOWN)
    newest, kept = versions[0], [v.version_id for v in versions]
    unchanged = await memory.diff.aio(PLAN, good.version_id) == ""
    return [
        f"restored {good.version_id} as {newest.version_id} by {newest.actor}: {newest.reason!r}",
        f"history after the restore (newest first; {bad.version_id} is still there: {bad.version_id in kept}):",
        *(history_line(v) for v in versions[:3]),
        f"{PLAN} now has the content of {good.version_id}: {newest.sha256 == good.sha256 and unchanged}",
        f"{PLAN} now:",
        *(f"    {line}" for line in (await memory.read_text.aio(PLAN)).splitlines()),
    ]


# -- time travel: the whole store as of a commit ------------------------------------------------------


@env.task
async def look_back(key: str) -> str:
    """The plan and the transcript as of each commit that changed the plan (this run's: the days and the
    restore), from read-only views of the whole store (``at``)."""
    memory = await MemoryStore.open.aio(key=key)
    commits = await memory.log.aio(limit=len(DAYS) + 1, path=PLAN)
    lines = [await as_of(memory, commit) for commit in reversed(commits)]  # oldest first, as the story went
    first = await memory.at.aio(commits[-1])
    try:  # the past is read-only: a view of a commit has no working copy to save
        await first.write_text.aio(PLAN, "rewrite the past")
    except ReadOnlySnapshot as refused:
        lines.append(f"writing to the view as of #{first.seq} is refused: ReadOnlySnapshot: {refused}")
    return "\n".join(lines)


async def as_of(memory: MemoryStore, commit: Commit) -> str:
    """One line: the plan and the transcript as the whole store was right after `commit`."""
    past = await memory.at.aio(commit)
    plan = await past.read_text.aio(PLAN)
    state = problem(plan) or "good"
    counts = f"{plural(len(steps(plan)), 'step')}, {plural(len(past.messages), 'message')}"
    return f"  as of #{commit.seq} ({commit.actor}): {counts}, {state}"


def main() -> None:
    args = _support.parser(__doc__, default_key="plan-history").parse_args()
    with _support.connect(args) as target:
        print(f"A planning agent edits {PLAN} in the store {target.key!r} on {target.where()}, one run a day.")
        for day in range(1, len(DAYS) + 1):  # a new flyte.run each day: only the store carries over
            print(target.run(plan_day, key=target.key, day=day)[0])
        print("\n=== The auditor: history, diff, restore ===")
        print(target.run(audit, key=target.key)[0])
        print(f"\n=== Time travel: the whole store as of each commit of {PLAN} ===")
        print(target.run(look_back, key=target.key)[0])
        print(target.look_inside(f"history {PLAN}", f"log --path {PLAN}", "audit --tail 10"))


if __name__ == "__main__":
    main()
