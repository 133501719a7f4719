"""`store.export(dest)`: the whole store as one ``.tar.gz`` (format: `_rules.archive_format`).

The archive holds every stored object as it is: the store prefix (files, transcript, sidecars, audit
log, ``versions/``, and an old journal's fences) and the journal outside it (records, checkpoints, parts,
blobs, audit segments, settings, the head hint), so the history gc() has not collected travels with the
store, and ``import_store`` makes the same store elsewhere. It streams: objects are read in batches of
at most `BATCH_BYTES`, each added to the archive (hashed as it goes) on a thread, and the archive is
written straight to `dest` (a multipart upload on S3); the manifest comes last. It is one committed
state: the newest when the export starts, pinned before anything is listed, whatever saves land while it
reads (`_journal.export_state`).
"""

from __future__ import annotations

import asyncio
import os
import tarfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from ..._base.syncify import syncify
from ..._base.version import WRITER
from ..._journal.export_state import Pinned, Read, Source, pin, settle
from ..._journal.journal_storage import JournalStorage
from ..._journal.old_journal import old_view
from ..._journal.store_deletion import is_deleted
from ..._rules.archive_format import MANIFEST_NAME, Manifest, count_kinds, journal_member, store_member
from ..._rules.arguments import check_flag
from ..._rules.codecs import sha256_bytes
from ..._rules.layout import JOURNAL_DIR
from ..._rules.progress import ProgressCallback
from ...errors import InvalidArgument, StoreDeleted, StoreNotFound, UnsavedChanges
from ...storage._fsspec import filesystem_for
from ..core import StoreCore
from .file import ArchiveOut
from .forget import Forgetting, forgetting

__all__ = ["ExportAPI", "ExportResult"]

#: Bytes of objects read from storage at once (the most the export holds in memory, beside one object).
BATCH_BYTES = 32 << 20
BATCH_OBJECTS = 64


@dataclass(frozen=True)
class ExportResult:
    """What `MemoryStore.export` wrote.

    Attributes:
        path: Where the archive is (the `dest` given).
        members: Objects in the archive (the manifest not counted).
        bytes: Size of the archive (compressed).
        data_bytes: Bytes of the objects it holds (uncompressed).
        counts: Objects by kind (``file``, ``sidecar``, ``version``, ``audit_log``, ``messages``,
            ``journal``, ...).
    """

    path: str
    members: int
    bytes: int
    data_bytes: int
    counts: dict[str, int]


class _Writer:
    """A tar.gz stream to an open file: members in order, each hashed for the manifest (blocking)."""

    def __init__(self, raw: ArchiveOut):
        # tarfile types its stream loosely: writing ("w|gz") needs only `write`
        self.tar = tarfile.open(fileobj=raw, mode="w|gz")  # type: ignore[call-overload]  # noqa: SIM115 - closed by `close`
        self.members: dict[str, dict[str, Any]] = {}
        self.mtime = time.time()

    def add(self, name: str, data: bytes, sha: str = "") -> None:
        """Add member `name` (`sha`: its sha256, if already known)."""
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), self.mtime, 0o644
        self.tar.addfile(info, _Reader(data))
        if name != MANIFEST_NAME:
            self.members[name] = {"sha256": sha or sha256_bytes(data), "size": len(data)}

    def add_batch(self, batch: list[Read]) -> None:
        for name, _, data, sha in batch:
            assert data is not None  # `settle` leaves out what was gone
            self.add(name, data, sha)


class _Reader:
    """A file-like view of bytes without a copy (``io.BytesIO`` would copy a large object)."""

    def __init__(self, data: bytes):
        self.working_copy, self.at = memoryview(data), 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.working_copy) if size < 0 else self.at + size
        chunk = self.working_copy[self.at : end].tobytes()
        self.at += len(chunk)
        return chunk


class ExportAPI(StoreCore):
    """Exporting the store to an archive: `export`."""

    @syncify
    async def export(
        self, dest: str | os.PathLike[str], *, overwrite: bool = True, progress: ProgressCallback | None = None
    ) -> ExportResult:
        """Write the whole store, as committed, to one ``.tar.gz`` at `dest` (a local path or an fsspec URI
        such as ``s3://bucket/backups/agent.tar.gz``): every file (text and binary), the transcript, the
        sidecars, the audit trail, ``versions/`` snapshots, record logs, metadata, proposals and settings,
        and the journal's history that gc() has not collected, with a ``manifest.json`` of checksums.
        `MemoryStore.import_store` makes a new store of it. Streams (memory bounded by a batch of objects).
        `progress`, if given, is called as ``progress("export", bytes_done, bytes_total)`` as objects are
        archived (see `ProgressCallback`). Whatever `dest` held stays until the archive is complete, and
        stays for good if the export fails; with ``overwrite=False`` a taken `dest` raises `ArchiveExists`.

        Raises `UnsavedChanges` if this handle holds changes (``save()`` first: only committed state is
        exported), `StoreNotFound` if the store was never saved, `StoreDeleted` if it was deleted,
        `InvalidArgument` if `dest` is inside the store's own prefix or journal, `StorageError` if the
        archive cannot be written there.
        """
        target = os.fspath(dest)
        if self.has_unsaved_changes():
            raise UnsavedChanges(f"MemoryStore {self.key!r} has unsaved changes: save() before export()")
        await self._checkout.ready(self)
        remote = self._checkout.remote()
        fs = filesystem_for(target)
        path = str(fs._strip_protocol(target))
        _refuse_inside(remote, fs, path, target)
        pinned = await pin(remote)  # before listing: what the listing adds of later states is left out
        names = await _names(remote)
        names = pinned.select(names) if pinned is not None else names
        forget = await forgetting(remote)  # nothing expired is archived: left out, or redacted as read
        names = forget.select(names)
        archive = await asyncio.to_thread(ArchiveOut, target, fs, overwrite=check_flag("overwrite", overwrite))
        writer: _Writer | None = None
        try:
            writer = await asyncio.to_thread(_Writer, archive)
            await _write_all(remote, names, writer, pinned, forget, progress or _silent)
            manifest = _manifest(self.key, remote.uri, writer)
            size = await asyncio.to_thread(_finish, writer, archive, manifest)
        except BaseException:
            await asyncio.to_thread(_abandon, archive, writer)
            raise
        data = sum(m["size"] for m in writer.members.values())
        return ExportResult(target, len(writer.members), size, data, manifest.counts)


