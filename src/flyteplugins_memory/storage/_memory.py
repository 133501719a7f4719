"""``memory://``: fsspec's `MemoryFileSystem`, one process's objects (tests, demos, a task's scratch stores).

Its create-only write checks and writes under a process-wide lock, which makes it atomic for every writer
there is: they all live in this process (`Capabilities.cross_process` is False).
"""

from __future__ import annotations

import threading

import fsspec

from ._backend import Backend
from ._contract import Capabilities

__all__ = ["MEMORY"]

_LOCK = threading.Lock()


def _create(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    with _LOCK:
        if fs.exists(path):
            return False
        fs.pipe_file(path, data)
        return True


MEMORY = Backend(
    class_path="fsspec.implementations.memory.MemoryFileSystem",
    protocols=("memory",),
    atomic_create="check and write under a process-wide lock",
    capabilities=Capabilities(atomic_create=True, if_match=False, symlinks=False, cross_process=False),
    create=_create,
)
