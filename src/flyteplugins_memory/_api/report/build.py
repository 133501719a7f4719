"""`store.report()`: one self-contained HTML page of a store, and its place in a Flyte task's report.

Gathering reads the store through its public API only (`list_paths`, `get_meta`, `list_versions`,
`read_bytes`, `messages`, `log`, `at`, `proposals`, `records`, `audit_tail`, `has_unsaved_changes`; the
deeper sections in `extras`) into a small `Snapshot`; rendering it is a pure function of that snapshot
(`_api.report.html`). The page shows the handle's view: unsaved writes, deletes,
messages and audit events are in it (and the page says so); the commit log shows saved commits only.
Big stores are bounded: the newest `max_*` entries of each section, with a line saying what is left out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._journal.commit_log import Commit
from ..._rules.arguments import check_flag, check_int
from ..._rules.codecs import MemoryMeta, utc_timestamp
from ..._rules.proposals import Proposal
from . import extras
from .contents import FileDiff, Preview, message_times
from .extras import LogRows
from .html import render_document, render_fragment

if TYPE_CHECKING:
    from ..store import MemoryStore

logger = logging.getLogger(__name__)

#: the tab of the task's Flyte report the page goes to (flyte's Agent uses "Agent")
REPORT_TAB = "Memory"


@dataclass(frozen=True)
class FileRow:
    """One file of the store: its size, last writer and metadata from its sidecar, its version count, and
    its content (`preview`: None where the page's content budget ran out)."""

    path: str
    size: int | None
    actor: str
    updated_at: str
    reason: str
    versions: int
    metadata: tuple[tuple[str, object], ...] = ()
    preview: Preview | None = None


@dataclass(frozen=True)
class Limits:
    """How much of each section a page shows (the newest entries)."""

    files: int = 500
    messages: int = 200
    commits: int = 50
    events: int = 200
    #: files whose content is shown (the first ones in path order)
    contents: int = 100
    #: newest commits whose changes are shown as diffs, and paths diffed per commit
    diff_commits: int = 10
    diff_paths: int = 20
    proposals: int = 100
    logs: int = 20
    #: newest records shown per record log or session
    records: int = 50


@dataclass(frozen=True)
class Snapshot:
    """Everything a page shows, gathered once; ``*_hidden`` count what the limits left out (for commits and
    audit events, whose totals would cost a full read, ``1`` means "some", not an exact count)."""

    key: str
    location: str
    generated_at: str
    unsaved: bool
    files: tuple[FileRow, ...]
    files_hidden: int
    total_bytes: int
    messages: tuple[dict[str, Any], ...]
    messages_hidden: int
    commits: tuple[Commit, ...]
    commits_more: bool
    events: tuple[dict[str, Any], ...]
    events_more: bool
    #: the time of each shown message ("" unknown, "unsaved"), from the commit that saved it
    message_times: tuple[str, ...] = ()
    diffs: dict[int, list[FileDiff]] | None = None
    proposals: tuple[Proposal, ...] = ()
    proposals_hidden: int = 0
    logs: tuple[LogRows, ...] = ()
    logs_hidden: int = 0


async def page(
    store: MemoryStore, *, publish: bool, max_files: int, max_messages: int, max_commits: int, max_events: int
) -> str:
    """`MemoryStore.report`: gather, render, and with `publish` put the fragment in the task's report."""
    check_flag("publish", publish)
    limits = Limits(
        check_int("max_files", max_files, minimum=1),
        check_int("max_messages", max_messages, minimum=1),
        check_int("max_commits", max_commits, minimum=1),
        check_int("max_events", max_events, minimum=1),
    )
    snapshot = await gather(store, limits)
    if publish:
        await publish_fragment(render_fragment(snapshot))
    return render_document(snapshot)


async def gather(store: MemoryStore, limits: Limits) -> Snapshot:
    """Read what a page shows from `store` (public API only)."""
    paths: list[str] = await store.list_paths.aio()  # loads the store first
    shown = paths[: limits.files]
    metas: list[MemoryMeta | None] = [await store.get_meta.aio(p) for p in shown]
    counts: list[list[str]] = await extras.bounded([lambda p=p: store.list_versions.aio(p) for p in shown])
    contents = await extras.previews(store, shown[: limits.contents], metas[: limits.contents])
    commits: list[Commit] = await store.log.aio(limit=limits.commits + 1)
    events: list[dict[str, Any]] = await store.audit_tail.aio(limits.events + 1)
    messages = list(store.messages)
    states = extras.States(store)  # the newest commit's state serves the message times and its diff
    committed = await extras.committed_messages(store, states, commits[0] if commits else None)
    times = message_times(messages, committed, commits)
    proposals, proposals_hidden = await extras.proposals(store, limits.proposals)
    logs = extras.log_names(paths)
    return Snapshot(
        key=store.key,
        location=store.remote_path or "",
        generated_at=utc_timestamp(),
        unsaved=store.has_unsaved_changes(),
        files=tuple(_row(*row) for row in zip(shown, metas, counts, _padded(contents, len(shown)), strict=True)),
        files_hidden=len(paths) - len(shown),
        total_bytes=sum(m.bytes for m in metas if m is not None),
        messages=tuple(messages[-limits.messages :]),
        messages_hidden=max(0, len(messages) - limits.messages),
        commits=tuple(commits[: limits.commits]),
        commits_more=len(commits) > limits.commits,
        events=tuple(reversed(events[-limits.events :])),  # newest first, like the commit log
        events_more=len(events) > limits.events,
        message_times=tuple(times[-limits.messages :]),
        diffs=await extras.diffs(states, commits[: limits.commits], limits.diff_commits, limits.diff_paths),
        proposals=tuple(proposals),
        proposals_hidden=proposals_hidden,
        logs=tuple(await extras.logs(store, logs[: limits.logs], limits.records)),
        logs_hidden=max(0, len(logs) - limits.logs),
    )


def _padded(previews: list[Preview], length: int) -> list[Preview | None]:
    return [*previews, *[None] * (length - len(previews))]


def _row(path: str, meta: MemoryMeta | None, versions: list[str], content: Preview | None) -> FileRow:
    if meta is None:
        return FileRow(path, None, "", "", "", len(versions), (), content)
    metadata = tuple(sorted(meta.metadata.items()))
    return FileRow(path, meta.bytes, meta.updated_by, meta.updated_at, meta.reason, len(versions), metadata, content)


async def publish_fragment(fragment: str) -> bool:
    """Put `fragment` in the current task's Flyte report under `REPORT_TAB` and flush the report; outside a
    task, log a warning and return False (as flyte's own report calls, it is a no-op there)."""
    import flyte
    import flyte.report

    if not flyte.ctx():
        logger.warning("store.report(publish=True) outside a Flyte task: there is no task report to add it to")
        return False
    flyte.report.get_tab(REPORT_TAB).replace(fragment)
    await flyte.report.flush.aio()
    return True
