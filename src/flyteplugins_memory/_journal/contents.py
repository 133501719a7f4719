"""Fetching committed file contents, verified, and saying precisely why one cannot be had.

A record's bytes are in its content-addressed blob, or, for a file imported from an upstream-written
store (``legacy``), at the file's own path, with a blob copy once a save changed that path (`_journal.preserve`).
Whatever is fetched must match the record's sha256. When nothing does, the error says why: the content
was purged (`ContentPurged`, told by a purge marker), the state it belongs to was collected by gc()
(`StateCollected`), or the store is damaged (`CorruptStore`).
"""

from __future__ import annotations

from collections.abc import Mapping

from .._rules.journal_objects import FileEntry, Origin
from .._rules.layout import blob_name
from .._rules.markers import parse_purged, purge_marker_name
from .._rules.offload import sha256_off_loop
from .._rules.purge_count import is_purged_entry
from .._rules.state import State
from ..errors import ContentPurged, CorruptStore, StateCollected, StorageError
from ..storage import _ranges
from ..storage._fsio import gather_all
from .journal_storage import JournalStorage
from .old_journal import old_view
from .opening import raise_if_collected


async def fetch_contents(
    remote: JournalStorage | None, records: Mapping[str, FileEntry], base: State
) -> dict[str, bytes]:
    """The verified contents of `records` (files of state `base`), or a typed error for the first missing.
    An entry of a purged path (`_rules.purge_count.is_purged_entry`) is `ContentPurged` even where another live
    path still holds the same bytes."""
    for path, record in records.items():
        if is_purged_entry(record.ext):
            raise ContentPurged(f"{path!r} was purged ({record.updated_by!r}: {record.reason!r}); open the store again")
    if remote is None:
        if records:
            raise CorruptStore(f"Stored content of {next(iter(records))!r} is missing: the store has no location")
        return {}
    # a state still in the old journal has its blobs there (and, while it moves, here too)
    sources = [old_view(remote), remote] if base.origin is Origin.OLD_JOURNAL else [remote]
    contents = await _fetch_from(sources[0], records, legacy_at_path=True)
    for source in sources[1:]:
        rest = {p: r for p, r in records.items() if p not in contents}
        contents.update(await _fetch_from(source, rest, legacy_at_path=False) if rest else {})
    for path, record in records.items():
        if path not in contents:
            raise await missing_content(remote, path, record, base.seq)
    return contents


async def _fetch_from(
    source: JournalStorage, records: Mapping[str, FileEntry], *, legacy_at_path: bool
) -> dict[str, bytes]:
    """What `source` holds of `records`: a legacy file at its path, else (or then) its blob."""
    first = {p: (p if r.legacy and legacy_at_path else blob_name(r.sha256)) for p, r in records.items()}
    found = await _read(source, first, records)
    contents = {p: found[first[p]] for p, r in records.items() if await _matches(found.get(first[p]), r)}
    fallback = {p: blob_name(r.sha256) for p, r in records.items() if p not in contents and first[p] == p}
    if fallback:
        copies = await _read(source, fallback, records)
        contents.update({p: copies[n] for p, n in fallback.items() if await _matches(copies.get(n), records[p])})
    return contents


async def _read(source: JournalStorage, names: dict[str, str], records: Mapping[str, FileEntry]) -> dict[str, bytes]:
    """The objects `names` (by path) that exist: small ones in one `read_many`, large ones (more than a
    part, `storage._ranges`) each as parallel ranged GETs, all at once. The size asked for is the record's
    (for a file imported from upstream, its sidecar's exact byte count): an object of another size fails
    the hash check as a whole GET of it would."""
    large = {p: n for p, n in names.items() if _ranges.is_large(records[p].bytes)}
    small = [n for p, n in names.items() if p not in large]
    if not large:
        return await source.read_many(small)
    calls = [source.read_many(small), *(_ranges.read_in_parts(source, n, records[p].bytes) for p, n in large.items())]
    found, *whole = await gather_all(calls)
    return {**found, **{n: data for n, data in zip(large.values(), whole, strict=True) if data is not None}}


async def _matches(data: bytes | None, record: FileEntry) -> bool:
    """Whether `data` is `record`'s content (hashed in a thread when large: the loop is shared)."""
    return data is not None and await sha256_off_loop(data) == record.sha256


async def missing_content(remote: JournalStorage, path: str, record: FileEntry, base_seq: int) -> Exception:
    """The error for content that storage does not hold (or holds altered)."""
    marker = await remote.read(purge_marker_name(record.sha256))
    if marker is not None and (purged := parse_purged(marker)) is not None:
        return ContentPurged(
            f"Content {record.sha256} of {path!r} was purged (purge({purged.path!r}) at {purged.at}); "
            "open the store again for its current state"
        )
    if base_seq > 0 and await _collected(remote, base_seq):
        return StateCollected(f"Content of {path!r} at commit {base_seq} was removed by gc(); open the store again")
    return CorruptStore(f"Stored content of {path!r} is missing or does not match its sha256")


async def _collected(remote: JournalStorage, seq: int) -> bool:
    """Whether commit `seq` is gone from the journal while a newer one exists."""
    try:
        await raise_if_collected(remote, seq)
    except StateCollected:
        return True
    except (CorruptStore, StorageError):
        return False
    return False
