"""What a storage backend is to the store: one verified fsspec filesystem class, declared in one module each.

A `Backend` says everything that differs per backend (`storage._local`, `_memory`, `_s3`, `_gcs`): the exact
filesystem class the store accepts, the protocols it serves, how its create-only write is made atomic (the
commit point, `storage._conditional`), what it can do (`Capabilities`), how its filesystem is built from
the options of its prefix, and its own upload path where it has one (S3's obstore writes). The registry
(`storage._registry`) maps a filesystem to its backend; nothing else names a backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import fsspec

from ._contract import Capabilities

__all__ = ["Backend", "class_path"]


def class_path(fs: fsspec.AbstractFileSystem) -> str:
    """`fs`'s exact class as ``module.qualname`` (backends are matched by exact class, never a subclass)."""
    cls = type(fs)
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass(frozen=True)
class Backend:
    """One verified backend.

    Attributes:
        class_path: The fsspec filesystem class, ``module.qualname``, matched exactly.
        protocols: The URI protocols it serves (``s3``; ``gs`` and ``gcs``).
        atomic_create: How its create-only write is made atomic (for people; `Capabilities` for code).
        capabilities: What it can do.
        filesystem: Builds its filesystem from the options of a prefix (None: ``fsspec.filesystem``).
        create: A blocking create-only write of its own, ``(fs, path, data) -> created`` (None: fsspec's
            ``pipe_file(..., mode="create")``, which the server makes conditional).
        emulator_env: An environment variable that, when set, points it at an emulator that ignores
            preconditions: then `emulated` is declared instead, and requests are not made concurrently.
        emulated: What it can do against that emulator.
    """

    class_path: str
    protocols: tuple[str, ...]
    atomic_create: str
    capabilities: Capabilities
    filesystem: Callable[[Mapping[str, Any]], fsspec.AbstractFileSystem] | None = None
    create: Callable[[fsspec.AbstractFileSystem, str, bytes], bool] | None = None
    emulator_env: str | None = None
    emulated: Capabilities | None = None

    def is_emulated(self) -> bool:
        """Whether the environment points this backend at its emulator."""
        return self.emulator_env is not None and bool(os.environ.get(self.emulator_env))

    def declared(self) -> Capabilities:
        """What a store on this backend can rely on, now (against an emulator, `emulated`)."""
        if self.emulated is not None and self.is_emulated():
            return self.emulated
        return self.capabilities
