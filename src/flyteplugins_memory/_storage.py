"""The one seam to storage: fsspec filesystems, addressed by object names under a store prefix.

Backends: local disk (``/path`` or ``file://``), ``memory://``, ``s3://`` (s3fs, credentials from
``flyte.init(storage=flyte.storage.S3(...))`` or the ``FLYTE_AWS_*`` environment) and ``gs://`` (gcsfs,
which honors ``STORAGE_EMULATOR_HOST``). Backend exceptions are translated here and nowhere else:
a missing object is ``None`` or ``False``, any other failure is `StorageError`, after transient ones
have been retried under the `RetryPolicy` (see `_retry`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

import fsspec
import fsspec.asyn
from fsspec.implementations.local import LocalFileSystem

from ._backends import UNVERIFIED_BACKENDS_ENV, allowed_protocols, require_supported
from ._conditional import create_exclusive, supports_exclusive_create
from ._errors import StorageError, UnsafeStoreContent, UnsupportedBackend
from ._journal_location import journal_root
from ._layout import JOURNAL_DIR
from ._retry import get_retry_policy, is_transient
from ._workdir import remove_empty_parents

T = TypeVar("T")
#: Objects deleted at once by `RemoteStore.remove_all` on object stores.
REMOVE_BATCH = 500


def filesystem_for(uri: str) -> fsspec.AbstractFileSystem:
    """An fsspec filesystem for `uri`, configured from Flyte's storage settings, with no listing cache."""
    protocol = fsspec.utils.get_protocol(uri)
    if protocol == "s3":
        import s3fs

        # max_concurrency=1: otherwise every GET is preceded by a HEAD (and a LIST when the object is
        # missing) to decide on a ranged parallel download, tripling the requests of an open.
        return s3fs.S3FileSystem(use_listings_cache=False, max_concurrency=1, **_s3_options())
    if protocol in ("gs", "gcs"):
        import gcsfs.core

        # the core class, not ``gcsfs.GCSFileSystem`` (by default its ExtendedGcsFileSystem subclass, which
        # ignores mode="create" on zonal buckets): see `_backends`
        return gcsfs.core.GCSFileSystem(use_listings_cache=False)
    if protocol in ("file", "local"):
        return LocalFileSystem(auto_mkdir=True)
    if protocol not in allowed_protocols() and protocol not in ("memory",):
        # refused before the filesystem is built: building some (ftp, http, zip ...) already does I/O
        raise UnsupportedBackend(
            f"Storage backend {protocol!r} (for {uri}) is not known to make create-only writes atomic, which "
            "every save relies on (verified: local disk, memory://, s3:// with s3fs, gs:// with gcsfs). If its "
            "pipe_file(..., mode='create') is atomic, or only one writer at a time saves each key, opt in with "
            f"flyteplugins_memory.allow_unverified_backend({protocol!r}) or {UNVERIFIED_BACKENDS_ENV}={protocol}."
        )
    try:
        return fsspec.filesystem(protocol, use_listings_cache=False)
    except Exception as exc:  # unknown protocol, missing package, or a constructor that needs arguments
        raise UnsupportedBackend(f"No storage backend for {uri}: {exc}") from exc


def _s3_options() -> dict[str, Any]:
    from flyte._initialize import get_storage
    from flyte.errors import InitializationError
    from flyte.storage import S3

    try:
        config = get_storage()
    except InitializationError:
        config = None
    if not isinstance(config, S3):
        config = S3.auto()
    options: dict[str, Any] = {}
    if config.endpoint:
        options["endpoint_url"] = config.endpoint
    if config.access_key_id and config.secret_access_key:
        options["key"], options["secret"] = config.access_key_id, config.secret_access_key
    if config.region:
        options["client_kwargs"] = {"region_name": config.region}
    return options


class Listed(NamedTuple):
    """A listed object: its size, and when it was last written (seconds since the epoch; 0 if unknown)."""

    size: int
    modified: float


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


