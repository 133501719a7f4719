"""New files uploaded in place: at their own path, create-only, before the commit point.

A save used to upload each new file twice: its content-addressed blob before the commit point, and the
file at its own path (upstream's layout) after it. A path that its save's base state does not hold is
instead created at its own path with a create-only write, and committed the way files imported from an
upstream-written store are (``FileEntry.legacy``: the bytes are at the file's own path; `_journal.preserve`
copies them into a blob before a save overwrites or deletes the path, and `_journal.contents` reads them there,
falling back to that blob). Every version of this package since issue 8 reads such records, so the
format does not change. The projection then writes only the sidecar: 2 requests per new file, and a
large file crosses the wire once.

Never overwrite: a path whose create finds an object (a concurrent writer's new file, the stray of a
save that died, an upstream writer's file) or fails goes to its blob as before. Only backends whose
create-only write is atomic do this (`places_in_place`); elsewhere two writers could both "create".

What it costs (docs/decisions/0041-new-files-are-uploaded-in-place.md): a save that dies or conflicts after
this step leaves the files it created at their paths, unreferenced. No reader of ours looks at them, an
upstream reader lists them (without a sidecar), and the next save of such a path, by anyone, writes it as
usual. The first rewrite or delete of an in-place file copies its bytes into a blob once, as for an
imported file.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._rules.journal_objects import FileEntry
from .._rules.merge import Changes
from .._rules.state import State
from ..storage._contract import ObjectStorage


def places_in_place(remote: ObjectStorage) -> bool:
    """Whether new files may be uploaded in place here: only where create-only writes are atomic (the one
    place that asks; the storage seam's ``capabilities.atomic_create`` where it has one)."""
    return remote.capabilities.atomic_create


def new_files(base: State, changes: Changes, contents: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files this save writes at paths its base does not hold, with their bytes."""
    return {p: contents[p] for p, r in changes.files.items() if r is not None and p not in base.files}


async def upload_in_place(
    remote: ObjectStorage,
    base: State,
    changes: Changes,
    contents: Mapping[str, bytes],
    *,
    exclusive: bool,
    imported: bool,
) -> set[str]:
    """Create the save's new files at their own paths; returns the paths created (the rest need blobs).

    Not for a `create` (`exclusive`): its loser must leave no file behind in the winner's store. Not for
    the first save of a store upstream wrote (`imported`): until that save commits, opens read such a
    store by listing it, so a file left by a save that died would show up as part of it."""
    if exclusive or imported or not places_in_place(remote):
        return set()
    return await remote.create_many(new_files(base, changes, contents))


def committed_changes(changes: Changes, placed: set[str]) -> Changes:
    """`changes` as committed: the records of files placed in place say their bytes are at their path.
    A new object, so the handle's own records (which it recognises by identity) stay as they are."""
    if not placed:
        return changes
    out = changes.copy()
    out.files = {p: _at_path(r) if p in placed and r is not None else r for p, r in changes.files.items()}
    return out


def _at_path(record: FileEntry) -> FileEntry:
    return record.model_copy(update={"legacy": True})
