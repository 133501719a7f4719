"""Saving: upload new content, commit with one create-only write, then update upstream's view.

    1. upload     files at paths the base does not hold, in place, create-only (`_journal.inplace`); other
                  new contents as blobs, content-addressed and immutable   (before the commit point), the
                  bytes of in-place or upstream-written files this save changes (`_journal.preserve`), and
                  its search segment (`_journal.search_segments.prepare`): all at once, one round trip
       adopt      on a store's first save into this journal: fence and move the old one (`_journal.relocate`)
    2. commit     create-only ``log/<n+1>``; if taken, read what won, rebase and try ``n+2``
    3. upstream   files (but those placed in place), sidecars, versions, deletions, messages.json,
                  head hint (after it; a small save may leave it one commit behind, see `_journal.projection`)
    4. checkpoint now and then, beside step 3: full state, audit segment, audit/log.jsonl, head, and gc()
                  (`_journal.checkpoint_writes`)

On real object storage a save costs its sequential round trips: content, then the commit record, then the
projection with the head (docs/decisions/0144-a-save-is-three-round-trips.md).

A save that dies before step 2 leaves nothing any reader of ours sees; one that dies after it is
committed, and only upstream's view (step 3) lags until those paths are written again. What a save carries
is `_journal.save_job.SaveJob` (with its typed operation, `_rules.operations`); step 3 is `_journal.projection`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable

from .._rules.journal_objects import RECENT_COMMITS, encode
from .._rules.layout import (
    blob_name,
    log_name,
    search_segment_name,
)
from .._rules.merge import rebase
from .._rules.paths import parent_dirs
from .._rules.read_only import refuse_read_only
from .._rules.search_index import referenced_segments
from .._rules.state import State
from ..errors import (
    ConcurrencyError,
    MemoryStoreError,
    ReadOnlyPath,
    StorageError,
    StoreAlreadyExists,
    StoreDeleted,
)
from .checkpoint_writes import checkpoint
from .gc import configured_window
from .inplace import committed_changes, upload_in_place
from .journal_storage import JournalStorage
from .opening import landed_state, latest_state, state_at
from .preserve import copies_wanted, preserve_legacy, unneeded_copies
from .projection import update_upstream_layout, write_head
from .purge_aftermath import after_losing, cache_for, drop_purged_copies, written_segments
from .relocate import adopt, clean_after_move, persist_import
from .retention import STALE_BASE_AFTER
from .save_job import SaveJob
from .search_segments import apply, extend, prepare, updates_of
from .settle import settled
from .store_deletion import remove_empty_prefix

__all__ = ["SaveJob", "checkpoint", "run_save", "update_upstream_layout"]

logger = logging.getLogger(__name__)

#: Checkpoint once the newest record exceeds this many bytes (records carry every change since the last
#: checkpoint, so this bounds the bytes a save writes; a checkpoint costs O(files), amortized over the
#: saves it took to grow a record this large) ...
CHECKPOINT_BYTES = 32 * 1024
#: ... or this many commits have piled up since the last checkpoint.
CHECKPOINT_COMMITS = 500
#: Commit attempts before a save gives up under extreme contention.
MAX_ATTEMPTS = 200


async def run_save(remote: JournalStorage, job: SaveJob) -> State:
    """Commit `job` and update upstream's view; returns the new committed state."""
    job.base.check_can_write("save", remote.uri)  # before anything is written
    if not job.trusted:  # a handle that wrote before it loaded the setting
        refuse_read_only(job.changes.files, job.base.ext)
    await job.base.files.need(job.changes.files)  # what the upload, the merge and the checks look at
    job.docs = await updates_of(job.changes.files, job.contents)  # the search index's share of this save
    # Wave 1: everything that does not depend on the commit record, at once: the new content (in place or
    # as blobs), the copies of in-place bytes it replaces, and its search segment (made on the base: the
    # first attempt commits on it unless the base is stale or the store moves, `_starting_point`)
    blobs: dict[str, bytes] = {}

    async def content() -> None:
        job.placed = await upload_in_place(  # a create's loser, a failed decision or purge: no file left behind
            remote, job.base, job.changes, job.contents, exclusive=job.leaves_no_strays, imported=job.imported
        )
        blobs.update(
            (blob_name(r.sha256), job.contents[p])
            for p, r in job.changes.files.items()
            if r and not r.legacy and p not in job.placed
        )
        await remote.write_many(blobs)

    async def copies() -> None:
        try:
            made = await preserve_legacy(remote, job.base.files, job.changes.files, job.held)
        except BaseException:  # any of them may have landed: the cleanup checks them all against purges
            job.preserved = [r.sha256 for r in copies_wanted(job.base.files, job.changes.files).values()]
            raise
        job.preserved, job.created = made.shas, made.created

    async def segment() -> None:
        if not (job.imported or job.base.needs_save):  # else `_starting_point` may commit on another state
            job.prepared = await prepare(remote, job.base, job.docs, job.search_repairs, whole=job.whole_index)

    try:
        await settled(content(), copies(), segment())
    except Exception:
        await _clean_failed_save(remote, job, blobs)
        raise
    try:
        latest, moved = await _starting_point(remote, job)
        committed, record_size = await _commit(remote, job, latest)
    except StoreDeleted:
        await _forget_deleted_store(remote, job, blobs)
        raise
    except ReadOnlyPath:  # made read-only meanwhile: nothing may show up there (blobs are gc()'s)
        await remote.remove_all(sorted(job.placed))
        await _clean_failed_save(remote, job, blobs)
        raise
    except ConcurrencyError:  # `_commit` dropped the copies against the state it lost to
        await _clean_failed_save(remote, job, blobs, copies=False)
        raise
    except Exception:
        await _clean_failed_save(remote, job, blobs)
        raise
    job.changes = committed_changes(job.changes, job.placed)  # as landed: a later repair compares these
    # Committed: from here on nothing may fail the save (a save that raises must not be visible).
    await _quietly(drop_purged_copies(remote, job.base, committed, job.preserved))  # `_journal.purge_aftermath`
    await _quietly(_drop_unneeded_copies(remote, job, job.newest))
    # found our commit after a lost reply: newer ones may exist, so leave folding to them
    due = bool(record_size) and _checkpoint_due(committed, record_size)
    if moved:  # rare (a store's first save into this journal): one step after the other, as it always was
        await _project(remote, job, committed)
        try:
            await clean_after_move(remote)
        except StorageError as exc:  # the move stands; the old journal's objects go on a later save
            logger.warning("Committed, but could not remove the old journal yet: %s", exc)
        return await _checkpoint_quietly(remote, committed) if due else committed
    # the projection and a checkpoint depend on the commit only: at once (the checkpoint writes the head)
    job.checkpointing = due
    _, folded = await settled(_project(remote, job, committed), _checkpoint_quietly(remote, committed, due))
    if due and folded.head_hint != folded.seq:  # no checkpoint after all: the head names the commit
        try:
            await write_head(remote, committed)
        except StorageError as exc:
            logger.warning("Committed, but could not update the head hint: %s", exc)
    return folded