def _refuse_inside(remote: JournalStorage, fs: Any, path: str, target: str) -> None:
    """Refuse a `dest` in the store's own prefix or journal: written there behind the store's back, the
    archive would be a file to upstream (not to ours) and be archived by the next export."""
    if type(fs) is not type(remote.store.fs):
        return  # another backend: none of its paths is this store's
    for root in (remote.prefix, remote.journal_root):
        if _within(fs, path, root):
            raise InvalidArgument(f"Cannot export MemoryStore {remote.uri} into its own storage: {target}")


def _within(fs: Any, path: str, root: str) -> bool:
    if isinstance(fs, LocalFileSystem):  # through symlinks and relative parts, as the disk resolves them
        path, root = os.path.realpath(path), os.path.realpath(root)
    path, root = path.rstrip("/"), root.rstrip("/")
    return path == root or path.startswith(root + "/")


async def _names(remote: JournalStorage) -> dict[str, Source]:
    """Every object to archive, by member name."""
    if await is_deleted(remote):
        raise StoreDeleted(f"MemoryStore at {remote.uri} was deleted")
    # through the old view, names under meta/.journal/ in the prefix are that old journal's, as stored
    found = {store_member(n): (False, n, s) for n, s in (await old_view(remote).list()).items()}
    if remote.journal_moved:
        listed = await remote.list(under=JOURNAL_DIR)
        found.update({journal_member(n): (True, n, s) for n, s in listed.items()})
    if not found:
        raise StoreNotFound(f"No MemoryStore at {remote.uri} (never saved?)")
    return dict(sorted(found.items()))


async def _write_all(
    remote: JournalStorage,
    names: dict[str, Source],
    writer: _Writer,
    pinned: Pinned | None,
    forget: Forgetting,
    progress: ProgressCallback,
) -> None:
    views = {False: old_view(remote), True: remote}
    total, done = sum(size for _, _, size in names.values()), 0
    progress("export", done, total)
    for batch in _batches(names):
        read: dict[tuple[bool, str], bytes] = {}
        for in_journal, view in views.items():
            wanted = [names[m][1] for m in batch if names[m][0] is in_journal]
            read.update({(in_journal, n): d for n, d in (await view.read_many(wanted)).items()})
        reads = await forget.redact([(m, names[m], read.get(names[m][:2]), "") for m in batch])
        ready = await settle(pinned, reads)
        await asyncio.to_thread(writer.add_batch, ready)
        done += sum(len(data or b"") for _, _, data, _ in ready)
        # an object may have grown since it was listed: the total grows with it, never below what is done
        progress("export", done, max(done, total))
    cut = forget.cut_parts(writer.members)  # in place of the parts left out for the labels they held
    if cut:
        await asyncio.to_thread(writer.add_batch, cut)
        done += sum(len(data or b"") for _, _, data, _ in cut)
        progress("export", done, max(done, total))


def _silent(phase: str, done: int, total: int) -> None:
    """The progress callback of a caller who gave none."""


def _batches(names: dict[str, Source]) -> list[list[str]]:
    """Member names in batches of at most `BATCH_OBJECTS` objects and about `BATCH_BYTES` bytes."""
    batches: list[list[str]] = [[]]
    size = 0
    for member, (_, _, listed) in names.items():
        if batches[-1] and (size + listed > BATCH_BYTES or len(batches[-1]) >= BATCH_OBJECTS):
            batches.append([])
            size = 0
        batches[-1].append(member)
        size += listed
    return [b for b in batches if b]


def _manifest(key: str, source: str, writer: _Writer) -> Manifest:
    at = datetime.now(UTC).isoformat(timespec="milliseconds")
    counts = count_kinds(list(writer.members))
    return Manifest(key, source, at, WRITER, dict(writer.members), counts)


def _finish(writer: _Writer, archive: ArchiveOut, manifest: Manifest) -> int:
    """Add the manifest, end the tar and publish the archive at its destination; its size."""
    writer.add(MANIFEST_NAME, manifest.encode())
    writer.tar.close()
    return archive.publish()


def _abandon(archive: ArchiveOut, writer: _Writer | None) -> None:
    """Best effort after a failure: nothing half-written is published, and `dest` keeps what it held."""
    try:
        if writer is not None:  # closed now, else its stream flushes into the abandoned file when collected
            writer.tar.close()
    except Exception:
        pass
    archive.abandon()
