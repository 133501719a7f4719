"""Moving a journal out of the store prefix, safely under concurrent writers of any version.

Earlier versions kept the journal in ``meta/.journal/`` inside the store prefix (the *old* journal), where
upstream downloads it on every open. A store's first save by this version (a new store, an import of an
upstream-written one, or a store still in the old layout) runs `adopt` before its commit:

    1. fence    create-only ``meta/.journal/log/<n+1>`` in the old log with a `Fence` that earlier
                versions refuse (``format`` 2): the old log is frozen at state n, and an older writer
                trying to commit after it fails instead of forking the store
    2. copy     the objects state n and the retention window need (records, checkpoints, audit
                segments, blobs) to the new location; the first record last, so the new log never
                shows a partial history
    3. head     write the new head hint: from here on every open of this version reads the new journal
    4. commit   the save commits at n+1 in the new log, rebased on state n as on any concurrent commit
    5. clean    (after the commit, best effort; gc() finishes it) turn the old head into a `MovedHead`
                (refused by earlier versions), keep the fence, empty old records younger than
                `SLOT_GRACE` into tombstones (stale older handles then still fail to commit), delete
                everything else

A crash before 3 leaves the old journal intact (fenced): opens read it, the next save repeats the steps
(each is idempotent). A crash after 3 leaves a complete new journal. A new store fences slot 1 of the old
log, so an older version never mistakes it for an upstream-written store either.
"""

from __future__ import annotations

import logging
import time

from .._rules.journal_objects import Checkpoint, CommitRecord, encode
from .._rules.layout import HEAD_NAME, JOURNAL_DIR, checkpoint_name, log_name
from .._rules.markers import (
    TOMBSTONE,
    TOMBSTONE_MAX_BYTES,
    Fence,
    MovedHead,
    encode_marker,
    parse_moved_head,
)
from .._rules.offload import parse_off_loop
from .._rules.open_hint import head_for
from .._rules.state import State
from ..errors import CorruptStore, StorageError, StoreAlreadyExists
from .checkpoints import read_all_parts
from .journal_storage import JournalStorage
from .log_reads import log_seqs, read_checkpoint, read_entry
from .old_journal import OldLog, old_view, read_old_log
from .opening import latest_state
from .retention import SLOT_GRACE, Inventory, kept_commits, kept_names, needs

logger = logging.getLogger(__name__)

#: Bounded attempts to fence an old log that older writers keep committing to.
MAX_FENCE_ATTEMPTS = 200
#: Objects copied at once.
COPY_BATCH = 32


async def fence_old_log(remote: JournalStorage, *, exclusive: bool) -> OldLog:
    """Freeze the old log with a fence in the slot after its newest commit (see the module docstring)."""
    view = old_view(remote)
    for _ in range(MAX_FENCE_ATTEMPTS):
        log = await read_old_log(remote)
        if exclusive and log.state is not None:
            raise StoreAlreadyExists(f"MemoryStore already exists at {remote.uri}")
        if log.fenced:
            return log
        fence = Fence(seq=log.next_seq, moved_to=remote.journal_root)
        if await view.create_exclusive(log_name(log.next_seq), encode_marker(fence)):
            return OldLog(log.state, log.next_seq, True, False)
    raise StorageError(f"Could not fence the old journal of {remote.uri} after {MAX_FENCE_ATTEMPTS} attempts")


async def copy_to_new(remote: JournalStorage, state: State, window: float) -> None:
    """Copy what old state `state` and the retention window need into the new journal, then its head."""
    view = old_view(remote)
    inventory = Inventory.of(await view.stat(JOURNAL_DIR))
    kept = kept_commits(inventory, state.seq, time.time() - window)
    records = dict(await _codecs(view, kept))
    checkpoints = {}
    for seq in {r.checkpoint for r in records.values() if r.checkpoint_stored} | {state.checkpoint.seq}:
        if seq in inventory.checkpoints:
            checkpoints[seq] = await read_checkpoint(view, seq)
    parts = await read_all_parts(view, checkpoints.values())
    names = kept_names(inventory, needs(state, kept, records, checkpoints, parts))
    first = log_name(1)
    await _copy(view, remote, [n for n in names if n != first])
    await _copy(view, remote, [n for n in names if n == first])  # last: it makes the new log visible
    await remote.write_many({HEAD_NAME: encode(head_for(state.seq, state.checkpoint))})


async def _codecs(view: JournalStorage, seqs: list[int]) -> dict[int, CommitRecord]:
    found = {}
    for seq in seqs:
        entry = await read_entry(view, seq)
        if isinstance(entry, CommitRecord):
            found[seq] = entry
    return found


