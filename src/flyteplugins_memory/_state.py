"""The state behind one store handle: its committed base, its unsaved changes and its local cache.

`MemoryStore` is the public facade. This object answers listings from the base state plus changes (no
I/O), fetches file contents into the working directory on first read (verifying their sha256), and
applies writes and deletes locally, in threads, so the shared event loop never blocks.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

from ._errors import CorruptStore
from ._journal import EMPTY_CHECKPOINT, FileRecord, State
from ._layout import blob_name
from ._merge import Changes
from ._records import MemoryMeta, sha256_bytes
from ._storage import RemoteStore
from ._workdir import WorkDir
from ._writes import WritePlan, apply, plan_delete, plan_write

#: Files fetched at once by `prefetch`.
PREFETCH_BATCH = 32


class LocalState:
    """One handle's view: committed base + unsaved changes, with file contents cached locally."""

    def __init__(self, root: pathlib.Path):
        self.workdir = WorkDir(root)
        self.base = State.at_checkpoint(EMPTY_CHECKPOINT)
        self.changes = Changes()
        self.versions: list[str] = []
        #: path -> sha256 of the bytes cached in the working directory
        self.cached: dict[str, str] = {}
        #: the base is an import of an upstream-written store, not yet in the journal
        self.imported = False
        #: serializes changes and saves of this handle (all run on the one syncify loop)
        self.lock = asyncio.Lock()

    def record(self, rel: str) -> FileRecord | None:
        return self.changes.files[rel] if rel in self.changes.files else self.base.files.get(rel)

    def live(self) -> dict[str, FileRecord]:
        files = {**self.base.files, **self.changes.files}
        return {p: r for p, r in files.items() if r is not None}

    def paths(self, prefix: str = "") -> list[str]:
        below = prefix + "/" if prefix else ""
        return sorted(p for p in self.live() if p.startswith(below))

    def has_file_or_dir(self, rel: str) -> bool:
        return self.record(rel) is not None or bool(self.paths(rel))

    def meta(self, rel: str) -> MemoryMeta | None:
        record = self.record(rel)
        return record.meta(rel) if record else None

    def has_unsaved_changes(self) -> bool:
        return bool(self.changes) or self.imported

    async def write_local(self, name: str, data: bytes) -> None:
        await asyncio.to_thread(self.workdir.write, name, data)

    async def check_inside_root(self, rel: str) -> None:
        await asyncio.to_thread(self.workdir.resolve, rel)

    async def read_bytes(self, rel: str, remote: RemoteStore | None) -> bytes | None:
        """Contents of `rel` (fetched and verified on first read), or None if there is no such file."""
        await self.check_inside_root(rel)
        record = self.record(rel)
        if record is None:
            return None
        if self.cached.get(rel) == record.sha256:
            return await asyncio.to_thread(self.workdir.read, rel)
        return (await self._fetch(remote, {rel: record}))[rel]

    async def prefetch(self, prefix: str, remote: RemoteStore | None) -> int:
        """Fetch every uncached file under `prefix`, `PREFETCH_BATCH` at a time; returns how many."""
        missing = {p: r for p in self.paths(prefix) if self.cached.get(p) != (r := self.live()[p]).sha256}
        items = list(missing.items())
        for start in range(0, len(items), PREFETCH_BATCH):
            await self._fetch(remote, dict(items[start : start + PREFETCH_BATCH]))
        return len(items)

    async def _fetch(self, remote: RemoteStore | None, records: dict[str, FileRecord]) -> dict[str, bytes]:
        names = {p: (p if r.legacy else blob_name(r.sha256)) for p, r in records.items()}
        found = await remote.read_many(list(names.values())) if remote is not None else {}
        contents = {}
        for path, record in records.items():
            data = found.get(names[path])
            if data is None or sha256_bytes(data) != record.sha256:
                raise CorruptStore(f"Stored content of {path!r} is missing or does not match its sha256")
            contents[path] = data
        await asyncio.to_thread(_cache, self.workdir, contents)
        self.cached.update({p: r.sha256 for p, r in records.items()})
        return contents

    async def write(self, rel: str, content: str, **options: Any) -> MemoryMeta:
        """Plan and apply one write (options as for `plan_write`); callers hold `lock`."""
        plan = plan_write(self.record(rel), rel, content, taken_versions=self.versions, **options)
        await self._apply(plan)
        assert plan.meta is not None
        return plan.meta

    async def delete(self, rel: str, **options: Any) -> bool:
        """Plan and apply one delete; False if there is no such file. Callers hold `lock`."""
        current = self.record(rel)
        if current is None:
            return False
        await self._apply(plan_delete(current, rel, taken_versions=self.versions, **options))
        return True

    async def _apply(self, plan: WritePlan) -> None:
        await asyncio.to_thread(apply, self.workdir, plan)
        base = self.base.files.get(plan.path)
        unchanged = plan.record is None and base is None
        if unchanged:
            self.changes.files.pop(plan.path, None)  # created and deleted before any save
        else:
            self.changes.files[plan.path] = plan.record
        if plan.record is None:
            self.cached.pop(plan.path, None)
        else:
            self.cached[plan.path] = plan.record.sha256
        self.versions += [plan.version] if plan.version else []
        self.changes.audit += [plan.event] if plan.event else []

    async def contents_to_save(self) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """The bytes of changed files and of pending version snapshots."""
        paths = [p for p, r in self.changes.files.items() if r is not None]
        return await asyncio.to_thread(_read_all, self.workdir, paths), await asyncio.to_thread(
            _read_all, self.workdir, self.versions
        )

    def committed(self, state: State) -> None:
        """The changes were committed as `state`."""
        self.base, self.changes, self.versions, self.imported = state, Changes(), [], False


def _cache(workdir: WorkDir, contents: dict[str, bytes]) -> None:
    for path, data in contents.items():
        workdir.write(path, data)


def _read_all(workdir: WorkDir, names: list[str]) -> dict[str, bytes]:
    out = {}
    for name in names:
        data = workdir.read(name)
        if data is None:
            raise CorruptStore(f"Local copy of {name!r} vanished before it was saved")
        out[name] = data
    return out
