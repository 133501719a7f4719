"""`MemoryStore.import_store(src, key=...)`: a new store made from an export archive (format: `_rules.archive_format`).

    1. spool     read the archive once into a local temp directory, checking every rule
                 (`_api.archive.spool`): a refused archive has written nothing to storage
    2. free      refuse (`StoreAlreadyExists`) a key that holds a store; a key whose store was deleted
                 takes a new generation, as ``create`` does (`_journal.generations`)
    3. claim     create-only ``log/1`` of the new journal with a tombstone: of concurrent creators
                 (``create``, another import), exactly one gets the slot, and the others'
                 ``create`` fails as for any existing store
    4. copy      the prefix's objects (``messages.json`` last: upstream's sign that a store exists), then
                 the journal's, then its ``log/1`` over the claim (or the claim removed, if the archive's
                 history starts later), then ``head.json``
    5. record    open the new store and commit the import as an audited commit (op ``import``)

A failure in 4 or 5 removes what it wrote (the claim last), so the key is free again: an archive whose
journal passes every check of the spool but does not open is refused with nothing left behind. The journal's objects
name nothing of where they live, so they are copied as they are: the imported store has the source's
commits, log, versions and settings, and continues from its newest commit.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import tempfile
from typing import Any, Self

from ..._base.syncify import syncify
from ..._handle.special_commits import Settings
from ..._journal.generations import generation_to_create
from ..._journal.journal_storage import JournalStorage
from ..._journal.old_journal import old_view
from ..._rules import location
from ..._rules.archive_format import DEFAULT_MAX_MEMBER_BYTES, DEFAULT_MAX_TOTAL_BYTES, Target, logical_name
from ..._rules.arguments import check_int, check_optional_str
from ..._rules.codecs import utc_timestamp, write_event
from ..._rules.layout import HEAD_NAME, JOURNAL_DIR, log_name
from ..._rules.markers import TOMBSTONE
from ..._rules.paths import MESSAGES_PATH, validate_segment
from ..._rules.progress import CountingReader, ProgressCallback
from ..._rules.writes import ChangeOptions
from ...errors import InvalidArgument, StorageError, StoreAlreadyExists
from ...storage._contract import ObjectStorage
from ...storage._fsspec import filesystem_for
from ...storage._workdir import remove_empty_tree
from ..keyed import KeyedAPI
from .file import open_archive
from .spool import Limits, Spooled, spool

__all__ = ["ImportAPI"]

#: The audit op of an import.
IMPORT_OP = "import"
#: Bytes of objects written to storage at once.
BATCH_BYTES = 32 << 20
BATCH_OBJECTS = 64
FIRST = log_name(1)


class ImportAPI(KeyedAPI):
    """Importing an archive as a new store: `import_store` (a keyed constructor, as `open` and `create`)."""

    @syncify
    @classmethod
    async def import_store(
        cls,
        src: str | os.PathLike[str],
        *,
        key: str | None = None,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        root: str | None = None,
        remote_path: str | None = None,
        max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        actor: str = "agent",
        reason: str = "",
        progress: ProgressCallback | None = None,
    ) -> Self:
        """Create a new store for `key` (resolved like `create`; `root`, a storage root or raw-data path,
        instead of the context's), or at `remote_path`, from an archive `export` wrote at `src` (a local path
        or an fsspec URI), and return a handle of it. Exclusive like `create`: a key that
        holds a store raises `StoreAlreadyExists`; a key whose store was deleted takes a new one.

        The archive is untrusted: it is read and checked in full before anything is stored, and refused with
        `UnsafeArchive` (its ``reason`` says which rule) if a member has an absolute path or ``..``, is a
        link, a device or a fifo, appears twice, is a file and also a directory of another, is not in the
        manifest (or a listed one is missing), fails its checksum, holds more than `max_member_bytes`, or if
        all of them (counted as they decompress, so a compression bomb stops there) pass `max_total_bytes`;
        also if it is not a gzip'd tar or its manifest has an unknown format. A refused import leaves nothing
        in storage. `ArchiveNotFound` if there is nothing at `src`. The import is an audited commit (op
        ``import``, by `actor`, for `reason`).
        `progress`, if given, is called as ``progress(phase, bytes_done, bytes_total)``: phase ``"check"``
        while the archive is read and checked, then ``"store"`` while its members are stored (see
        `ProgressCallback`).
        """
        source = os.fspath(src)
        limits = _limits(max_member_bytes, max_total_bytes)
        report = progress or _silent
        ChangeOptions(actor, reason, None, False, True)  # checks actor and reason
        remote_path = _destination(key, org, project, domain, root, remote_path)
        spool_dir = pathlib.Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="flyte_memory_import_"))
        try:
            archive = await asyncio.to_thread(_spool_from, source, spool_dir, limits, report)
            remote, _ = await generation_to_create(JournalStorage.at(remote_path))
            await _refuse_taken(cls, remote)
            await _claim(remote)
            written: list[tuple[bool, str]] = []
            try:
                await _copy(remote, archive, written, report)
                store = await cls.open.aio(remote_path=remote_path)
                await _record(store, source, archive, actor, reason)
            except BaseException:  # opening and recording too: a store that does not open is no import
                await _undo(remote, written)
                raise
        finally:
            await asyncio.to_thread(shutil.rmtree, spool_dir, True)
        return store


def _destination(
    key: str | None, org: str | None, project: str | None, domain: str | None, root: str | None, remote_path: str | None
) -> str:
    """Where the new store goes: `remote_path` as given, else `key` resolved like `MemoryStore.open`."""
    if (key is None) == (remote_path is None):
        raise InvalidArgument("MemoryStore.import_store needs exactly one of key=... or remote_path=...")
    check_optional_str("root", root)
    if remote_path is not None:
        check_optional_str("remote_path", remote_path)
        # its last segment names the store, as `open` reads it: "", "/" or "x/." name none
        validate_segment(remote_path.rstrip("/").rsplit("/", 1)[-1], name="key")
        return remote_path
    return location.remote_path_for_key(key or "", org, project, domain, root)


def _limits(max_member_bytes: int, max_total_bytes: int) -> Limits:
    for name, value in (("max_member_bytes", max_member_bytes), ("max_total_bytes", max_total_bytes)):
        check_int(name, value)
        if value < 1:
            raise InvalidArgument(f"{name} must be at least 1, got {value}")
    return Limits(max_member_bytes, max_total_bytes)


def _silent(phase: str, done: int, total: int) -> None:
    """The progress callback of a caller who gave none."""


def _spool_from(source: str, into: pathlib.Path, limits: Limits, progress: ProgressCallback) -> Spooled:
    archive = open_archive(source, filesystem_for(source))
    try:
        return spool(CountingReader(archive, "check", archive.size, progress), into, limits)
    finally:
        archive.close()


async def _refuse_taken(cls: Any, remote: JournalStorage) -> None:
    if await cls._remote_store_exists(remote.uri):
        raise StoreAlreadyExists(f"MemoryStore already exists at {remote.uri}")


async def _claim(remote: JournalStorage) -> None:
    """Step 3 of the module docstring."""
    if not await remote.create_exclusive(FIRST, TOMBSTONE):
        raise StoreAlreadyExists(f"MemoryStore already exists at {remote.uri}")


async def _copy(remote: JournalStorage, archive: Spooled, written: list, progress: ProgressCallback) -> None:
    """Step 4 of the module docstring, noting in `written` each object written."""
    # the sizes were checked against every member as it was spooled
    counter = _StoreProgress(progress, sum(int(entry["size"]) for entry in archive.manifest.members.values()))
    for group in _in_order(archive):
        await _write(remote, group, written, counter)
    if not any(t.in_journal and logical_name(t) == FIRST for t, _ in archive.members.values()):
        await remote.remove_many([FIRST])


def _in_order(archive: Spooled) -> list[list[tuple[Target, pathlib.Path]]]:
    """The members in the order they are stored: the prefix (transcript last), the journal, then its first
    record and head, which make the new journal visible."""
    members = sorted(archive.members.values(), key=lambda m: (m[0].in_journal, m[0].name))
    last = {(False, MESSAGES_PATH), (True, FIRST), (True, HEAD_NAME)}
    keyed = [(m, (m[0].in_journal, logical_name(m[0]))) for m in members]
    return [
        [m for m, k in keyed if k not in last],
        [m for m, k in keyed if k == (False, MESSAGES_PATH)],
        [m for m, k in keyed if k == (True, FIRST)],
        [m for m, k in keyed if k == (True, HEAD_NAME)],
    ]


class _StoreProgress:
    """Bytes stored so far of an import's members, reported under phase ``"store"``."""

    def __init__(self, progress: ProgressCallback, total: int):
        self.progress, self.total, self.done = progress, total, 0
        progress("store", 0, total)

    def add(self, stored: int) -> None:
        self.done += stored
        self.progress("store", self.done, self.total)