async def _copy(source: JournalStorage, target: JournalStorage, names: list[str]) -> None:
    for start in range(0, len(names), COPY_BATCH):
        batch = await source.read_many(names[start : start + COPY_BATCH])
        await target.write_many(batch)


async def clean_old_journal(remote: JournalStorage, now: float | None = None) -> tuple[int, int]:
    """Bring the old journal down to its fence markers (see the module docstring); returns the objects and
    bytes removed. Safe to repeat, and a no-op for a store whose old journal holds only its fence."""
    view = old_view(remote)
    listing = await view.stat(JOURNAL_DIR)
    fence = await _fence_of(view, listing)
    if fence is None:
        return 0, 0  # not moved: earlier versions may still be writing here
    now = time.time() if now is None else now
    head = await view.read(HEAD_NAME) if HEAD_NAME in listing else None
    if head is not None and parse_moved_head(head) is None:
        moved = MovedHead(seq=fence, checkpoint=fence, moved_to=remote.journal_root)
        await view.write_many({HEAD_NAME: encode_marker(moved)})  # first: earlier versions refuse to open
    young, gone = [], {}
    for name, found in listing.items():
        if name in (HEAD_NAME, log_name(fence)):
            continue
        if name.startswith(f"{JOURNAL_DIR}/log/") and found.modified >= now - SLOT_GRACE:
            if found.size >= TOMBSTONE_MAX_BYTES:
                young.append(name)
            continue
        gone[name] = found.size
    await view.write_many(dict.fromkeys(young, TOMBSTONE))
    await view.remove_all(sorted(gone))
    emptied = sum(listing[n].size for n in young)
    return len(gone) + len(young), sum(gone.values()) + emptied


async def _fence_of(view: JournalStorage, listing: dict) -> int | None:
    """The fenced slot of an old log: nothing is ever created after a fence, so it is the highest slot."""
    seqs = log_seqs(listing)
    if not seqs:
        return None
    try:
        entry = await read_entry(view, max(seqs))
    except CorruptStore:
        return None  # not a fence: leave whatever it is alone
    return max(seqs) if isinstance(entry, Fence) else None


async def adopt(
    remote: JournalStorage, base: State, *, imported_checkpoint: Checkpoint | None, exclusive: bool, window: float
) -> tuple[State, bool]:
    """Make this journal hold the store before the first commit into it; returns the state to rebase on
    and whether the old journal needs cleaning after the commit."""
    latest = await latest_state(remote)
    if latest is not None:
        if exclusive:
            raise StoreAlreadyExists(f"MemoryStore already exists at {remote.uri}")
        return latest, False
    log = await fence_old_log(remote, exclusive=exclusive)
    if log.moved:
        latest = await latest_state(remote)
        if latest is None:
            raise CorruptStore(f"The journal of {remote.uri} moved to {remote.journal_root}, which is empty")
        return latest, False
    if log.state is not None:
        await copy_to_new(remote, log.state, window)
        return await latest_state(remote) or log.state, True
    if imported_checkpoint is not None:
        return await persist_import(remote, imported_checkpoint, base), False
    if exclusive:
        return base, False  # the create-only write of the first commit decides who created the store
    return await latest_state(remote) or base, False


async def persist_import(remote: JournalStorage, checkpoint: Checkpoint, base: State) -> State:
    """Store checkpoint 0 of an imported store (once, whoever is first) and return the state to build on."""
    if not await remote.create_exclusive(checkpoint_name(0), encode(checkpoint)):
        stored = await parse_off_loop(Checkpoint, await remote.read(checkpoint_name(0)) or b"", checkpoint_name(0))
        return await latest_state(remote) or State.at_checkpoint(stored, remote)
    return base


async def clean_after_move(remote: JournalStorage) -> None:
    """Step 5, best effort: the commit stands whatever happens here, and gc() repeats it."""
    try:
        await clean_old_journal(remote)
    except (StorageError, CorruptStore) as exc:
        logger.warning("Could not clean the old journal of %s yet (gc() retries): %s", remote.uri, exc)


async def journal_exists(remote: JournalStorage) -> bool:
    """Whether a journal of either layout exists (for a store whose first save died before writing its
    transcript): a head hint or a first commit, here or in the old journal."""
    if await remote.exists(HEAD_NAME) or await remote.exists(log_name(1)):
        return True
    return remote.journal_moved and await old_view(remote).exists(log_name(1))
