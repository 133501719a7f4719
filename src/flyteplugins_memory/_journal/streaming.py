"""Opening committed content as a stream (`MemoryStore.open_bytes`, and `StoreAt.open_bytes` for a past state):
which stored object to read, and the typed error when it is gone or changed.

`_journal.contents` fetches content whole; this module picks the same objects for a `ByteStream`, which
reads them in parts. A record's bytes are in its content-addressed blob, which is never rewritten, or,
for a file stored in place (new files since decision 0041, and files imported from upstream:
``legacy``), at the file's own path, with a blob copy once a save changed that path (`_journal.preserve`).

A file at its path can be replaced while a stream reads it (a save of ours copies the old bytes into a
blob first; upstream overwrites). So for a legacy record the first wave asks for the path's first parts
and, beside them, whether the blob copy exists: if it does, the stream reads the blob (stable); if not,
the path, and a replacement in the middle is caught by the stream's hash check and raised as
`ContentChanged` (open again: the blob copy is then there). Decision 0151. A past state (`store.at(commit)`,
decision 0162) needs nothing more: a file stored in place whose path a later save rewrote has its copy, which
the same probe finds.
"""

from __future__ import annotations

import asyncio
import functools

from .._rules.journal_objects import FileEntry, Origin
from .._rules.layout import blob_name
from .._rules.purge_count import is_purged_entry
from .._rules.state import State
from ..errors import ContentChanged, ContentPurged, CorruptStore
from ..storage._byte_stream import ByteStream
from .contents import missing_content
from .journal_storage import JournalStorage
from .old_journal import old_view

__all__ = ["open_committed"]


async def open_committed(remote: JournalStorage | None, path: str, record: FileEntry, base: State) -> ByteStream:
    """A stream over the committed content `record` names (file `path` of state `base`), its first parts
    requested; the typed error of `_journal.contents` if no stored object holds it."""
    if is_purged_entry(record.ext):
        raise ContentPurged(f"{path!r} was purged ({record.updated_by!r}: {record.reason!r}); open the store again")
    if remote is None:
        raise CorruptStore(f"Stored content of {path!r} is missing: the store has no location")
    sources = [old_view(remote), remote] if base.origin is Origin.OLD_JOURNAL else [remote]
    if record.legacy:
        stream = await _at_path(sources[0], path, record, base)
        if stream is not None:
            return stream
    for source in sources:
        stream = _stream(source, blob_name(record.sha256), path, record, _gone(remote, path, record, base))
        if await stream.found():
            return stream
    raise await missing_content(remote, path, record, base.seq)


async def _at_path(source: JournalStorage, path: str, record: FileEntry, base: State) -> ByteStream | None:
    """A stream over the file at its own path, unless a blob copy exists (then None: read that); both asked
    in one wave."""
    stream = _stream(source, path, path, record, _changed(source, path, record, base))
    found, copied = await asyncio.gather(stream.found(), source.exists(blob_name(record.sha256)))
    if copied or not found:
        stream.close()
        return None
    return stream


def _stream(source: JournalStorage, name: str, path: str, record: FileEntry, failure) -> ByteStream:
    return ByteStream(path, record.bytes, record.sha256, functools.partial(source.read_range, name), failure)


def _gone(remote: JournalStorage, path: str, record: FileEntry, base: State):
    """The error for a blob gone or damaged under a stream: purged, collected, or damaged."""

    async def failure() -> Exception:
        return await missing_content(remote, path, record, base.seq)

    return failure


def _changed(source: JournalStorage, path: str, record: FileEntry, base: State):
    """The error for a file at its path that no longer holds the bytes the stream opened: replaced by a
    writer (`ContentChanged`: its old bytes are then in a blob, or the commit that named them is gone), or
    else gone for the reasons a blob can be."""

    async def failure() -> Exception:
        error = await missing_content(source, path, record, base.seq)
        return error if isinstance(error, ContentPurged) else ContentChanged(path, record.sha256)

    return failure
