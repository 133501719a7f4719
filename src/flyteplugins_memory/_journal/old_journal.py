"""Reading the old journal, the one inside the store prefix (``meta/.journal/``) that stores saved by
versions before issue 8 keep until `relocate` moves it: its newest state, or one exact state of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._rules.journal_location import old_journal_root
from .._rules.journal_objects import CommitRecord, Head, Origin
from .._rules.layout import HEAD_NAME
from .._rules.markers import Fence, Tombstone, parse_moved_head
from .._rules.offload import parse_off_loop
from .._rules.state import State
from ..errors import CorruptStore
from .journal_storage import JournalStorage
from .log_reads import read_checkpoint, read_entry, state_from


def old_view(remote: JournalStorage) -> JournalStorage:
    """`remote`, with journal names mapped to the old journal inside the store prefix."""
    return remote.with_journal_root(old_journal_root(remote.prefix))


@dataclass(frozen=True)
class OldLog:
    """The old log: its newest state (None if it never had one), the first slot after it, whether that
    slot holds a fence, and whether the move is complete (its head is a `MovedHead`)."""

    state: State | None
    next_seq: int
    fenced: bool
    moved: bool


async def read_old_log(remote: JournalStorage) -> OldLog:
    view = old_view(remote)
    data = await view.read(HEAD_NAME)
    if data is not None and (moved := parse_moved_head(data)) is not None:
        return OldLog(None, moved.seq, True, True)
    state = await _old_head_state(view, data)
    seq = state.seq if state else 0
    while True:
        entry = await read_entry(view, seq + 1)
        if entry is None:
            return OldLog(state, seq + 1, False, False)
        if isinstance(entry, Fence):
            return OldLog(state, seq + 1, True, False)
        if isinstance(entry, Tombstone):
            raise CorruptStore(f"The old journal of {remote.uri} is being moved but the new one is empty")
        state = await state_from(view, entry, state)
        seq += 1


async def _old_head_state(view: JournalStorage, data: bytes | None) -> State | None:
    """The state the old head hint names, where it still exists (the log after it is probed anyway)."""
    if data is None:
        return None
    head = await parse_off_loop(Head, data, HEAD_NAME)
    if head.seq <= 0:
        return None
    if head.checkpoint == head.seq:
        return State.at_checkpoint(await read_checkpoint(view, head.seq), view)
    entry = await read_entry(view, head.seq)
    return await state_from(view, entry, None) if isinstance(entry, CommitRecord) else None


async def old_latest_state(remote: JournalStorage) -> State | None:
    """The newest state of the old journal (before its fence, if any), marked as needing the move."""
    log = await read_old_log(remote)
    if log.moved:
        raise CorruptStore(f"The journal of {remote.uri} moved to {remote.journal_root}, which is empty")
    if log.state is not None:
        log.state.origin = Origin.OLD_JOURNAL
    return log.state


async def old_state_at(remote: JournalStorage, seq: int) -> State:
    """Exactly state `seq` of the old journal (a task input pinned before the store moved)."""
    view = old_view(remote)
    entry = await read_entry(view, seq)
    if not isinstance(entry, CommitRecord):
        raise CorruptStore(f"Commit {seq} of {remote.uri} does not exist")
    state = (await state_from(view, entry, None)).unobserved()
    state.origin = Origin.OLD_JOURNAL
    return state
