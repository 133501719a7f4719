"""Reading committed states from the journal: the newest one, or exactly the one a task was handed.

Opening costs O(1) requests however many files the store holds: the head hint, the newest commit record,
one probe past it, and the checkpoint that record is relative to.
"""

from __future__ import annotations

from ._errors import CorruptStore, StoreNotFound
from ._journal import EMPTY_CHECKPOINT, Checkpoint, CommitRecord, Head, State, parse
from ._layout import HEAD_NAME, checkpoint_name, log_name
from ._legacy import import_remote
from ._paths import MESSAGES_PATH
from ._storage import RemoteStore

#: A hostile store could claim an endless log; no real store gets near this between two opens.
MAX_PROBES = 1_000_000


async def read_record(remote: RemoteStore, seq: int) -> CommitRecord | None:
    data = await remote.read(log_name(seq))
    if data is None:
        return None
    record = parse(CommitRecord, data, log_name(seq))
    if record.seq != seq or not 0 <= record.checkpoint < seq:
        raise CorruptStore(f"Commit record {seq} is inconsistent (seq={record.seq}, checkpoint={record.checkpoint})")
    return record


async def read_checkpoint(remote: RemoteStore, seq: int) -> Checkpoint:
    """Checkpoint `seq`; checkpoint 0 of a store created by us is the empty state and has no object."""
    data = await remote.read(checkpoint_name(seq))
    if data is None:
        if seq == 0:
            return EMPTY_CHECKPOINT
        raise CorruptStore(f"Checkpoint {seq} is referenced but missing")
    checkpoint = parse(Checkpoint, data, checkpoint_name(seq))
    if checkpoint.seq != seq:
        raise CorruptStore(f"Checkpoint object {seq} describes seq {checkpoint.seq}")
    return checkpoint


async def latest_state(remote: RemoteStore, known: State | None = None) -> State | None:
    """The newest committed state (`known` if nothing is newer), or None if the store has no journal."""
    state = await _from_head(remote, known) or known
    seq, record = (state.seq if state else 0), None
    for _ in range(MAX_PROBES):
        following = await read_record(remote, seq + 1)
        if following is None:
            break
        seq, record = seq + 1, following
    else:
        raise CorruptStore(f"Commit log under {remote.uri} does not end")
    return state if record is None else await _state_from(remote, record, state)


async def _from_head(remote: RemoteStore, known: State | None) -> State | None:
    """The state the head hint names, if it is newer than `known`: a checkpoint alone when the hint says
    the newest commit was checkpointed (one small read instead of a large cumulative record)."""
    data = await remote.read(HEAD_NAME)
    if data is None:
        return None
    head = parse(Head, data, HEAD_NAME)
    if head.seq <= (known.seq if known else 0):
        return None
    if head.checkpoint == head.seq:
        return State.at_checkpoint(await read_checkpoint(remote, head.seq))
    record = await read_record(remote, head.seq)
    return await _state_from(remote, record, known) if record is not None else None


async def state_at(remote: RemoteStore, seq: int) -> State:
    """Exactly committed state `seq`."""
    record = await read_record(remote, seq)
    if record is None:
        raise CorruptStore(f"Commit {seq} of {remote.uri} does not exist")
    return await _state_from(remote, record, None)


async def landed_state(remote: RemoteStore, seq: int, commit_id: str) -> State | None:
    """The state commit `seq` created, if that commit is `commit_id` (every record lists its own id last)."""
    record = await read_record(remote, seq)
    if record is None or not record.delta.commits or record.delta.commits[-1] != commit_id:
        return None
    return await _state_from(remote, record, None)


async def _state_from(remote: RemoteStore, record: CommitRecord, known: State | None) -> State:
    if known is not None and known.checkpoint.seq == record.checkpoint:
        checkpoint = known.checkpoint
    elif not record.checkpoint_stored:
        checkpoint = EMPTY_CHECKPOINT
    else:
        checkpoint = await read_checkpoint(remote, record.checkpoint)
    return State.from_record(checkpoint, record)


async def open_state(remote: RemoteStore) -> tuple[State, bool]:
    """The newest state of an existing store, and whether it is an import of an upstream-written store."""
    state = await latest_state(remote)
    if state is not None:
        return state, False
    if await remote.exists(MESSAGES_PATH):
        return State.at_checkpoint(await import_remote(remote)), True
    raise StoreNotFound(f"No MemoryStore at {remote.uri}")
