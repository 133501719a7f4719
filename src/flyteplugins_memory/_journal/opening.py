"""Reading committed states from the journal: the newest one, or exactly the one a task was handed.

Opening costs O(1) requests however many files the store holds, in two round trips: the head hint, then
at once everything it names (`_journal.prefetch`): two probes past it, the hinted record, the checkpoint that
record is relative to and, for a small index, its parts. The probes matter: a save may leave the hint one
commit behind (`_journal.projection.write_head`), and then the first probe is the newest record, read in the
same round trip. Only a hint more than one commit behind costs a round trip per further commit, and only
when the hint names a commit or checkpoint that gc() removed does it list the log (small after gc) to find
the newest record.
"""

from __future__ import annotations

import time

from .._rules.journal_objects import CommitRecord, Head, Origin
from .._rules.layout import HEAD_NAME, checkpoint_name
from .._rules.markers import Tombstone, parse_deleted
from .._rules.offload import parse_off_loop
from .._rules.paths import MESSAGES_PATH
from .._rules.state import State
from ..errors import CorruptStore, StateCollected, StoreDeleted, StoreNotFound
from .journal_storage import JournalStorage
from .legacy import import_remote
from .log_reads import LOG_DIR, at_checkpoint, log_seqs, parse_checkpoint, read_entry, read_record, state_from
from .old_journal import old_latest_state, old_state_at
from .prefetch import Fetched, for_open

#: A hostile store could claim an endless log; no real store gets near this between two opens.
MAX_PROBES = 1_000_000


class _Collected(Exception):
    """Internal: a probe or the head hint reached a commit that gc() removed; find the newest by listing.
    `checkpoint` is the checkpoint the head hint named, if that is what was missing."""

    def __init__(self, checkpoint: int | None = None):
        super().__init__(checkpoint)
        self.checkpoint = checkpoint


async def latest_state(remote: JournalStorage, known: State | None = None) -> State | None:
    """The newest committed state (`known` if nothing is newer), or None if the store has no journal."""
    if known is not None and known.origin is Origin.OLD_JOURNAL and remote.journal_moved:
        return await latest_state(remote) or await old_latest_state(remote) or known
    try:
        return await _from_head(remote, known) or await _probe(remote, known)
    except _Collected as gone:
        return await _from_listing(remote, known, gone.checkpoint)


async def _follow(remote: JournalStorage, seq: int, fetched: Fetched | None = None) -> tuple[int, CommitRecord | None]:
    """The newest commit after `seq` and its record, probing one slot after the other (None: none); the
    slots an open read ahead (`fetched`) cost nothing."""
    record = None
    for _ in range(MAX_PROBES):
        try:
            following = await read_record(remote, seq + 1, fetched)
        except StateCollected:
            raise _Collected from None
        if following is None:
            return seq, record
        seq, record = seq + 1, following
    raise CorruptStore(f"Commit log under {remote.uri} does not end")


async def _probe(remote: JournalStorage, state: State | None) -> State | None:
    """`state`, or the newer one the records after it lead to."""
    _, record = await _follow(remote, state.seq if state else 0)
    if record is None:
        if state is not None:
            state.observed_at = time.monotonic()  # verified newest just now
        return state
    return _hinted(await state_from(remote, record, state), state.head_hint if state else -1)


def _hinted(state: State, head_seq: int) -> State:
    state.head_hint = max(state.head_hint, head_seq)
    return state


async def _from_head(remote: JournalStorage, known: State | None) -> State | None:
    """The newest state, found from the head hint if it names a commit newer than `known` (None: it does
    not; probe from `known`). What the hint names is read at once (`_journal.prefetch`); the slots past it
    decide: when nothing follows it, the state it names is built: from its checkpoint alone when the hint
    says the newest commit was checkpointed (no large cumulative record to parse)."""
    data = await remote.read(HEAD_NAME)
    if data is None:
        return None
    if (deleted := parse_deleted(data)) is not None:
        raise StoreDeleted(deleted.describe(remote.uri))
    head = await parse_off_loop(Head, data, HEAD_NAME)
    if head.seq <= (known.seq if known else 0):
        if known is not None and head.seq == known.seq:
            known.head_hint = max(known.head_hint, head.seq)
        return None
    fetched = await for_open(remote, head, known)
    _, newer = await _follow(remote, head.seq, fetched)
    if newer is not None:
        return _hinted(await state_from(remote, newer, known, fetched), head.seq)
    return _hinted(await _named_by(remote, head, known, fetched), head.seq)


