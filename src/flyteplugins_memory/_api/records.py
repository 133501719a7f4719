"""Record logs: `store.records(name)`, an append-only log of JSON records at any path of the store.

Appends stay in the handle (no I/O, like the transcript's) until `store.save()`, which writes each log's
new records as one new segment file (`_rules.record_codec`): an ordinary file of the store, with its sidecar,
audit event and journal entry, so concurrent saves merge as any two new files do and nothing is lost.
Reads list the log's segments from the file index and fetch only those that hold the records asked for.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any, Protocol

from .._base.syncify import syncify
from .._handle.checkout import Checkout
from .._handle.working_copy import WorkingCopy
from .._journal.purge import PurgeResult
from .._rules.admission import Access, PathAdmission
from .._rules.arguments import check_int
from .._rules.commit_info import check_note
from .._rules.record_codec import (
    COUNT_EXT,
    LONGEST_SEGMENT,
    Segment,
    check_records,
    decode_segment,
    encode_segment,
    is_segment,
    ordered,
    segment_name,
    stored_count,
    window,
)
from .._rules.writes import ChangeOptions
from ..errors import CorruptStore, InvalidArgument, ReadOnlyPath

__all__ = ["RecordLog"]

#: Segments fetched at once.
FETCH_BATCH = 16


class PendingRecords:
    """The records a handle appended and has not saved yet, by log (each as its JSON line)."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}

    def __bool__(self) -> bool:
        return any(self.lines.values())

    def add(self, log: str, lines: list[str]) -> None:
        self.lines.setdefault(log, []).extend(lines)

    def of(self, log: str) -> list[str]:
        return list(self.lines.get(log, ()))

    def drop_under(self, prefix: str) -> None:
        """Forget the records of the logs at or under directory `prefix` (``delete_prefix`` deleted it:
        a later save must not write them back)."""
        for log in [n for n in self.lines if n == prefix or n.startswith(prefix + "/")]:
            del self.lines[log]


class LogOwner(Protocol):
    """The store facade, as a log sees it."""

    messages: list[dict[str, Any]]
    audit: bool
    _checkout: Checkout
    _admission: PathAdmission
    _pending_records: PendingRecords


