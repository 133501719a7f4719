"""Gathering the report's deeper sections through the store's public API: file contents
(`read_bytes`), each shown commit's changes (`at`, the store as of a commit, on both sides of it),
proposals (`proposals`) and record logs and sessions (`records`, found among the files by their segment
names). Every section is bounded by `Limits`; a part that cannot be read (collected by gc, expired, a
store written by an older release) is shown as such instead of failing the page.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..._journal.commit_log import Commit
from ..._rules.codecs import MemoryMeta
from ..._rules.proposals import Proposal
from ..._rules.record_codec import is_segment
from ...errors import MemoryStoreError
from .contents import READ_LIMIT, FileDiff, Preview, file_diff, preview, unread

if TYPE_CHECKING:
    from ..history.time_travel import StoreAt
    from ..store import MemoryStore

#: how many reads (content, version listings) run at once: a page of 100 files on S3 is 7 waves, not 100
CONCURRENCY = 16
#: the prefix whose logs are sessions (`store.session(name)` is the log ``sessions/<name>``)
SESSIONS = "sessions/"


@dataclass(frozen=True)
class LogRows:
    """One record log (or session: `session` is its name) and its newest records."""

    name: str
    session: str | None
    count: int
    records: tuple[Any, ...]


T = TypeVar("T")


async def bounded(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run `calls` at most `CONCURRENCY` at a time, results in order."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def previews(store: MemoryStore, paths: Sequence[str], metas: Sequence[MemoryMeta | None]) -> list[Preview]:
    """The content of each of `paths`, `CONCURRENCY` reads at a time (each at most `READ_LIMIT` bytes, and
    only its preview kept: the page holds 16 contents at once, never all of them)."""
    return await bounded([lambda p=p, m=m: _preview(store, p, m) for p, m in zip(paths, metas, strict=True)])


async def _preview(store: MemoryStore, path: str, meta: MemoryMeta | None) -> Preview:
    size = meta.bytes if meta is not None else 0
    if size > READ_LIMIT:
        return unread(size, f"not shown: larger than {READ_LIMIT // 1024} KiB")
    try:
        data = await store.read_bytes.aio(path)
    except MemoryStoreError as error:
        return unread(size, f"not readable: {type(error).__name__}")
    return unread(size, "no content") if data is None else preview(data)


class States:
    """The store as of commits (`store.at`), each read once for the whole page; None for a commit the store
    never made (no import before a store's create) or one gc collected."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._views: dict[int, StoreAt | None] = {}

    async def at(self, seq: int) -> StoreAt | None:
        if seq not in self._views:
            try:
                self._views[seq] = await self._store.at.aio(seq) if seq >= 0 else None
            except MemoryStoreError:
                self._views[seq] = None
        return self._views[seq]


async def diffs(states: States, commits: Sequence[Commit], limit: int, paths: int) -> dict[int, list[FileDiff]]:
    """Each of the newest `limit` `commits`' changes (its first `paths` paths), by commit seq; a record log's
    segment is named, not diffed (the log's card shows its records)."""
    out: dict[int, list[FileDiff]] = {}
    for commit in [c for c in commits if c.wrote or c.deleted][:limit]:
        before, after = await states.at(commit.seq - 1), await states.at(commit.seq)
        changed = [(p, "write") for p in commit.wrote] + [(p, "delete") for p in commit.deleted]
        calls = [functools.partial(_diff, before, after, p, k, commit.seq) for p, k in changed[:paths]]
        # the first read of a past state loads its file index; reads racing it would each load it again
        first = [await calls[0]()] if calls else []
        out[commit.seq] = first + await bounded(calls[1:])
    return out


async def _diff(before: StoreAt | None, after: StoreAt | None, path: str, kind: str, seq: int) -> FileDiff:
    if _is_log_segment(path):
        return FileDiff(path, kind, note="a record log's segment (its records are under Record logs)")
    if after is None:
        return FileDiff(path, kind, note="content no longer stored (collected by gc)")
    try:
        old = await before.read_bytes.aio(path) if before is not None else None
        new = await after.read_bytes.aio(path)
    except MemoryStoreError as error:
        return FileDiff(path, kind, note=f"content not readable: {type(error).__name__}")
    return file_diff(path, kind, old, new, seq)


async def committed_messages(store: MemoryStore, states: States, newest: Commit | None) -> int:
    """How many messages the newest commit left (the rest of the handle's are unsaved)."""
    if newest is None:
        return 0
    view = await states.at(newest.seq)
    return len(view.messages) if view is not None else len(store.messages)


async def proposals(store: MemoryStore, limit: int) -> tuple[list[Proposal], int]:
    """The newest `limit` proposals of every status, and how many older ones are left out."""
    every: list[Proposal] = await store.proposals.aio()
    every.sort(key=lambda p: p.created_at, reverse=True)
    return every[:limit], max(0, len(every) - limit)


def log_names(paths: Sequence[str]) -> list[str]:
    """The record logs among `paths`: directories holding segments (``<log>/<segment name>``)."""
    return sorted({p.rpartition("/")[0] for p in paths if _is_log_segment(p)})


async def logs(store: MemoryStore, names: Sequence[str], records: int) -> list[LogRows]:
    """The newest `records` records of each log of `names`."""
    rows = []
    for name in names:
        log = store.records(name)
        count: int = await log.count.aio()
        newest: list[Any] = await log.read.aio(since=max(0, count - records))
        session = name[len(SESSIONS) :] if name.startswith(SESSIONS) and "/" not in name[len(SESSIONS) :] else None
        rows.append(LogRows(name, session, count, tuple(newest)))
    return rows


def _is_log_segment(path: str) -> bool:
    return is_segment(path.rpartition("/")[0], path)
