"""Reading the journal's objects one at a time: a log slot, a commit record, a checkpoint, and the state a
record makes of its checkpoint. The ground `opening` and the old journal's reads (`old_journal`) stand on.
"""

from __future__ import annotations

from .._rules.index import CheckpointFiles
from .._rules.journal_objects import EMPTY_CHECKPOINT, Checkpoint, CommitRecord
from .._rules.layout import JOURNAL_DIR, checkpoint_name, log_name
from .._rules.markers import MARKER_MAX_BYTES, Deleted, Fence, Tombstone, parse_marker
from .._rules.offload import parse_off_loop
from .._rules.purge_count import purged_since
from .._rules.state import State
from ..errors import CorruptStore, StateCollected, StoreDeleted
from ..storage._contract import ObjectStorage
from .prefetch import Fetched

LOG_DIR = f"{JOURNAL_DIR}/log"


async def read_entry(
    remote: ObjectStorage, seq: int, fetched: Fetched | None = None
) -> CommitRecord | Tombstone | Fence | None:
    """What log slot `seq` holds: a commit record, a marker, or nothing (read ahead, if `fetched` was)."""
    data = await _read(remote, log_name(seq), fetched)
    if data is None:
        return None
    if len(data) <= MARKER_MAX_BYTES:  # markers are small; most records are not
        marker = parse_marker(data)
        if isinstance(marker, Deleted):  # nothing may be read or committed after a deletion
            raise StoreDeleted(marker.describe(remote.uri))
        if marker is not None:
            return marker
    record = await parse_off_loop(CommitRecord, data, log_name(seq))
    if record.seq != seq or not 0 <= record.checkpoint < seq:
        raise CorruptStore(f"Commit record {seq} is inconsistent (seq={record.seq}, checkpoint={record.checkpoint})")
    return record


async def _read(remote: ObjectStorage, name: str, fetched: Fetched | None) -> bytes | None:
    if fetched is not None:
        asked, data = fetched.answer(name)
        if asked:
            return data
    return await remote.read(name)


async def read_record(remote: ObjectStorage, seq: int, fetched: Fetched | None = None) -> CommitRecord | None:
    """Commit record `seq` of this journal; raises `StateCollected` if gc() removed it."""
    entry = await read_entry(remote, seq, fetched)
    if isinstance(entry, Tombstone):
        raise StateCollected(f"Commit {seq} of {remote.uri} was removed by gc(); open the store again")
    if isinstance(entry, Fence):
        raise CorruptStore(f"Commit slot {seq} of {remote.uri} holds a fence of a journal that moved")
    return entry


async def read_checkpoint(remote: ObjectStorage, seq: int, fetched: Fetched | None = None) -> Checkpoint:
    """Checkpoint `seq`; checkpoint 0 of a store created by us is the empty state and has no object."""
    data = await _read(remote, checkpoint_name(seq), fetched)
    if data is None:
        if seq == 0:
            return EMPTY_CHECKPOINT
        raise CorruptStore(f"Checkpoint {seq} is referenced but missing")
    return await parse_checkpoint(data, seq)


async def parse_checkpoint(data: bytes, seq: int) -> Checkpoint:
    checkpoint = await parse_off_loop(Checkpoint, data, checkpoint_name(seq))
    if checkpoint.seq != seq:
        raise CorruptStore(f"Checkpoint object {seq} describes seq {checkpoint.seq}")
    return checkpoint


def log_seqs(listing: dict[str, int] | dict) -> list[int]:
    """Sequence numbers of the log slots in a listing of ``log/``."""
    out = []
    for name in listing:
        stem = name.rsplit("/", 1)[-1]
        if name.startswith(LOG_DIR + "/") and stem.endswith(".json") and stem[:-5].isdigit():
            out.append(int(stem[:-5]))
    return out


def at_checkpoint(
    checkpoint: Checkpoint, remote: ObjectStorage, known: State | None, fetched: Fetched | None = None
) -> State:
    """The state a checkpoint holds, keeping the parts `known` had loaded that it shares (same sha256),
    and those an open read ahead (`fetched`)."""
    state = State.at_checkpoint(checkpoint, remote)
    state.files.base.adopt_loaded(known.files.base if known is not None else None)
    if fetched is not None:
        fetched.feed_parts(state.files.base)
    return state


async def state_from(
    remote: ObjectStorage, record: CommitRecord, known: State | None, fetched: Fetched | None = None
) -> State:
    """The state a record makes of its checkpoint (whose file index `known` may already hold, unless a purge
    committed since `known`: it rewrote that checkpoint in storage, `_rules.purge_count`); the checkpoint
    and its parts are taken from `fetched` where an open read them ahead."""
    if known is not None and known.checkpoint.seq == record.checkpoint and not purged_since(known.ext, record.ext):
        checkpoint, index = known.checkpoint, known.files.base
    elif not record.checkpoint_stored:
        checkpoint, index = EMPTY_CHECKPOINT, CheckpointFiles(EMPTY_CHECKPOINT, remote)
    else:
        checkpoint = await read_checkpoint(remote, record.checkpoint, fetched)
        index = CheckpointFiles(checkpoint, remote)
        index.adopt_loaded(known.files.base if known is not None else None)
        if fetched is not None:
            fetched.feed_parts(index)
    return State.from_record(checkpoint, index, record)
