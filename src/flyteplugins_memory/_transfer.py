"""Moving a store between remote storage and a local working directory.

`pull` validates everything it fetched (object names, sidecars, transcript) before it writes a byte
locally; `push` uploads what a handle changed, contents first and the transcript, the store's sentinel,
last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._inventory import Inventory, build_manifest, take_inventory
from ._layout import AUDIT_LOG_PATH, sidecar_name
from ._manifest import Manifest
from ._paths import MESSAGES_PATH
from ._records import decode_messages, encode_messages, encode_meta
from ._storage import RemoteStore
from ._workdir import WorkDir
from ._writes import WritePlan


@dataclass
class Snapshot:
    """What an opened store holds: its files, its transcript (None if it has none) and its inventory."""

    manifest: Manifest
    messages: list[dict[str, Any]] | None
    inventory: Inventory


@dataclass
class PendingChanges:
    """What a handle changed since it was last in sync with remote storage."""

    written: set[str] = field(default_factory=set)
    versions: list[str] = field(default_factory=list)
    audit_events: int = 0

    def record(self, plan: WritePlan) -> None:
        self.written.add(plan.meta.path)
        if plan.version:
            self.versions.append(plan.version)
        if plan.event is not None:
            self.audit_events += 1

    def clear(self) -> None:
        self.written.clear()
        self.versions.clear()
        self.audit_events = 0

    def __bool__(self) -> bool:
        return bool(self.written or self.versions or self.audit_events)


def _snapshot(inventory: Inventory, contents: Mapping[str, bytes]) -> Snapshot:
    messages = decode_messages(contents[MESSAGES_PATH]) if MESSAGES_PATH in contents else None
    return Snapshot(build_manifest(inventory, contents), messages, inventory)


async def pull(remote: RemoteStore, workdir: WorkDir) -> Snapshot:
    """Download a store into `workdir` (everything but version snapshots) and index it."""
    inventory = take_inventory(await remote.list())
    contents = await remote.read_many(inventory.objects_to_hydrate())
    for path in [p for p in inventory.files if p not in contents]:
        del inventory.files[path]  # deleted between listing and reading
    snapshot = _snapshot(inventory, contents)
    await asyncio.to_thread(_materialize, workdir, contents)
    return snapshot


def _materialize(workdir: WorkDir, contents: Mapping[str, bytes]) -> None:
    for name, data in contents.items():
        workdir.write(name, data)


def scan(workdir: WorkDir) -> Snapshot:
    """Index an existing local root (blocking; for stores constructed with an explicit ``root``)."""
    inventory = take_inventory(dict(workdir.scan()))
    contents = {name: data for name in inventory.objects_to_hydrate() if (data := workdir.read(name)) is not None}
    return _snapshot(inventory, contents)


async def push(
    remote: RemoteStore, workdir: WorkDir, manifest: Manifest, pending: PendingChanges, messages: list[Any]
) -> None:
    """Upload the files, sidecars, versions and audit trail `pending` names, then the transcript."""
    contents = await asyncio.to_thread(_collect, workdir, manifest, pending)
    await remote.write_many(contents)
    await remote.write_many({MESSAGES_PATH: encode_messages(messages)})


def _collect(workdir: WorkDir, manifest: Manifest, pending: PendingChanges) -> dict[str, bytes]:
    contents: dict[str, bytes] = {}
    for path in sorted(pending.written):
        entry = manifest.get(path)
        data = workdir.read(path)
        if entry is None or entry.meta is None or data is None:
            continue
        contents[path] = data
        contents[sidecar_name(path)] = encode_meta(entry.meta)
    for name in pending.versions:
        if (data := workdir.read(name)) is not None:
            contents[name] = data
    if pending.audit_events and (log := workdir.read(AUDIT_LOG_PATH)) is not None:
        contents[AUDIT_LOG_PATH] = log
    return contents
