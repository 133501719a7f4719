"""Keeping the bytes of upstream-written files readable after a save changes them.

A store imported from upstream's layout records its files as ``legacy``: their bytes are at the file's
own path, not in the content-addressed blobs (and so does every new file a save created in place,
`_journal.inplace`). A save that rewrites or deletes such a path replaces those bytes (after its commit point),
so every older state that still names them would read something else. Before the commit point,
therefore, the old bytes are copied into the blob store (read and checked against their sha256, or taken
from the handle's working root, `WorkingCopy.held`); readers of a legacy record fall back to that blob when the
path no longer holds the bytes (`_journal.contents`). Each legacy file is copied at most once: after the save its
record is ours.

A copy is made for the base the save started from, which may not be the state it commits on: another
handle may have replaced the file meanwhile (it copied the bytes itself, before its own commit), and gc()
may since have collected every state naming them, their blob with them. A stale handle's copy of such
bytes, taken from its working root, would store them again where no commit names them, so a later purge
of the path (which walks the history gc left) could not find them. So a save owns only the copies whose
blob it created (create-only: a blob already there is whoever wrote it first's), copies nothing of a file
whose ttl ran out, and removes a copy it created again once it knows the state it commits on, or was
refused against (`unneeded_copies`), unless that state, or a state still stored, holds that content at
the path.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._rules.codecs import sha256_bytes
from .._rules.journal_objects import CommitRecord, FileEntry
from .._rules.layout import blob_name, log_name
from .._rules.markers import TOMBSTONE_MAX_BYTES
from .._rules.offload import parse_off_loop
from .._rules.state import State
from .._rules.ttl import is_expired
from ..errors import CorruptStore, MemoryStoreError
from ..storage._copy import Copied
from . import gc as _gc
from .journal_storage import JournalStorage
from .log_reads import LOG_DIR
from .opening import state_at
from .settle import settled

logger = logging.getLogger(__name__)

#: Commit records read at once when a copy's need is checked against the commits between two states.
_RECORD_BATCH = 64


@dataclass
class Copies:
    """What a save copied into blobs before its commit point."""

    #: the sha256 of every content copied (or found stored already)
    shas: list[str] = field(default_factory=list)
    #: path -> its base record, for the copies whose blob this save created (no blob held that content)
    created: dict[str, FileEntry] = field(default_factory=dict)


async def preserve_legacy(
    remote: JournalStorage,
    base: Mapping[str, FileEntry],
    changes: Mapping[str, FileEntry | None],
    held: Mapping[str, bytes] | None = None,
) -> Copies:
    """Copy into blobs the upstream-written bytes that `changes` is about to replace or delete; those the
    handle `held` (read from its working root before it changed them) are not fetched again when they
    match the record's sha256. Each copy is created where its blob is missing (the same request as a
    write); only those are this save's own (`Copies.created`): a blob already there holds that content for
    whoever wrote it (it is written again, which changes nothing). A file whose ttl ran out is not copied:
    no read shows it (`_rules.ttl`), and gc() removes such content at once."""
    wanted = copies_wanted(base, changes)
    if not wanted:
        return Copies()
    local = {p: d for p, d in (held or {}).items() if p in wanted and sha256_bytes(d) == wanted[p].sha256}
    (blobs, created), copied = await settled(
        _written(remote, wanted, local), _copied(remote, {p: r for p, r in wanted.items() if p not in local})
    )
    names = set(blobs) | {blob_name(wanted[p].sha256) for p, how in copied.items() if how is not Copied.MISMATCH}
    created |= {blob_name(wanted[p].sha256) for p, how in copied.items() if how is Copied.CREATED}
    return Copies(
        shas=[name.rsplit("/", 1)[-1] for name in names],
        created={p: r for p, r in wanted.items() if blob_name(r.sha256) in created},
    )


def copies_wanted(base: Mapping[str, FileEntry], changes: Mapping[str, FileEntry | None]) -> dict[str, FileEntry]:
    """The base records whose in-place bytes a save of `changes` copies (`preserve_legacy`); a save whose copy
    step failed half way treats every one of them as maybe copied (its cleanup checks them against purges)."""
    now = _gc.clock()
    return {
        p: r
        for p in changes
        if (r := base.get(p)) is not None and r.legacy and changes[p] != r and not is_expired(r, now)
    }


async def _copied(remote: JournalStorage, wanted: Mapping[str, FileEntry]) -> dict[str, Copied]:
    """Copy each wanted path's bytes into its blob in the backend, checked against the record's sha256
    (`storage._copy`: one round trip, no bytes through the client); where the backend cannot, read the
    bytes, check them and write the blob. What became of each path's copy."""
    paths = list(wanted)
    how = await settled(*(remote.copy_checked(p, blob_name(wanted[p].sha256), wanted[p].sha256) for p in paths))
    out = {p: h for p, h in zip(paths, how, strict=True) if h is not None}
    if rest := [p for p in paths if p not in out]:
        found = await remote.read_many(rest)
        checked = {p: d for p, d in found.items() if sha256_bytes(d) == wanted[p].sha256}
        _, created = await _written(remote, wanted, checked)
        out |= {p: Copied.CREATED if blob_name(wanted[p].sha256) in created else Copied.TAKEN for p in checked}
        out |= {p: Copied.MISMATCH for p in rest if p not in checked}
    for path in [p for p, h in out.items() if h is Copied.MISMATCH]:
        # already replaced (a concurrent save copied it first) or changed behind our back
        logger.info("Upstream-written bytes of %r are no longer at their path; not copied", path)
    return out