class RemoteStore:
    """Async access to the objects under one store prefix, by name relative to that prefix."""

    def __init__(self, uri: str, fs: fsspec.AbstractFileSystem | None = None):
        self.uri = uri.rstrip("/")
        self.fs = fs or filesystem_for(self.uri)
        require_supported(self.uri, self.fs)  # before any request: the commit point needs atomic creates
        self.prefix = self.fs._strip_protocol(self.uri).rstrip("/")
        self._is_local = isinstance(self.fs, LocalFileSystem)
        #: whether `create_exclusive` is atomic here (the commit point relies on it)
        self.exclusive_create = supports_exclusive_create(self.fs)
        #: bulk reads and writes run concurrently, except against the GCS emulator, which answers
        #: concurrent requests with errors that gcsfs retries after a second of backoff
        emulated_gcs = type(self.fs).__name__ == "GCSFileSystem" and bool(os.environ.get("STORAGE_EMULATOR_HOST"))
        self._parallel = getattr(self.fs, "async_impl", False) and not emulated_gcs

    # -- where names live: the store prefix, and the journal outside it (see `_journal_location`) ----------

    @functools.cached_property
    def journal_root(self) -> str:
        """Where names under ``meta/.journal/`` live (an attribute, so a view can point it elsewhere)."""
        return journal_root(self.prefix)

    @property
    def journal_moved(self) -> bool:
        """Whether the journal lives outside the store prefix (it stays inside for a bucket-root store)."""
        return self.journal_root != f"{self.prefix}/{JOURNAL_DIR}"

    def full_path(self, name: str) -> str:
        if name == JOURNAL_DIR or name.startswith(JOURNAL_DIR + "/"):
            return self.journal_root + name[len(JOURNAL_DIR) :]
        return f"{self.prefix}/{name}"

    def _root_of(self, name: str) -> str:
        """The directory `name` must stay inside (and above which no empty directory is removed)."""
        return self.journal_root if name == JOURNAL_DIR or name.startswith(JOURNAL_DIR + "/") else self.prefix

    async def read(self, name: str) -> bytes | None:
        """Contents of object `name`, or None if it does not exist."""
        return await self._call(self._read_sync, name)

    async def read_many(self, names: list[str]) -> dict[str, bytes]:
        """Contents of the named objects that exist, fetched concurrently where the backend can."""
        if not names:
            return {}
        return await self._call(self._read_many_sync, names)

    async def write_many(self, objects: dict[str, bytes]) -> None:
        """Write every object (each one atomically on local disk)."""
        if objects:
            await self._call(self._write_many_sync, objects)

    async def create_exclusive(self, name: str, data: bytes) -> bool:
        """Create object `name` only if it does not exist; True if this call created it.

        False can also mean that an attempt of this very call landed before its answer was lost and
        the retry found the object: callers recognise their own object by its content.
        """
        return await self._call(create_exclusive, self.fs, self.full_path(name), data)

    async def remove_all(self, names: list[str]) -> None:
        """`remove_many`, but concurrently where the backend can (gc() may remove thousands of objects);
        in no particular order, so callers that need one call once per step."""
        if not self._parallel or len(names) < 2:
            for name in names:
                await self._remove_one(name)
            return
        for start in range(0, len(names), REMOVE_BATCH):
            await self._call(self._remove_concurrently, names[start : start + REMOVE_BATCH])

    async def remove_many(self, names: list[str]) -> None:
        """Delete the named objects, one after the other; missing ones are ignored. On local disk,
        directories left empty go too, so a file can take their name (object stores have no directories)."""
        for name in names:
            await self._remove_one(name)

    async def _remove_one(self, name: str) -> None:
        try:
            await self._call(self._remove_sync, name)
        except StorageError as exc:
            if not isinstance(exc.__cause__, (FileNotFoundError, NotADirectoryError)):
                raise

    def _remove_concurrently(self, names: list[str]) -> None:
        fs = self.fs

        async def gather() -> list:
            return await asyncio.gather(*(fs._rm_file(self.full_path(n)) for n in names), return_exceptions=True)

        for result in fsspec.asyn.sync(fs.loop, gather):
            if isinstance(result, BaseException) and not isinstance(result, (FileNotFoundError, NotADirectoryError)):
                raise result

    def _remove_sync(self, name: str) -> None:
        self.fs.rm_file(self.full_path(name))
        if self._is_local:
            remove_empty_parents(self.full_path(name), self._root_of(name))

    async def exists(self, name: str) -> bool:
        return await self._call(self.fs.exists, self.full_path(name))

    async def list(self, under: str = "") -> dict[str, int]:
        """Every object under the prefix (or its subdirectory `under`) as ``{name: size}``.

        Refuses symlinks on local disk.
        """
        return {name: found.size for name, found in (await self.stat(under)).items()}

    async def stat(self, under: str = "") -> dict[str, Listed]:
        """Like `list`, with each object's modification time (seconds since the epoch)."""
        return await self._call(self._list_sync, under)

    def _read_sync(self, name: str) -> bytes | None:
        path = self.full_path(name)
        if self._is_local and os.path.lexists(path):
            self._refuse_local_escape(name, path)
        try:
            return self.fs.cat_file(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def _read_many_sync(self, names: list[str]) -> dict[str, bytes]:
        if self._is_local:
            return {n: data for n in names if (data := self._read_sync(n)) is not None}
        if not self._parallel:
            return {n: data for n in names if (data := self._read_sync(n)) is not None}
        # fsspec's bulk ``cat`` expands every path first (a HEAD, and a LIST for each missing one);
        # gathering plain GETs on the filesystem's own loop costs one request per object.
        fs = self.fs

        async def gather() -> list:
            coros = [fs._cat_file(self.full_path(n)) for n in names]
            return await asyncio.gather(*coros, return_exceptions=True)

        found = fsspec.asyn.sync(fs.loop, gather)
        out = {}
        for name, data in zip(names, found, strict=True):
            if isinstance(data, FileNotFoundError):
                continue
            if isinstance(data, BaseException):
                raise data
            out[name] = data
        return out

    def _refuse_local_escape(self, name: str, path: str) -> None:
        """On local disk, an object reached through a symlink that leaves the store is hostile."""
        root = os.path.realpath(self._root_of(name))
        if not os.path.realpath(path).startswith(root + os.sep):
            raise UnsafeStoreContent(f"Stored object {name!r} resolves outside the store")

    def _write_many_sync(self, objects: dict[str, bytes]) -> None:
        if self._parallel:
            self.fs.pipe({self.full_path(n): data for n, data in objects.items()})
            return
        if not self._is_local:
            for name, data in objects.items():
                self.fs.pipe_file(self.full_path(name), data)
            return
        for name, data in objects.items():
            target = self.full_path(name)
            # a fixed-length name beside the target: appending to the target's own name would overflow
            # the 255-byte limit of a file name that fits
            temp = os.path.join(os.path.dirname(target), f".~fpm-{uuid.uuid4().hex}")
            self.fs.pipe_file(temp, data)
            self.fs.mv(temp, target)

    def _list_sync(self, under: str) -> dict[str, Listed]:
        self.fs.invalidate_cache()
        in_journal = under == JOURNAL_DIR or under.startswith(JOURNAL_DIR + "/")
        try:
            # directories only on local disk, where a symlinked one must be seen; in object stores a
            # directory entry would shadow an object of the same name ("x" beside "x/y")
            root = self.full_path(under) if under else self.prefix
            found = self.fs.find(root, withdirs=self._is_local, detail=True)
        except FileNotFoundError:
            return {}
        names: dict[str, Listed] = {}
        base = (self.journal_root if in_journal else self.prefix) + "/"
        for path, info in found.items():
            path = self.fs._strip_protocol(path)
            if not path.startswith(base):
                continue
            name = path[len(base) :]
            name = f"{JOURNAL_DIR}/{name}" if in_journal else name
            if info.get("islink"):
                raise UnsafeStoreContent(f"Stored object {name!r} is a symlink; symlinks are not followed")
            if info.get("type") == "file" and ".~fpm-" not in name.rsplit("/", 1)[-1]:
                names[name] = Listed(int(info.get("size") or 0), _modified(info))
        return names

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking `fn` in a thread, retrying transient failures under the process's `RetryPolicy`."""
        policy = get_retry_policy()
        for attempt in range(1, policy.attempts + 1):
            try:
                return await asyncio.to_thread(fn, *args, **kwargs)
            except (StorageError, UnsafeStoreContent):
                raise
            except Exception as exc:
                if attempt < policy.attempts and is_transient(exc):
                    await asyncio.sleep(policy.delay(attempt))
                    continue
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise StorageError(f"Storage operation {fn.__name__} failed under {self.uri}{tries}: {exc}") from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def create_many(self, objects: dict[str, bytes]) -> set[str]:
        """Create each object only if its name is free; returns the names this call created.

        Concurrent where the backend can. A name left out was taken, or its create failed: either way the
        caller must not rely on it (a create that failed may still have landed; it then holds the
        caller's own bytes). Atomic only where `create_exclusive` is.
        """
        if not objects:
            return set()
        if self._parallel and self.exclusive_create:  # s3fs, gcsfs: ``mode="create"`` is their create-only write
            return await self._call(self._create_concurrently, objects)
        return await self._call(self._create_one_by_one, objects)  # one thread hop for all of them

    def _create_one_by_one(self, objects: dict[str, bytes]) -> set[str]:
        created = set()
        for name, data in objects.items():
            try:
                if create_exclusive(self.fs, self.full_path(name), data):
                    created.add(name)
            except OSError:  # a parent that is a file, say: not created here
                continue
        return created

    def _create_concurrently(self, objects: dict[str, bytes]) -> set[str]:
        """Create-only writes (``mode="create"``) gathered on the filesystem's own loop (blocking)."""
        fs, names = self.fs, list(objects)

        async def gather() -> list:
            coros = [fs._pipe_file(self.full_path(n), objects[n], mode="create") for n in names]
            return await asyncio.gather(*coros, return_exceptions=True)

        results = fsspec.asyn.sync(fs.loop, gather)
        return {name for name, result in zip(names, results, strict=True) if not isinstance(result, BaseException)}
