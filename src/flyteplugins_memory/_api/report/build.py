"""`store.report()`: one self-contained HTML page of a store, and its place in a Flyte task's report.

Gathering reads the store through its public API only (`list_paths`, `get_meta`, `list_versions`,
`messages`, `log`, `audit_tail`, `has_unsaved_changes`) into a small `Snapshot`; rendering it is a pure
function of that snapshot (`_api.report.html`). The page shows the handle's view: unsaved writes, deletes,
messages and audit events are in it (and the page says so); the commit log shows saved commits only.
Big stores are bounded: the newest `max_*` entries of each section, with a line saying what is left out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._journal.commit_log import Commit
from ..._rules.arguments import check_flag, check_int
from ..._rules.codecs import MemoryMeta, utc_timestamp
from .html import render_document, render_fragment

if TYPE_CHECKING:
    from ..store import MemoryStore

logger = logging.getLogger(__name__)

#: the tab of the task's Flyte report the page goes to (flyte's Agent uses "Agent")
REPORT_TAB = "Memory"
#: how many version directories are listed at once (one listing per file shown)
_LISTING_CONCURRENCY = 16


@dataclass(frozen=True)
class FileRow:
    """One file of the store: its size and last writer from its sidecar, and its version count."""

    path: str
    size: int | None
    actor: str
    updated_at: str
    reason: str
    versions: int


@dataclass(frozen=True)
class Limits:
    """How much of each section a page shows (the newest entries)."""

    files: int = 500
    messages: int = 200
    commits: int = 50
    events: int = 200


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
    counts = await _bounded([lambda p=p: store.list_versions.aio(p) for p in shown])
    commits: list[Commit] = await store.log.aio(limit=limits.commits + 1)
    events: list[dict[str, Any]] = await store.audit_tail.aio(limits.events + 1)
    messages = list(store.messages)
    return Snapshot(
        key=store.key,
        location=store.remote_path or "",
        generated_at=utc_timestamp(),
        unsaved=store.has_unsaved_changes(),
        files=tuple(_row(p, m, len(v)) for p, m, v in zip(shown, metas, counts, strict=True)),
        files_hidden=len(paths) - len(shown),
        total_bytes=sum(m.bytes for m in metas if m is not None),
        messages=tuple(messages[-limits.messages :]),
        messages_hidden=max(0, len(messages) - limits.messages),
        commits=tuple(commits[: limits.commits]),
        commits_more=len(commits) > limits.commits,
        events=tuple(reversed(events[-limits.events :])),  # newest first, like the commit log
        events_more=len(events) > limits.events,
    )


def _row(path: str, meta: MemoryMeta | None, versions: int) -> FileRow:
    if meta is None:
        return FileRow(path, None, "", "", "", versions)
    return FileRow(path, meta.bytes, meta.updated_by, meta.updated_at, meta.reason, versions)


async def _bounded(calls: list[Callable[[], Awaitable[list[str]]]]) -> list[list[str]]:
    """Run `calls` at most `_LISTING_CONCURRENCY` at a time, results in order."""
    gate = asyncio.Semaphore(_LISTING_CONCURRENCY)

    async def one(call: Callable[[], Awaitable[list[str]]]) -> list[str]:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


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
