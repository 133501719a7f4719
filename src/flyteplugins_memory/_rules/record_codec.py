"""Pure: the rules of record logs: what a record may be, how a segment encodes, how segments are named
and ordered.

A log named ``n`` is the set of segment files directly under directory ``n`` (``n/<id>.jsonl``, one JSON
value a line). Each save that appended to the log writes one new segment with an id no other writer
can choose, so concurrent saves never touch one path and merge like any two new files. The log is its
segments ordered by the commit that wrote them, then by id: a record's index never changes once it is
committed. A segment's record count is kept in its file entry (``ext["records"]``), so reading from an
index skips whole segments without fetching them.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptStore, InvalidPath, InvalidRecord
from .journal_objects import FileEntry
from .transcript import json_depth, unique_keys

#: The key of a segment's record count in its `FileEntry.ext`.
COUNT_EXT = "records"
#: The key of a rewritten segment's place in its log (the commit that first wrote it): see `position`.
POSITION_EXT = "position"
#: Deepest nesting a record may have (the journal's limit for messages, for the same reason: readers).
MAX_DEPTH = 100
#: ``<nanoseconds since the epoch, 20 digits>-<12 random hex digits>.jsonl``: ordered by when the
#: writer saved (which orders one handle's unsaved segments), unique across writers.
_SEGMENT = re.compile(r"[0-9]{20}-[0-9a-f]{12}\.jsonl")
#: The longest name a segment can have, to check that a log's segment paths fit the backend's limits.
LONGEST_SEGMENT = f"{'0' * 20}-{'0' * 12}.jsonl"


def segment_name() -> str:
    """A new segment's file name: no other save, of this process or another, picks the same one."""
    return f"{time.time_ns():020d}-{secrets.token_hex(6)}.jsonl"


def is_segment(log: str, path: str) -> bool:
    """Whether `path` is a segment of log `log` (a file directly under it, named as `segment_name`
    names them; other files there, and nested logs, are not part of it)."""
    head, _, name = path.rpartition("/")
    return head == log and _SEGMENT.fullmatch(name) is not None


def check_not_segment(rel: str) -> None:
    """`InvalidPath` for a write (text, bytes or metadata) to a name only a log's save gives its segments:
    a rewrite would move a segment's records to the end of its log (logs are ordered by the commit that
    last wrote each segment), and a file named like one would be read as records of the log."""
    head, _, name = rel.rpartition("/")
    if head and _SEGMENT.fullmatch(name):
        raise InvalidPath(f"{rel!r} is a segment of record log {head!r}: append with store.records({head!r})")


def check_record(record: Any) -> str:
    """The JSON line `record` is stored as, or `InvalidRecord` if it has none (see the error)."""
    try:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        line.encode("utf-8")
        decoded = json.loads(line, object_pairs_hook=unique_keys)
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidRecord(f"A record must be a JSON value: {exc}") from exc
    if json_depth(decoded) > MAX_DEPTH:
        raise InvalidRecord(f"A record is nested deeper than {MAX_DEPTH} levels")
    _check_keys(record)  # bounded: as deep as `decoded`
    return line


def _check_keys(value: Any) -> None:
    """`InvalidRecord` for a dict key that is not a str: JSON stores 1, 1.5, True or None as a string, so a
    read would return another record than the one appended."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidRecord(f"A record's dict keys must be str (JSON would store {key!r} as a string)")
            _check_keys(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_keys(item)


def check_records(records: Iterable[Any]) -> list[str]:
    """The JSON lines of `records`, all or none (`InvalidRecord` for the first that cannot be stored)."""
    return [check_record(r) for r in records]


def encode_segment(lines: Sequence[str]) -> str:
    """A segment's content: one record a line, each line ending in a newline."""
    return "".join(f"{line}\n" for line in lines)


def decode_segment(data: bytes, path: str, expected: int | None) -> list[Any]:
    """The records of segment `path` (fresh objects); `CorruptStore` if it is not JSON lines or holds
    another number of records than its entry says."""
    try:
        # "\n" only: str.splitlines also splits at U+2028, U+2029 and U+0085, which JSON leaves unescaped
        records = [json.loads(line) for line in data.decode("utf-8").split("\n") if line.strip()]
    except (ValueError, RecursionError) as exc:
        raise CorruptStore(f"Log segment {path!r} is not JSON lines: {exc}") from exc
    if expected is not None and len(records) != expected:
        raise CorruptStore(f"Log segment {path!r} holds {len(records)} records, its entry says {expected}")
    return records


@dataclass(frozen=True)
class Segment:
    """One segment of a log: its path, the commit that wrote it (None: not saved yet), its record count
    (None: its entry does not say, so it must be fetched to know)."""

    path: str
    commit: int | None
    count: int | None


def stored_count(entry: FileEntry) -> int | None:
    """The record count a segment's entry holds (entries are untrusted: anything else is unknown)."""
    count = entry.ext.get(COUNT_EXT)
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None


def position(entry: FileEntry) -> int | None:
    """Where a segment sits in its log: the commit that wrote it, or, for a segment a record purge
    rewrote (`_api.upkeep.message_purge`), the commit that first wrote it (``ext["position"]``), so that rewriting
    a segment never moves its records."""
    kept = entry.ext.get(POSITION_EXT)
    if isinstance(kept, int) and not isinstance(kept, bool) and kept >= 0:
        return kept
    return entry.last_commit()


def ordered(entries: dict[str, FileEntry]) -> list[Segment]:
    """The segments of a log in log order: committed ones by commit (`position`), then name; unsaved ones
    last, by name (the order this handle saved them in)."""
    segments = [Segment(p, position(e), stored_count(e)) for p, e in entries.items()]
    return sorted(segments, key=lambda s: (s.commit is None, s.commit or 0, s.path))


def window(counts: Sequence[int], since: int, limit: int | None) -> tuple[int, int, int]:
    """Which segments hold records ``since`` to ``since + limit`` (all from `since` if `limit` is None):
    ``(first, stop, skipped)``, the slice of segments to read and how many records come before them."""
    end = None if limit is None else since + limit
    first, skipped = 0, 0
    while first < len(counts) and skipped + counts[first] <= since:
        skipped += counts[first]
        first += 1
    stop, seen = first, skipped
    while stop < len(counts) and (end is None or seen < end):
        seen += counts[stop]
        stop += 1
    return first, stop, skipped


#: The record log that `compact_transcript` archives to unless told otherwise.
DEFAULT_ARCHIVE = "archive/transcript"
#: The entry extension that marks a segment `compact_transcript` wrote: it holds transcript messages, so
#: a message purge of the transcript redacts its copies there too (`_api.upkeep.message_purge`;
#: `_api.transcript.compaction` sets it).
ARCHIVE_EXT = "transcript_archive"
#: The reason a compaction's segment was written with (segments written before `ARCHIVE_EXT`).
ARCHIVE_REASON = "transcript messages archived by compact_transcript"


def is_transcript_archive(path: str, entry: FileEntry) -> bool:
    """Whether the segment at `path` (of entry `entry`) holds messages `compact_transcript` moved out of
    the transcript: marked so (`ARCHIVE_EXT`), written with a compaction's reason (before that mark), or a
    segment of the default archive log."""
    return (
        entry.ext.get(ARCHIVE_EXT) is True
        or entry.reason.endswith(ARCHIVE_REASON)
        or path.rpartition("/")[0] == DEFAULT_ARCHIVE
    )