class RecordLog:
    """An append-only log of JSON records, stored under the store path `name` (``store.records(name)``).

    `append` and `extend` keep records in the handle until ``store.save()`` writes them (one new segment
    file per log and save, named ``<name>/<id>.jsonl``); concurrent saves of several handles, threads or
    processes all survive, each record once. The log's order is the order of the commits that saved its
    records (then segment id), so a record's index never changes once saved; this handle's unsaved records
    come last. Every I/O method runs as ``log.f(...)`` or ``await log.f.aio(...)``.
    """

    def __init__(self, store: LogOwner, name: str):
        self._store = store
        self._name = store._admission.admit(name, Access.READ)

    @property
    def name(self) -> str:
        """The log's path in the store (its segments are the files directly under it)."""
        return self._name

    def __repr__(self) -> str:
        return f"RecordLog({self._name!r})"

    def append(self, record: Any) -> None:
        """Append one JSON value (saved by ``store.save()``); `InvalidRecord` if it is none, and
        `ReadOnlyPath` / `ReservedPath` if the log may not be written."""
        self.extend([record])

    def extend(self, records: Iterable[Any]) -> None:
        """Append JSON values, all or none (`InvalidRecord` names the first that cannot be stored)."""
        if isinstance(records, str | bytes | dict):
            raise InvalidArgument(f"extend takes an iterable of records, got {type(records).__name__}")
        lines = check_records(list(records))
        self._admit_segment()
        self._store._pending_records.add(self._name, lines)

    @syncify
    async def discard_unsaved(self) -> int:
        """Forget this handle's unsaved records of the log, for one whose save cannot succeed (a file sits
        where the log's directory would be; another handle made the log's prefix read-only: `ReadOnlyPath`;
        the caller may not write there): the records appended since the last save, and the segments a
        refused save already staged (a save that fails keeps them staged, so that a retry commits them).
        Returns how many records were dropped. The handle's other changes stay, and the next save commits
        them; committed records are never touched."""
        store, name = self._store, self._name
        dropped = len(store._pending_records.lines.pop(name, []))
        staged = await store._checkout.look(store, lambda view: _staged_segments(view, name))
        if staged:
            dropped += sum(staged[p] for p in await store._checkout.revert(store, sorted(staged)))
        return dropped

    @syncify
    async def read(self, since: int = 0, limit: int | None = None) -> list[Any]:
        """Records `since` onwards (at most `limit`), oldest first, as fresh copies. Fetches only the
        segments that hold them (and those whose entry does not say how many records they hold)."""
        check_int("since", since)
        if limit is not None:
            check_int("limit", limit)
        segments, fetched = await self._counted()
        counts = [_count(s, fetched) for s in segments]
        first, stop, skipped = window(counts, since, limit)
        fetched |= await self._fetch([s for s in segments[first:stop] if s.path not in fetched])
        records = [r for s in segments[first:stop] for r in fetched[s.path]]
        records += [json.loads(line) for line in self._store._pending_records.of(self._name)]
        start = since - skipped
        return records[start:] if limit is None else records[start : start + limit]

    @syncify
    async def count(self) -> int:
        """How many records the log holds (this handle's unsaved ones included)."""
        segments, fetched = await self._counted()
        return sum(_count(s, fetched) for s in segments) + len(self._store._pending_records.of(self._name))

    @syncify
    async def purge(
        self, index: int, *, replacement: Any = None, actor: str = "agent", reason: str = ""
    ) -> PurgeResult:
        """Redact record `index` of the log (negative counts from the end) and remove every stored copy of
        its old value now: the segment that holds it is rewritten with the record replaced (it keeps its
        place: no index changes), and the segment's old content (its blob, version snapshots, search index
        segments) and any stored transcript message equal to the record (one ``compact_transcript``
        archived) go. The record becomes `replacement` (any JSON value; a str, ``"[redacted]"`` when None,
        becomes the content of a message of the same role when the record is a message).

        The handle's unsaved changes (and records) are saved first; the purge then commits on its own
        (commit kind ``purge``, audit op ``purge`` on the segment's path with ``record``: the index).
        `RecordNotFound` for an index outside the log, `InvalidArgument` for one that is not an int.
        Returns the `PurgeResult`."""
        from .upkeep.message_purge import purge_record  # the facade's message purge builds on this module

        check_int("index", index, minimum=None)  # a bad index saves nothing
        check_note("actor", actor)
        check_note("reason", reason)
        self._admit_segment()
        await save_pending(self._store, actor)
        return await purge_record(self._store, self._name, index, replacement, actor, reason)

    # -- internals ----------------------------------------------------------------------------------------

    def _admit_segment(self) -> None:
        """Refuse appends to a log that may not be written, before anything is appended."""
        longest = f"{self._name}/{LONGEST_SEGMENT}"
        try:
            self._store._admission.admit(longest, Access.WRITE)
        except ReadOnlyPath as exc:  # name the log, not the placeholder segment the check was made with
            raise ReadOnlyPath(str(exc).replace(repr(longest), f"record log {self._name!r}")) from None

    async def _counted(self) -> tuple[list[Segment], dict[str, list[Any]]]:
        """The log's segments in order, and the records of those whose count had to be fetched."""
        store, name = self._store, self._name
        segments = await store._checkout.look(store, lambda view: _segments(view, name), under=name)
        return segments, await self._fetch([s for s in segments if s.count is None])

    async def _fetch(self, segments: list[Segment]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for start in range(0, len(segments), FETCH_BATCH):
            batch = segments[start : start + FETCH_BATCH]
            for segment, records in zip(batch, await asyncio.gather(*map(self._fetch_one, batch)), strict=True):
                out[segment.path] = records
        return out

    async def _fetch_one(self, segment: Segment) -> list[Any]:
        data = await self._store._checkout.read(self._store, segment.path)
        if data is None:  # deleted between the listing and the read
            raise CorruptStore(f"Log segment {segment.path!r} was deleted while the log was read")
        return decode_segment(data, segment.path, segment.count)


def _segments(view: WorkingCopy, log: str) -> list[Segment]:
    entries = {p: e for p in view.paths(log) if is_segment(log, p) and (e := view.entry(p)) is not None}
    return ordered(entries)


def _staged_segments(view: WorkingCopy, log: str) -> dict[str, int]:
    """The segments of `log` that this handle staged and has not committed, with their record counts."""
    staged = {p: e for p, e in view.changes.files.items() if e is not None and is_segment(log, p)}
    return {p: stored_count(e) or 0 for p, e in staged.items()}


def _count(segment: Segment, fetched: dict[str, list[Any]]) -> int:
    return segment.count if segment.count is not None else len(fetched[segment.path])


async def save_pending(store: LogOwner, actor: str | None = None) -> None:
    """Write each log's unsaved records as one new segment of it (called by ``store.save()`` before it
    commits; the segment's audit event names the save's `actor`, ``"agent"`` when it names none). The
    records leave the pending list before the write (a second save running meanwhile must not write them
    again) and go back to its front if the write fails. Segments are written once and never changed, so
    they keep no version snapshots."""
    pending = store._pending_records.lines
    for log in [name for name, lines in pending.items() if lines]:
        path = store._admission.admit(f"{log}/{segment_name()}", Access.WRITE)
        lines = pending.pop(log)
        why = f"{len(lines)} record{'' if len(lines) == 1 else 's'} appended to log {log}"
        options = ChangeOptions(actor or "agent", why, None, False, store.audit)
        try:
            await store._checkout.write(store, path, encode_segment(lines), options, {COUNT_EXT: len(lines)})
        except BaseException:
            pending[log] = lines + pending.get(log, [])
            raise
