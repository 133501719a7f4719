"""The one seam to storage: fsspec filesystems, addressed by object names under a prefix.

Backends, each declared in a module of its own (`storage._registry` maps them): local disk (``/path`` or
``file://``, `storage._local`), ``memory://`` (`storage._memory`), ``s3://`` (s3fs, credentials from
``flyte.init(storage=flyte.storage.S3(...))`` or the ``FLYTE_AWS_*`` environment, `storage._s3`) and ``gs://``
(gcsfs, which honors ``STORAGE_EMULATOR_HOST``, `storage._gcs`). Backend exceptions are translated here and
nowhere else: a missing object is ``None`` or ``False``, any other failure is `StorageError`, after transient
ones have been retried under the `RetryPolicy` (see `_base.retry`).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import fsspec
from fsspec.utils import get_protocol

from .._base.retry import get_retry_policy, is_transient
from ..errors import StorageError, UnsafeStoreContent, UnsupportedBackend
from ._adaptive import is_throttling, limit_for
from ._contract import Capabilities, Listed, ObjectStorage
from ._copy import Copied, checked_copier
from ._fsio import AsyncIO, BlockingIO, bound_to_running_loop, gather_all
from ._options import storage_options_for
from ._registry import (
    UNVERIFIED_BACKENDS_ENV,
    allowed_protocols,
    backend_for_protocol,
    backend_of,
    capabilities_of,
    require_supported,
    underlying,
)
from ._s3_writes import writes_for

__all__ = ["Listed", "ObjectStorage", "FsspecStorage", "filesystem_for"]

#: a retried storage call is logged here at INFO (the CLI shows these lines on stderr)
logger = logging.getLogger(__name__)
T = TypeVar("T")
#: Objects deleted at once by `FsspecStorage.remove_all` on object stores.
REMOVE_BATCH = 500


def filesystem_for(uri: str) -> fsspec.AbstractFileSystem:
    """An fsspec filesystem for `uri`, configured from Flyte's storage settings and the options set for
    its prefix (`set_storage_options`, which win), with no listing cache: built by its backend's module
    (`storage._registry`), else by fsspec for a backend opted in."""
    protocol = get_protocol(uri)
    options = {"use_listings_cache": False, **storage_options_for(uri)}
    backend = backend_for_protocol(protocol)
    if backend is not None and backend.filesystem is not None:
        return backend.filesystem(options)
    if backend is None and protocol not in allowed_protocols():
        # refused before the filesystem is built: building some (ftp, http, zip ...) already does I/O
        raise UnsupportedBackend(
            f"Storage backend {protocol!r} (for {uri}) is not known to make create-only writes atomic, which "
            "every save relies on (verified: local disk, memory://, s3:// with s3fs, gs:// with gcsfs). If its "
            "pipe_file(..., mode='create') is atomic, or only one writer at a time saves each key, opt in with "
            f"flyteplugins_memory.allow_unverified_backend({protocol!r}) or {UNVERIFIED_BACKENDS_ENV}={protocol}."
        )
    try:
        return fsspec.filesystem(protocol, **options)
    except Exception as exc:  # unknown protocol, missing package, or a constructor that needs arguments
        raise UnsupportedBackend(f"No storage backend for {uri}: {exc}") from exc


def _modified(info: dict[str, Any]) -> float:
    """The modification time in a listing entry: ``mtime`` (local disk, GCS), ``LastModified`` (S3, whole
    seconds), ``created`` (memory)."""
    for field in ("mtime", "LastModified", "updated", "created"):
        value = info.get(field)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    return 0.0


class FsspecStorage:
    """Async access to the objects under one prefix, by name relative to that prefix (a store's, or its
    journal's: `_journal.journal_storage.JournalStorage` holds one of each).

    Implements `ObjectStorage`. Each call goes to the filesystem through `storage._fsio` (awaited directly on
    async filesystems, in a thread on blocking ones), under the retry policy, with failures translated
    to `StorageError` here and nowhere else.
    """

    def __init__(self, uri: str, fs: fsspec.AbstractFileSystem | None = None):
        self.uri = uri.rstrip("/")
        self.fs = fs or filesystem_for(self.uri)
        require_supported(self.uri, self.fs)  # before any request: the commit point needs atomic creates
        self.prefix = _stripped(self.fs, self.uri).rstrip("/")
        #: what this backend can do; the commit path reads `atomic_create`
        self.capabilities: Capabilities = capabilities_of(self.fs)
        self._io = _io_for(self.fs)

    def beside(self, prefix: str) -> FsspecStorage:
        """The objects under another `prefix` of the same filesystem (a path without protocol, as `prefix`
        is), sharing this one's filesystem, I/O and capabilities: no request, no new filesystem."""
        other = copy.copy(self)
        other.prefix = prefix.rstrip("/")
        other.uri = self.fs.unstrip_protocol(other.prefix) if "://" in self.uri else other.prefix
        return other

    def full_path(self, name: str) -> str:
        """Where object `name` lives on the filesystem."""
        return f"{self.prefix}/{name}"

    # -- the contract ------------------------------------------------------------------------------------

    async def read(self, name: str) -> bytes | None:
        """Contents of object `name`, or None if it does not exist."""
        return await self._call("read", self._io.cat, self.full_path(name), self.prefix)

    async def read_many(self, names: list[str]) -> dict[str, bytes]:
        """Contents of the named objects that exist, fetched concurrently where the backend can.

        One plain GET per object: fsspec's bulk ``cat`` would expand every path first (a HEAD, and a LIST
        for each missing one)."""
        if not names:
            return {}
        where = [(self.full_path(n), self.prefix) for n in names]
        if self._io.parallel:  # each object retried on its own: a batch retried whole fails for good under faults
            found = await gather_all(self._call("read", self._io.cat, path, root) for path, root in where)
        else:
            found = await self._call("read_many", self._io.cat_many, where)
        return {name: data for name, data in zip(names, found, strict=True) if data is not None}

    async def read_range(self, name: str, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` of object `name` (fewer where it is shorter), or None if it does not exist."""
        return await self._call("read", self._io.cat_range, self.full_path(name), self.prefix, start, end)

    async def write_many(self, objects: dict[str, bytes]) -> None:
        """Write every object (each one atomically on local disk), concurrently where the backend can."""
        paths = {self.full_path(n): d for n, d in objects.items()}
        if self._io.parallel and len(paths) > 1:
            await gather_all(self._call("write", self._io.pipe_many, {p: d}) for p, d in paths.items())
        elif paths:
            await self._call("write_many", self._io.pipe_many, paths)

    async def create_exclusive(self, name: str, data: bytes) -> bool:
        """Create object `name` only if it does not exist; True if this call created it.

        Where create-only writes are not atomic (``capabilities.atomic_create`` False), an existence
        check comes first, so at least an object that is already there is never overwritten; the commit
        path then reads its slot back (`_journal.commit`). False can also mean that an attempt of this very call
        landed before its answer was lost and the retry found the object: callers recognise their own
        object by its content.
        """
        if not self.capabilities.atomic_create and await self.exists(name):
            return False
        return await self._call("create_exclusive", self._io.create, self.full_path(name), data)

    async def copy_checked(self, name: str, target: str, sha256: str) -> Copied | None:
        """Copy object `name` to full path `target` (on this filesystem) in the backend, create-only and only
        if its bytes hash to `sha256` (`storage._copy`); None where the backend has no such copy."""
        copier = checked_copier(self.fs)
        if copier is None:
            return None
        return await self._call("copy", copier, self.full_path(name), target, sha256, self.prefix)

    async def remove_all(self, names: list[str]) -> None:
        """`remove_many`, but concurrently where the backend can (gc() may remove thousands of objects);
        in no particular order, so callers that need one call once per step."""
        if not self._io.parallel or len(names) < 2:
            await self.remove_many(names)
            return
        for start in range(0, len(names), REMOVE_BATCH):
            await gather_all(self._remove_one(name) for name in names[start : start + REMOVE_BATCH])

    async def remove_many(self, names: list[str]) -> None:
        """Delete the named objects, one after the other; missing ones are ignored. On local disk,
        directories left empty go too, so a file can take their name (object stores have no directories)."""
        for name in names:
            await self._remove_one(name)

    async def _remove_one(self, name: str) -> None:
        try:
            await self._call("remove", self._io.rm, self.full_path(name), self.prefix)
        except StorageError as exc:
            if not isinstance(exc.__cause__, (FileNotFoundError, NotADirectoryError)):
                raise

    async def exists(self, name: str) -> bool:
        return await self._call("exists", self._io.exists, self.full_path(name))

    async def list(self, under: str = "") -> dict[str, int]:
        """Every object under the prefix (or its subdirectory `under`) as ``{name: size}``.

        Refuses symlinks on local disk.
        """
        return {name: found.size for name, found in (await self.stat(under)).items()}

    async def stat(self, under: str = "") -> dict[str, Listed]:
        """Like `list`, with each object's modification time (seconds since the epoch)."""
        root = self.full_path(under) if under else self.prefix
        try:
            # directories only on local disk, where a symlinked one must be seen; in object stores a
            # directory entry would shadow an object of the same name ("x" beside "x/y")
            found = await self._call("list", self._io.find, root, withdirs=self.capabilities.symlinks)
        except StorageError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                return {}
            raise
        return self._named(found)

    async def directories(self) -> list[str]:
        """Names of the directories directly under the prefix, from one listing call (none if the prefix
        does not exist). Object stores list a directory only while some object lies under it."""
        try:
            entries = await self._call("list", self._io.ls, self.prefix)
        except StorageError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                return []
            raise
        names = (_stripped(self.fs, e["name"]).rstrip("/") for e in entries if _is_directory(e))
        return [name.rsplit("/", 1)[-1] for name in names if name != self.prefix]

    def _named(self, found: dict[str, dict[str, Any]]) -> dict[str, Listed]:
        """A listing's entries by object name; refuses symlinks, skips directories and our temp files."""
        base = self.prefix + "/"
        names: dict[str, Listed] = {}
        for listed, info in found.items():
            path = _stripped(self.fs, listed)
            if not path.startswith(base):
                continue
            name = path[len(base) :]
            if info.get("islink"):
                raise UnsafeStoreContent(f"Stored object {name!r} is a symlink; symlinks are not followed")
            if info.get("type") == "file" and ".~fpm-" not in name.rsplit("/", 1)[-1]:
                names[name] = Listed(int(info.get("size") or 0), _modified(info))
        return names

    async def _call(self, op: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Await `fn`, retrying transient failures under the process's `RetryPolicy`; any other failure,
        or the last attempt's, becomes `StorageError` (the backend's exception is its cause). Where the
        backend takes concurrent requests, each attempt holds a slot of its adaptive limit (`storage._adaptive`)."""
        policy = get_retry_policy()
        limit = limit_for(self.fs) if self._io.parallel else None
        for attempt in range(1, policy.attempts + 1):
            started = await limit.acquire() if limit is not None else 0
            throttled = False
            try:
                return await fn(*args, **kwargs)
            except (StorageError, UnsafeStoreContent):
                raise
            except Exception as exc:
                failure = exc  # for the retry's log line (`exc` ends with this block)
                throttled = is_throttling(exc)
                if attempt == policy.attempts or not is_transient(exc):
                    tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                    raise StorageError(f"Storage operation {op} failed under {self.uri}{tries}: {exc}") from exc
            finally:
                if limit is not None:
                    limit.release(started, throttled=throttled)  # the backoff waits outside the slot
            wait = policy.delay(attempt)
            retry = (op, self.uri, failure, attempt, policy.attempts - 1, wait)
            logger.info("storage %s under %s failed (%s); retry %d of %d in %.1f s", *retry)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def create_many(self, objects: dict[str, bytes]) -> set[str]:
        """Create each object only if its name is free; returns the names this call created.

        Concurrent where the backend can. A name left out was taken, or its create failed: either way the
        caller must not rely on it (a create that failed may still have landed; it then holds the
        caller's own bytes). Atomic only where `create_exclusive` is.
        """
        names = list(objects)
        if self._io.parallel:
            created = await gather_all(self._create_quietly(n, objects[n]) for n in names)
        elif isinstance(self._io, BlockingIO) and self.capabilities.atomic_create:
            created = await self._io.create_many({self.full_path(n): objects[n] for n in names})
        else:
            created = [await self._create_quietly(n, objects[n]) for n in names]
        return {name for name, ok in zip(names, created, strict=True) if ok}

    async def _create_quietly(self, name: str, data: bytes) -> bool:
        try:
            return await self.create_exclusive(name, data)
        except StorageError:  # a parent that is a file, say, or a failure: not created here
            return False


def _io_for(fs: fsspec.AbstractFileSystem) -> AsyncIO | BlockingIO:
    """Async filesystems are awaited; bulk calls run concurrently, except against an emulator that answers
    concurrent requests with errors (GCS's: gcsfs retries them after a second of backoff, `storage._gcs`)."""
    if not getattr(fs, "async_impl", False):
        return BlockingIO(fs)
    backend = backend_of(fs)
    emulated = backend is not None and backend.is_emulated()
    writes = writes_for(underlying(fs), bound_to_running_loop)  # large uploads in parallel parts
    if writes is not None and underlying(fs) is not fs:  # a forwarding wrapper (fault injection) sees every call
        writes = writes.through(fs)
    return AsyncIO(fs, parallel=not emulated, writes=writes)


def _is_directory(entry: dict[str, Any]) -> bool:
    """A listed directory, not followed through a symlink (a store's opens refuse symlinks too)."""
    return entry.get("type") == "directory" and not entry.get("islink")


def _stripped(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """`path` without its protocol, as `fs` names it (fsspec types the result loosely: one path in, one out)."""
    stripped = fs._strip_protocol(path)
    assert isinstance(stripped, str)
    return stripped


def capabilities_for(uri: str) -> Capabilities:
    """What the backend holding `uri` can do (`Capabilities`), as the journal sees it; `UnsupportedBackend`
    for a backend that may not hold a journal (see `allow_unverified_backend`). No request is made."""
    return FsspecStorage(uri).capabilities
