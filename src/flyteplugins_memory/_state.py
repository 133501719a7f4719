"""The local state behind one store handle: working directory, file index and unsaved changes.

`MemoryStore` is the public facade; this object does the handle's local reads and writes (in threads,
so the shared event loop never blocks) and moves its changes to and from storage through `_transfer`.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

from ._errors import CorruptStore
from ._layout import AUDIT_LOG_PATH
from ._manifest import FileEntry, Manifest
from ._paths import MESSAGES_PATH
from ._records import MemoryMeta, decode_audit_lines, encode_messages
from ._storage import RemoteStore
from ._transfer import PendingChanges, Snapshot, pull, push, scan
from ._workdir import WorkDir
from ._writes import apply_write, plan_write


class LocalState:
    """One handle's working directory, its index of live files and what it has not saved yet."""

    def __init__(self, root: pathlib.Path):
        self.workdir = WorkDir(root)
        self.manifest = Manifest()
        self.pending = PendingChanges()
        #: serializes writes and saves of this handle (all run on the one syncify loop)
        self.lock = asyncio.Lock()

    def scan(self) -> Snapshot:
        """Index an existing local root (blocking; only at construction)."""
        snapshot = scan(self.workdir)
        self.manifest = snapshot.manifest
        return snapshot

    async def pull(self, remote: RemoteStore) -> Snapshot:
        """Replace the local state with the remote store's."""
        snapshot = await pull(remote, self.workdir)
        self.manifest = snapshot.manifest
        return snapshot

    async def push(self, remote: RemoteStore, messages: list[dict[str, Any]]) -> None:
        """Publish unsaved changes and the transcript; callers hold `lock`."""
        await self.flush_messages(messages)
        await push(remote, self.workdir, self.manifest, self.pending, messages)
        self.pending.clear()

    async def flush_messages(self, messages: list[dict[str, Any]]) -> None:
        await asyncio.to_thread(self.workdir.write, MESSAGES_PATH, encode_messages(messages))

    def entry(self, rel: str) -> FileEntry | None:
        """The index entry of `rel`; raises `CorruptStore` if its sidecar is malformed."""
        entry = self.manifest.get(rel)
        if entry is not None and entry.meta_error:
            raise CorruptStore(entry.meta_error)
        return entry

    async def read_text(self, rel: str) -> str | None:
        """Text of `rel`, or None if the store has no such file; refuses paths escaping the root."""
        data = await asyncio.to_thread(self.workdir.read, rel)
        if data is None or rel not in self.manifest:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptStore(f"{rel!r} is not valid UTF-8 text") from exc

    async def check_inside_root(self, rel: str) -> None:
        await asyncio.to_thread(self.workdir.resolve, rel)

    async def audit_events(self) -> list[dict[str, Any]]:
        return decode_audit_lines(await asyncio.to_thread(self.workdir.read, AUDIT_LOG_PATH) or b"")

    async def write(self, rel: str, content: str, **options: Any) -> MemoryMeta:
        """Plan and apply one write (see `plan_write` for `options`); callers hold `lock`."""
        plan = plan_write(self.manifest.get(rel), rel, content, taken_versions=self.pending.versions, **options)
        await asyncio.to_thread(apply_write, self.workdir, plan)
        self.manifest.put(plan.entry)
        self.pending.record(plan)
        return plan.meta
