"""Opening committed content as a stream (`MemoryStore.open_bytes`): which stored object to read, and the
typed error when it is gone.

`_journal.contents` fetches content whole; this module picks the same objects for a `ByteStream`, which
reads them in parts. The order differs on one point: a legacy file (imported from an upstream-written
store) is read from its blob copy when one exists, and from its own path only otherwise. A blob is
content-addressed and never rewritten, so a stream over it cannot see two versions; a file at its path
can be overwritten in place (by upstream) while a stream reads it, which the stream's hash check then
refuses (`CorruptStore`, as `read_bytes` raises for content that does not match).
"""

from __future__ import annotations

import functools

from .._rules.journal_objects import FileEntry, Origin
from .._rules.layout import blob_name
from .._rules.purge_count import is_purged_entry
from .._rules.state import State
from ..errors import ContentPurged, CorruptStore
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

    async def failure() -> Exception:
        return await missing_content(remote, path, record, base.seq)

    for source, name in _candidates(remote, path, record, base):
        stream = ByteStream(path, record.bytes, record.sha256, functools.partial(source.read_range, name), failure)
        if await stream.found():
            return stream
    raise await failure()


def _candidates(remote: JournalStorage, path: str, record: FileEntry, base: State) -> list[tuple[JournalStorage, str]]:
    """Where the content may be, in the order tried: its blob (in the old journal first while a state
    still lives there), then, for a legacy file, its own path."""
    sources = [old_view(remote), remote] if base.origin is Origin.OLD_JOURNAL else [remote]
    found = [(source, blob_name(record.sha256)) for source in sources]
    return [*found, (sources[0], path)] if record.legacy else found
