"""Deleting a whole store: its files in upstream's layout, its journal outside the prefix, and what stays.

    1. newest    the newest state (an upstream-written store without a journal counts as state 0)
    2. guard     refuse (`ReadOnlyPath`) if the store holds read-only content and the caller is not trusted
    3. claim     create-only ``log/<n+1>`` = the deletion record: the linearization point. A save that
                 committed before it is deleted with the store; one after it finds its slot taken, reads the
                 record and raises `StoreDeleted`. A concurrent deletion that claimed first wins (False here).
    4. head      ``head.json`` = the deletion record: handles that re-read the head before committing (bases
                 older than `STALE_BASE_AFTER`) and every open learn of it there
    5. sweep     remove every object of the store prefix and of the journal, except the record's slot, the
                 head and log slots younger than `SLOT_GRACE`, which are rewritten as the record (a handle
                 whose base is that young commits into the slot after it without reading the head first)
    6. again     sweep the store prefix once more: a save that committed just before step 3 may still have
                 been projecting into upstream's layout during step 5

What stays is a few hundred bytes per young slot, all holding the deletion record: it is the audit of
the deletion (who, when, why, how many files, after which commit), and what keeps a deleted store from
coming back half-made. Versions of this package before it refuse the record as a newer format. The key
itself is free again: its next ``create`` starts a new store, a new generation with a journal of its own
(`_journal.generations`), which no handle of the deleted one can commit into.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable
from datetime import UTC, datetime

from .._rules.layout import HEAD_NAME, JOURNAL_DIR, log_name
from .._rules.markers import Deleted, encode_marker, parse_deleted
from .._rules.read_only import persisted, under_read_only
from .._rules.state import State
from ..errors import ReadOnlyPath, StorageError, StoreDeleted, StoreNotFound
from ..storage._workdir import remove_empty_tree
from .gc import clock
from .generations import newest_generation
from .journal_storage import JournalStorage
from .log_reads import log_seqs
from .old_journal import old_view
from .opening import open_state
from .retention import SLOT_GRACE

#: Claims of the deletion slot before giving up under extreme contention.
MAX_CLAIMS = 50


async def delete_stored(remote: JournalStorage, *, trusted: bool, actor: str, reason: str) -> bool:
    """Delete the store at `remote`, the newest of its key's generations (`_journal.generations`; steps in the
    module docstring); False if there is none, or another deletion got there first."""
    remote, _, deleted = await newest_generation(remote)
    if deleted is not None:
        return False
    try:
        state, _ = await open_state(remote)
    except StoreDeleted:
        return False
    except StoreNotFound:
        return False
    record = await _claim(remote, state, trusted=trusted, actor=actor, reason=reason)
    if record is None:
        return False
    data = encode_marker(record)
    await remote.write_many({HEAD_NAME: data})
    await _sweep(remote, data, keep={HEAD_NAME, log_name(record.seq)})
    await _sweep_prefix(remote)
    await remote.write_many({HEAD_NAME: data})  # again: a save that committed just before may have hinted since
    await tidy_local_dirs(remote)  # local disk keeps empty directories, which list_keys would list
    return True


async def _claim(remote: JournalStorage, state: State, *, trusted: bool, actor: str, reason: str) -> Deleted | None:
    """Take the slot after the newest commit for the deletion record, checking each newest state found
    against read-only content; None if a concurrent deletion took it."""
    for _ in range(MAX_CLAIMS):
        files = await _checked_files(remote, state, trusted)
        record = Deleted(deleted=True, seq=state.seq + 1, at=_now(), actor=actor, reason=reason, files=files)
        data = encode_marker(record)
        if await remote.create_exclusive(log_name(record.seq), data) and (
            remote.capabilities.atomic_create or await remote.read(log_name(record.seq)) == data
        ):
            return record
        try:  # a save (or another deletion) took the slot: delete what it committed too
            state, _ = await open_state(remote)
        except StoreDeleted:
            return None
    raise StorageError(f"Could not delete {remote.uri}: {MAX_CLAIMS} concurrent commits got there first")


async def _checked_files(remote: JournalStorage, state: State, trusted: bool) -> int:
    """How many files `state` holds; `ReadOnlyPath` if some lie under a read-only prefix persisted with
    the store (`_rules.read_only`) and the caller is not trusted."""
    await state.files.need_under("")
    paths = state.files.under("")
    if trusted:
        return len(paths)
    prefixes = persisted(state.ext)
    held = under_read_only(paths, prefixes)
    if held:
        raise ReadOnlyPath(
            f"{remote.uri} holds read-only content ({held[0]!r} under {len(prefixes)} read-only prefixes); "
            "delete it with trusted=True"
        )
    return len(paths)


async def _sweep(remote: JournalStorage, record: bytes, *, keep: Iterable[str]) -> None:
    """Remove the journal and the store prefix but `keep`; young log slots become the record."""
    journal = await remote.stat(under=JOURNAL_DIR)
    young = {log_name(s) for s in log_seqs(journal) if journal[log_name(s)].modified > clock() - SLOT_GRACE}
    kept = set(keep) | young
    await remote.write_many(dict.fromkeys(young - set(keep), record))
    # the prefix's names of an old journal inside it would name the journal here: `_sweep_prefix` takes those
    prefix = {n for n in await remote.list() if not (remote.journal_moved and n.startswith(JOURNAL_DIR + "/"))}
    await remote.remove_all(sorted((set(journal) | prefix) - kept))


async def _sweep_prefix(remote: JournalStorage) -> None:
    """Remove what upstream's layout holds still (a projection that raced the first sweep), and an old
    journal inside the prefix (a store saved by versions before issue 8, or the fences of its move)."""
    left = [n for n in await remote.list() if not n.startswith(JOURNAL_DIR + "/")]
    await remote.remove_all(left)
    if remote.journal_moved:
        old = old_view(remote)
        await old.remove_all(list(await old.list(under=JOURNAL_DIR)))


async def tidy_local_dirs(remote: JournalStorage) -> None:
    """On local disk, remove the empty directories under the store prefix and the journal, and the prefix
    itself if empty: object stores have none, and `list_keys` lists a directory left behind as a store.
    Files are never touched, so a racing writer of a new generation keeps what it wrote."""
    if remote.capabilities.symlinks:  # local disk
        for root in (remote.prefix, remote.journal_root):
            await asyncio.to_thread(remove_empty_tree, root)


async def remove_empty_prefix(remote: JournalStorage) -> None:
    """On local disk, remove the store prefix's directory if nothing is left in it (what a save refused
    by a deletion leaves once it removed its uploads: removing a file already takes the directories it
    leaves empty below the prefix). One call, however large a new generation in the prefix is."""
    if remote.capabilities.symlinks:
        with contextlib.suppress(OSError):  # not empty (a new generation's files), or already gone
            await asyncio.to_thread(os.rmdir, remote.prefix)


async def is_deleted(remote: JournalStorage) -> bool:
    """Whether the journal's head is a deletion record (one read)."""
    return parse_deleted(await remote.read(HEAD_NAME)) is not None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