async def _named_by(remote: JournalStorage, head: Head, known: State | None, fetched: Fetched) -> State:
    """The state the head hint names (nothing follows it: verified newest now)."""
    if head.checkpoint == head.seq:
        asked, data = fetched.answer(checkpoint_name(head.seq))
        data = data if asked else await remote.read(checkpoint_name(head.seq))
        if data is None:  # gc() removed it (then a newer state exists), or it is damage: the listing decides
            raise _Collected(checkpoint=head.seq)
        return at_checkpoint(await parse_checkpoint(data, head.seq), remote, known, fetched)
    try:
        record = await read_record(remote, head.seq, fetched)
    except StateCollected:
        raise _Collected from None
    if record is None:
        raise _Collected  # a hint ahead of the log, or a commit gc() removed
    return await state_from(remote, record, known, fetched)


async def _from_listing(remote: JournalStorage, known: State | None, hinted_checkpoint: int | None) -> State | None:
    """The newest state, found by listing the log: after gc() it holds only the retention window. If the
    head hint named a checkpoint that is missing, something newer must exist, or the store is damaged."""
    seqs = sorted(log_seqs(await remote.list(under=LOG_DIR)), reverse=True)
    state = known
    for seq in seqs:
        if known is not None and seq <= known.seq:
            break
        entry = await read_entry(remote, seq)
        if isinstance(entry, CommitRecord):
            try:
                state = await _probe(remote, await state_from(remote, entry, known))
            except _Collected:
                raise CorruptStore(f"Commit log under {remote.uri} has a collected commit after its newest") from None
            break
    if hinted_checkpoint is not None and (state.seq if state else 0) <= hinted_checkpoint:
        raise CorruptStore(f"Checkpoint {hinted_checkpoint} is named by the head hint but missing")
    return state


async def state_at(remote: JournalStorage, seq: int) -> State:
    """Exactly committed state `seq` (of this journal, or of the old one inside the store prefix while it
    has not moved yet); raises `StateCollected` if gc() removed it."""
    record = await read_record(remote, seq)
    if record is None:
        if remote.journal_moved and (await remote.read(HEAD_NAME)) is None:
            return await old_state_at(remote, seq)
        await raise_if_collected(remote, seq)
        raise CorruptStore(f"Commit {seq} of {remote.uri} does not exist")
    try:
        return (await state_from(remote, record, None)).unobserved()
    except CorruptStore:
        await raise_if_collected(remote, seq)  # gc() removed its checkpoint while we read it
        raise


async def raise_if_collected(remote: JournalStorage, seq: int) -> None:
    """Raise `StateCollected` if commit `seq` is gone although a newer state exists."""
    try:
        entry = await read_entry(remote, seq)
    except CorruptStore:
        return
    if isinstance(entry, Tombstone):
        raise StateCollected(f"Commit {seq} of {remote.uri} was removed by gc(); open the store again")
    newest = await latest_state(remote)
    if newest is not None and newest.seq > seq and not isinstance(entry, CommitRecord):
        raise StateCollected(f"Commit {seq} of {remote.uri} was removed by gc(); open the store again")


async def landed_state(remote: JournalStorage, seq: int, commit_id: str) -> State | None:
    """The state commit `seq` created, if that commit is `commit_id` (every record lists its own id last).

    If gc() has collected that slot since, the state it created is gone: the newest state is returned if
    it still remembers the id among its recent commits (None otherwise: gc() ran long after the commit)."""
    entry = await read_entry(remote, seq)
    if isinstance(entry, Tombstone):
        newest = await latest_state(remote)
        return newest if newest is not None and commit_id in newest.recent_commits else None
    if not isinstance(entry, CommitRecord) or not entry.delta.commits or entry.delta.commits[-1] != commit_id:
        return None
    return (await state_from(remote, entry, None)).unobserved()


async def open_state(remote: JournalStorage) -> tuple[State, bool]:
    """The newest state of an existing store, and whether it is an import of an upstream-written store."""
    state = await latest_state(remote)
    if state is not None:
        return state, False
    if remote.journal_moved:
        old = await old_latest_state(remote)
        if old is not None:
            return old, False
    if await remote.exists(MESSAGES_PATH):
        checkpoint = await import_remote(remote)
        state = State.at_checkpoint(checkpoint, remote)
        state.origin = Origin.IMPORT
        return state, True
    raise StoreNotFound(f"No MemoryStore at {remote.uri}")