async def _project(remote: JournalStorage, job: SaveJob, committed: State) -> None:
    try:
        await update_upstream_layout(remote, job, committed)
    except StorageError as exc:
        logger.warning("Committed, but upstream's layout lags until the next save: %s", exc)
        job.projection_failed = True


async def _checkpoint_quietly(remote: JournalStorage, committed: State, due: bool = True) -> State:
    if not due:
        return committed
    try:
        return await checkpoint(remote, committed)
    except StorageError as exc:  # a later save checkpoints instead
        logger.warning("Committed, but could not write a checkpoint: %s", exc)
        return committed


async def _forget_deleted_store(remote: JournalStorage, job: SaveJob, blobs: dict[str, bytes]) -> None:
    """What a save uploaded must not outlive its deleted store (`_journal.store_deletion`): its files in
    place and blobs, its search segments (the handle's cached ones, written or read, all belong to the gone
    store) and the copies of in-place bytes it preserved (a purge or the deletion had removed them)."""
    segments = {search_segment_name(sha) for sha in job.search_repairs.cache}
    preserved = {blob_name(sha) for sha in job.preserved}
    await remote.remove_all(sorted(job.placed | set(blobs) | segments | preserved))
    await remove_empty_prefix(remote)  # nor the directory they made (`list_keys` would list the key)


