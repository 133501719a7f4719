"""Version snapshots on demand: listed and read from storage only when asked for, never on open."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ._errors import InvalidPath, VersionNotFound
from ._inventory import take_inventory
from ._layout import Kind, classify, versions_dir_name
from ._storage import RemoteStore
from ._workdir import WorkDir


async def list_versions(remote: RemoteStore | None, pending: Sequence[str], rel: str) -> list[str]:
    """Saved (one listing of the path's version directory) and pending snapshot names of `rel`, oldest first."""
    directory = versions_dir_name(rel)
    saved: list[str] = []
    if remote is not None:
        saved = take_inventory(await remote.list(under=directory)).versions.get(rel, [])
    unsaved = [name for name in pending if name.startswith(directory + "/")]
    return sorted(set(saved) | set(unsaved))


async def read_version(remote: RemoteStore | None, workdir: WorkDir, pending: Sequence[str], name: str) -> str:
    """Text of the snapshot `name`; raises `InvalidPath` for other names and `VersionNotFound` if absent."""
    if not isinstance(name, str) or classify(name).kind is not Kind.VERSION:
        raise InvalidPath(f"{name!r} does not name a version snapshot")
    data = await asyncio.to_thread(workdir.read, name) if name in pending else None
    if data is None and remote is not None:
        data = await remote.read(name)
    if data is None:
        raise VersionNotFound(f"No version snapshot {name!r}")
    return data.decode("utf-8", errors="replace")