async def _write(
    remote: JournalStorage, members: list[tuple[Target, pathlib.Path]], written: list, counter: _StoreProgress
) -> None:
    """Store `members` in batches of bounded bytes, noting each one written."""
    views: dict[bool, ObjectStorage] = {False: old_view(remote), True: remote}
    for start in range(0, len(members), BATCH_OBJECTS):
        batch = members[start : start + BATCH_OBJECTS]
        loaded = await asyncio.to_thread(_load, batch)
        for in_journal, view in views.items():
            objects = {logical_name(t): d for t, d in loaded if t.in_journal is in_journal}
            written.extend((in_journal, n) for n in objects)
            await view.write_many(objects)
        counter.add(sum(len(data) for _, data in loaded))


def _load(batch: list[tuple[Target, pathlib.Path]]) -> list[tuple[Target, bytes]]:
    return [(target, path.read_bytes()) for target, path in batch]


async def _undo(remote: JournalStorage, written: list[tuple[bool, str]]) -> None:
    """Best effort: remove what a failed import wrote, then its claim. The whole journal goes: the claim
    made it ours, and the import's own commit (a record, perhaps a checkpoint) may have landed in it."""
    try:
        await old_view(remote).remove_all([n for j, n in written if not j])
        journal = {n for j, n in written if j} | set(await remote.list(under=JOURNAL_DIR))
        await remote.remove_all(sorted(journal - {FIRST}))
        await remote.remove_many([FIRST])
        if remote.capabilities.symlinks:  # local disk: no empty directories left to look like a store
            for root in (remote.prefix, remote.journal_root):
                await asyncio.to_thread(remove_empty_tree, root)
    except StorageError:
        pass  # the original failure is what the caller must see


async def _record(store: Any, source: str, archive: Spooled, actor: str, reason: str) -> None:
    """Commit the import as one audited commit on the imported history."""
    event = write_event(
        op=IMPORT_OP, path="", old_sha="", new_sha="", actor=actor, reason=reason, ts=utc_timestamp(), version_file=""
    )
    event.update(source=source, archive_sha256=archive.sha256, from_key=archive.manifest.key)
    event["members"] = len(archive.members)
    await store._checkout.change_settings(store, lambda _base: Settings({}, [event]), actor=actor, reason=reason)