async def _clean_failed_save(
    remote: JournalStorage, job: SaveJob, blobs: dict[str, bytes], *, copies: bool = True
) -> None:
    """After a save that did not commit (or cannot tell): the copies of in-place bytes it made go if a purge
    removed that content meanwhile (another save may share a copy of content still held: those stay), and
    so do those it created that no stored commit names (`_journal.preserve.unneeded_copies`); its first
    wave's search segment goes if a purge landed since it was made (`_forget_prepared`); and if the store
    was deleted meanwhile, everything it uploaded. Files it created in place stay, as after a crash
    (decision 0041: an upstream writer may own that path by now). The save's own failure is what the
    caller sees: a cleanup that fails too is only logged (gc() removes what is left)."""
    try:
        try:
            latest = await latest_state(remote, job.base) or job.base
        except StoreDeleted:
            await _forget_deleted_store(remote, job, blobs)
            return
        if copies and job.preserved:
            await drop_purged_copies(remote, job.base, latest, job.preserved)
            await _drop_unneeded_copies(remote, job, latest)
        await _forget_prepared(remote, job, latest)
    except MemoryStoreError as exc:
        logger.warning("Could not clean up after this failed save: %s", exc)


async def _drop_unneeded_copies(remote: JournalStorage, job: SaveJob, newest: State | None) -> None:
    """Remove the copies this save created that neither `newest` (the state its commit landed on, or that
    refused it) nor any state still stored holds: gc() had collected that content (`_journal.preserve`)."""
    if not job.created or newest is None:
        return
    unneeded = await unneeded_copies(remote, job.base, job.created, newest)
    # a copy whose content the save also wrote for another path is that path's blob now (or would be)
    written = {blob_name(r.sha256) for r in job.changes.files.values() if r is not None}
    if unneeded := [name for name in unneeded if name not in written]:
        await remote.remove_all(unneeded)


async def _starting_point(remote: JournalStorage, job: SaveJob) -> tuple[State, bool]:
    """The state to rebase on first, and whether this save moves an old journal (cleaned after it).

    A store's first save into this journal adopts it (`_journal.relocate.adopt`). A base last known newest long ago
    is checked against the head first: gc() may have collected the slot after it (see `_journal.retention`)."""
    if job.imported or job.base.needs_save:
        if remote.journal_moved:
            imported = job.base.checkpoint if job.imported else None
            window = await configured_window(remote)
            return await adopt(remote, job.base, imported_checkpoint=imported, exclusive=job.exclusive, window=window)
        if job.imported:
            return await persist_import(remote, job.base.checkpoint, job.base), False
    if time.monotonic() - job.base.observed_at > STALE_BASE_AFTER:
        return await latest_state(remote, job.base) or job.base, False
    return job.base, False


async def _commit(remote: JournalStorage, job: SaveJob, latest: State) -> tuple[State, int]:
    """Create the next log slot holding `job`'s commit on `latest`, rebasing onto whatever won a slot first
    (``job.prepared``: its search segment, uploaded already for a commit on ``prepared.latest``)."""
    changes = committed_changes(job.changes, job.placed)
    for attempt in range(MAX_ATTEMPTS):
        await latest.files.need(changes.files)
        job.newest = latest
        try:
            new = rebase(
                job.base, latest, changes, job.messages, job.commit_id, job.about(), job.fold, trusted=job.trusted
            )
        except ConcurrencyError:
            await remote.remove_all(clashing_strays(latest, job.placed))
            await _quietly(drop_purged_copies(remote, job.base, latest, job.preserved))
            await _quietly(_drop_unneeded_copies(remote, job, latest))
            raise
        cache_for(job.base, latest, job.search_repairs)
        if job.prepared is not None and job.prepared.latest is latest:
            apply(job.prepared, new)  # its segment went up with the save's content
        else:
            await _forget_prepared(remote, job, latest)
            await extend(remote, latest, new, job.docs, job.search_repairs, whole=job.whole_index)
        record = encode(new.record())
        job.attempted.append(new.seq)
        if await _create_or_find_landed(remote, job, new.seq, record):
            new.head_hint = latest.head_hint  # what the head hint names, as far as this handle knows
            return new, len(record)
        written, before = written_segments(latest, new), latest
        latest = await latest_state(remote, latest) or latest
        await after_losing(remote, before, written, latest, job.search_repairs)
        if (mine := await _own_commit(remote, job, new.seq, latest)) is not None:
            return mine, 0  # an attempt landed, but its answer was lost
        if job.exclusive:
            raise StoreAlreadyExists(f"MemoryStore already exists at {remote.uri}")
        await asyncio.sleep(random.uniform(0, min(0.002 * 2**attempt, 0.25)))
    raise StorageError(f"Could not commit to {remote.uri} after {MAX_ATTEMPTS} attempts")


