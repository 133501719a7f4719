"""Every error the store raises, in one place.

Upstream's three names stay so existing ``except`` clauses keep working; each precise leaf also inherits
the builtin it corresponds to, so ``except FileNotFoundError`` and friends work too::

    MemoryStoreError (RuntimeError)                 upstream name; base of everything below
    ├── InvalidKey (ValueError)                     key is not a single safe path segment
    ├── InvalidPath (ValueError)                    relative path is absolute, empty, has '..' or NUL
    │   └── PathEscapesRoot                         path leaves the store root (e.g. through a symlink)
    ├── AccessDenied (PermissionError)              upstream name; write refused by policy
    │   ├── ReservedPath                            messages.json, audit/, meta/, versions/
    │   └── ReadOnlyPath                            under one of the store's read_only_prefixes
    ├── ConcurrencyError                            upstream name; stale expected_sha or conflicting save
    ├── StoreNotFound (FileNotFoundError)           no store at the key's remote path
    ├── VersionNotFound (FileNotFoundError)         no such version snapshot
    ├── StoreAlreadyExists (FileExistsError)        create() of a key that is already there
    ├── CorruptStore (ValueError)                   a transcript, sidecar or object is malformed
    │   └── UnsafeStoreContent                      remote content that would escape or collide
    ├── ContextError (LookupError)                  org/project/domain/raw-data path unavailable
    └── StorageError (OSError)                      the storage backend failed
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "ConcurrencyError",
    "ContextError",
    "CorruptStore",
    "InvalidKey",
    "InvalidPath",
    "MemoryStoreError",
    "PathEscapesRoot",
    "ReadOnlyPath",
    "ReservedPath",
    "StorageError",
    "StoreAlreadyExists",
    "StoreNotFound",
    "UnsafeStoreContent",
    "VersionNotFound",
]


class MemoryStoreError(RuntimeError):
    """Base class of every error raised by the memory store."""


class InvalidKey(MemoryStoreError, ValueError):
    """A store key (or org/project/domain) is not a single, safe path segment."""


class InvalidPath(MemoryStoreError, ValueError):
    """A memory-relative path is malformed: absolute, empty, with ``..`` or a NUL byte."""


class PathEscapesRoot(InvalidPath):
    """A path resolves outside the store root, for example through a symlink."""


class AccessDenied(MemoryStoreError, PermissionError):
    """A write targets a path the store does not allow to be written."""


class ReservedPath(AccessDenied):
    """A write targets the transcript or the store's own bookkeeping prefixes."""


class ReadOnlyPath(AccessDenied):
    """A write targets one of the store's ``read_only_prefixes``."""


class ConcurrencyError(MemoryStoreError):
    """A write's ``expected_sha`` does not match, or a save conflicts with a concurrent save.

    Keeps upstream's constructor and attributes (``path``, ``expected_sha``, ``actual_sha``); ``paths``
    lists every conflicting path (``messages.json`` for a transcript conflict).
    """

    def __init__(self, path: str, expected_sha: str, actual_sha: str, *, paths: tuple[str, ...] = ()):
        message = f"ConcurrencyError for {path!r}: expected_sha={expected_sha} actual_sha={actual_sha}"
        if len(paths) > 1:
            message = f"ConcurrencyError: concurrent changes conflict on {', '.join(map(repr, paths))}"
        super().__init__(message)
        self.path = path
        self.expected_sha = expected_sha
        self.actual_sha = actual_sha
        self.paths = paths or (path,)


class StoreNotFound(MemoryStoreError, FileNotFoundError):
    """No store exists at the key's remote path."""


class VersionNotFound(MemoryStoreError, FileNotFoundError):
    """A version snapshot named by ``read_version`` does not exist."""


class StoreAlreadyExists(MemoryStoreError, FileExistsError):
    """``create`` was called for a key whose store already exists."""


class CorruptStore(MemoryStoreError, ValueError):
    """Stored content (transcript, sidecar, audit record) is malformed; it is never read as empty."""


class UnsafeStoreContent(CorruptStore):
    """Remote content names a path that would escape the store root or collide with its bookkeeping."""


class ContextError(MemoryStoreError, LookupError):
    """The Flyte context lacks what a keyed store needs (org, project, domain or a raw-data path)."""


class StorageError(MemoryStoreError, OSError):
    """The storage backend failed; the original exception is chained as ``__cause__``."""