async def _written(
    remote: JournalStorage, wanted: Mapping[str, FileEntry], found: Mapping[str, bytes]
) -> tuple[dict[str, bytes], set[str]]:
    """Write the blobs of `found` (bytes checked against `wanted`'s records), create-only where missing;
    the blobs, and the names this call created."""
    blobs = {blob_name(wanted[p].sha256): d for p, d in found.items()}
    created = await remote.create_many(blobs)
    # a name left out was taken (a blob holds that content: rewriting it changes nothing) or its create
    # failed: written as before, so a failure fails the save before its commit point
    await remote.write_many({n: d for n, d in blobs.items() if n not in created})
    return blobs, created


async def unneeded_copies(
    remote: JournalStorage, base: State, created: Mapping[str, FileEntry], newest: State
) -> list[str]:
    """The blobs of copies this save `created` (`Copies.created`) that no commit still stored names, once
    the save knows `newest`: the state it committed on, or was refused against.

    A copy stays if `newest` is the save's `base` (its commit landed right on it), or holds that content at
    the path (its bytes are in place there, and a commit on it replaces them). Otherwise the file changed
    since the base, and the copy stays only while a stored state holds that content at the path: the stored
    commits are the log's suffix from the oldest one gc() left, so one listing of the log tells whether the
    base is still stored, and else the oldest stored state (and the checkpoint it is built on) is read.
    Free unless the file changed since the base; then one listing, and at most a record, a checkpoint and
    a part. In doubt (a read fails), every copy stays: a copy too many is an orphan the next gc() removes,
    one too few loses bytes a state still reads."""
    if not created or newest is base:
        return []
    try:
        await newest.files.need(created)
        doubtful = {p: r for p, r in created.items() if not _holds(newest, p, r.sha256)}
        if not doubtful:
            return []
        oldest = _oldest_record(await remote.list(under=LOG_DIR))
        if oldest is None or oldest <= base.seq:
            return []  # the base's own commit is still stored: it names every copy
        stored = newest if oldest == newest.seq else await state_at(remote, oldest)
        await stored.files.need(doubtful)
        doubtful = {p: r for p, r in doubtful.items() if not _holds(stored, p, r.sha256, checkpoint=True)}
        if doubtful:  # a commit between them may have written that content at the path again
            doubtful = await _not_written_between(remote, oldest, newest.seq, doubtful)
    except MemoryStoreError as exc:
        logger.warning("Could not tell whether this save's copies of in-place bytes are still needed: %s", exc)
        return []
    kept = {blob_name(r.sha256) for p, r in created.items() if p not in doubtful}  # one content, two paths
    return sorted({blob_name(r.sha256) for r in doubtful.values()} - kept)


async def _not_written_between(
    remote: JournalStorage, first: int, last: int, doubtful: dict[str, FileEntry]
) -> dict[str, FileEntry]:
    """Those of `doubtful` that no stored commit record after `first` and before `last` writes at its path
    with its content (unexpired): such a commit still reads the copy. Read in batches; rare (a stale save
    whose file changed since a base gc collected), and never a reason to drop a copy in doubt."""
    now = _gc.clock()
    seqs = list(range(first + 1, last))
    for start in range(0, len(seqs), _RECORD_BATCH):
        names = [log_name(seq) for seq in seqs[start : start + _RECORD_BATCH]]
        for name, data in (await remote.read_many(names)).items():
            try:
                record = await parse_off_loop(CommitRecord, data, name)
            except (ValueError, CorruptStore):
                continue  # a tombstone of a collected commit, or another marker: names no content
            for path in [p for p, r in doubtful.items() if _writes(record, p, r.sha256, now)]:
                del doubtful[path]
        if not doubtful:
            break
    return doubtful


def _writes(record: CommitRecord, path: str, sha256: str, now: float) -> bool:
    entry = record.delta.files.get(path)
    return entry is not None and entry.sha256 == sha256 and not is_expired(entry, now)


def _holds(state: State, path: str, sha256: str, *, checkpoint: bool = False) -> bool:
    """Whether `state` (with `checkpoint`: or the checkpoint it is built on) holds content `sha256` at `path`
    in an entry whose ttl has not run out (what gc() keeps a blob for)."""
    found = [state.files.get(path)] + ([state.files.base.lookup(path)] if checkpoint else [])
    now = _gc.clock()
    return any(entry is not None and entry.sha256 == sha256 and not is_expired(entry, now) for entry in found)


def _oldest_record(listing: Mapping[str, int]) -> int | None:
    """The oldest commit record a listing of the log holds (tombstones of collected commits left out)."""
    seqs = []
    for name, size in listing.items():
        stem = name.rsplit("/", 1)[-1]
        if stem.endswith(".json") and stem[:-5].isdigit() and size >= TOMBSTONE_MAX_BYTES:
            seqs.append(int(stem[:-5]))
    return min(seqs, default=None)