async def _forget_prepared(remote: JournalStorage, job: SaveJob, latest: State) -> None:
    """The first wave's search segment was made for a commit on another state than `latest`: no commit will
    name it. If a purge landed in between, it may hold purged text that no purge can find (they look only at
    the segments states name): it goes, as a lost attempt's do (`_journal.purge_aftermath.after_losing`)."""
    prepared, job.prepared = job.prepared, None
    if prepared is None or prepared.index is None:
        return
    written = {ref.sha256 for ref in prepared.index.segments} - set(referenced_segments(prepared.latest.ext))
    await after_losing(remote, prepared.latest, written, latest, job.search_repairs)


async def _quietly(cleanup: Awaitable[None]) -> None:
    """Run a cleanup that must not fail the save (`_journal.purge_aftermath`): a storage error is logged."""
    try:
        await cleanup
    except StorageError as exc:
        logger.warning("Could not remove what a purge removed and this save stored again: %s", exc)


def clashing_strays(latest: State, placed: set[str]) -> list[str]:
    """Files this save created in place (`_journal.inplace`) that `latest` makes a file and a directory of one
    name (``x/y`` under its file ``x``, or ``x`` over its ``x/y``): a conflicting save leaves its in-place
    files behind, but these no save can commit while `latest` stands, and upstream's download of the
    store trips over them (an object store holds both; no filesystem does)."""
    return sorted(p for p in placed if latest.files.has_under(p) or any(d in latest.files for d in parent_dirs(p)))


async def _create_or_find_landed(remote: JournalStorage, job: SaveJob, seq: int, record: bytes) -> bool:
    """Create log slot `seq`; if the request fails, whether it landed anyway (a lost reply), so that a
    save that raises is one that did not commit, wherever the answer can be had."""
    try:
        return await _claim(remote, log_name(seq), record)
    except StorageError:
        try:
            landed = await landed_state(remote, seq, job.commit_id)
        except StorageError:
            landed = None  # outcome unknown: the handle settles it before its next save
        if landed is None:
            raise
        return True


async def _claim(remote: JournalStorage, name: str, record: bytes) -> bool:
    """Create log slot `name` holding `record`. Where create-only writes are not atomic (the capability
    ``atomic_create``: the GCS emulator, an opted-in backend), two saves can both pass the backend's
    existence check and both write: read the slot back and keep it only if it holds our record, so the
    race shrinks from check-to-write to write-to-read-back, and the loser rebases onto the next slot."""
    if not await remote.create_exclusive(name, record):
        return False
    return remote.capabilities.atomic_create or await remote.read(name) == record


async def _own_commit(remote: JournalStorage, job: SaveJob, seq: int, latest: State) -> State | None:
    """The state our commit created if slot `seq` holds it (never a later one: it is what we projected)."""
    if job.commit_id in latest.recent_commits:
        return latest if latest.recent_commits[-1] == job.commit_id else await state_at(remote, seq)
    if latest.seq - seq >= RECENT_COMMITS:  # too many commits since for the window to tell
        return await landed_state(remote, seq, job.commit_id)
    return None


def _checkpoint_due(state: State, record_size: int) -> bool:
    """Whether to fold the state into a checkpoint: its records have grown (in bytes or in number)."""
    return record_size >= CHECKPOINT_BYTES or state.seq - state.checkpoint.seq >= CHECKPOINT_COMMITS
