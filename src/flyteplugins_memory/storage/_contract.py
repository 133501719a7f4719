"""The storage contract: what the store needs from a backend, and what a backend declares it can do.

Everything above the storage seam (opening, committing, gc, purge, the journal move) talks to an
`ObjectStorage`: objects addressed by name relative to one prefix, read and written whole, with one
conditional primitive, `create_exclusive`, as the commit point. The contract is about objects only: where
a store's journal lives, and how its names map there, is the journal's business
(`_journal.journal_storage.JournalStorage` routes ``meta/.journal/...`` to a second `ObjectStorage`).
`FsspecStorage` (`storage._fsspec`) is the implementation on fsspec;
`flyteplugins_memory.testing.BackendConformance` proves a backend keeps it.

A backend's `Capabilities` are declared per filesystem class (`storage._registry.capabilities_of`), honestly:
what is not verified is declared absent, and the commit path and the conformance kit read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["Capabilities", "Listed", "ObjectStorage"]


@dataclass(frozen=True)
class Capabilities:
    """What a storage backend can do, as far as the store relies on it.

    Attributes:
        atomic_create: A create-only write (`ObjectStorage.create_exclusive`) is atomic: of two
            concurrent creates of one name, exactly one succeeds. Without it, concurrent saves of
            one key may lose one another (the commit path narrows the race, it cannot close it).
        if_match: The backend offers a conditional overwrite (S3 ``If-Match``, GCS generation
            preconditions). The store does not need it today; it is declared for what comes next.
        symlinks: The backend can hold symbolic links (local disk), which the store must refuse
            wherever it reads or lists, so no name can point outside the store.
        cross_process: Other processes see the same objects (False for ``memory://``, which lives in
            this process only).
    """

    atomic_create: bool
    if_match: bool
    symlinks: bool
    cross_process: bool


class Listed(NamedTuple):
    """A listed object: its size, and when it was last written (seconds since the epoch; 0 if unknown)."""

    size: int
    modified: float


@runtime_checkable
class ObjectStorage(Protocol):
    """Objects under one prefix, by name relative to it (``files/a.txt``, ``meta/a.txt.json``).

    Every method is a coroutine; a missing object is ``None`` or ``False``, never an error, and any
    other failure is `StorageError` (after transient ones have been retried).
    """

    @property
    def uri(self) -> str:
        """The prefix as a URI (``s3://bucket/agents/...``)."""
        ...

    @property
    def prefix(self) -> str:
        """The prefix as the backend's filesystem names it (no protocol)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do (see `Capabilities`)."""
        ...

    async def read(self, name: str) -> bytes | None:
        """Contents of object `name`, or None if it does not exist."""
        ...

    async def read_many(self, names: list[str]) -> dict[str, bytes]:
        """Contents of the named objects that exist (missing ones are left out)."""
        ...

    async def read_range(self, name: str, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` of object `name` (fewer where the object is shorter, ``b""`` past its
        end), or None if it does not exist: one ranged GET, so the parts of a large object can be
        fetched side by side (`storage._ranges`)."""
        ...

    async def write_many(self, objects: dict[str, bytes]) -> None:
        """Write (create or overwrite) every object; each one is whole or absent to readers."""
        ...

    async def create_exclusive(self, name: str, data: bytes) -> bool:
        """Create object `name` only if it does not exist; True if this call created it."""
        ...

    async def create_many(self, objects: dict[str, bytes]) -> set[str]:
        """Create each object only if its name is free; the names this call created (a name left out was
        taken, or its create failed and must not be relied on)."""
        ...

    async def remove_many(self, names: list[str]) -> None:
        """Delete the named objects one after the other, in order; missing ones are ignored."""
        ...

    async def remove_all(self, names: list[str]) -> None:
        """Delete the named objects, concurrently where the backend can, in no particular order."""
        ...

    async def exists(self, name: str) -> bool:
        """Whether object `name` exists."""
        ...

    async def list(self, under: str = "") -> dict[str, int]:
        """Every object under the prefix (or its subdirectory `under`) as ``{name: size}``."""
        ...

    async def stat(self, under: str = "") -> dict[str, Listed]:
        """Like `list`, with each object's modification time."""
        ...
