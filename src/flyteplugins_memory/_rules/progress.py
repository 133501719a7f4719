"""How long operations (`MemoryStore.export`, `MemoryStore.import_store`) report how far they are.

One callback, called as ``progress(phase, done, total)`` with byte counts: ``"export"`` counts the bytes
of stored objects added to the archive; an import first ``"check"``s the archive (compressed bytes read,
``total`` 0 when its size is unknown), then ``"store"``s its members (bytes written). A callback may be
called from a worker thread, so it should be quick and thread-safe (rich's `Progress` is); an exception
it raises aborts the operation as any failure does (an export leaves no archive, an import nothing stored).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["CountingReader", "ProgressCallback", "Readable"]

#: ``progress(phase, done, total)``: see the module docstring.
ProgressCallback = Callable[[str, int, int], None]


class Readable(Protocol):
    """What reads a stream needs of a file: ``read``."""

    def read(self, size: int = -1, /) -> bytes: ...


class CountingReader:
    """Reads through to `raw`, reporting the bytes read so far under `phase` after each read."""

    def __init__(self, raw: Readable, phase: str, total: int, progress: ProgressCallback):
        self.raw, self.phase, self.total, self.progress, self.done = raw, phase, total, progress, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.done += len(data)
        self.progress(self.phase, self.done, self.total)
        return data
