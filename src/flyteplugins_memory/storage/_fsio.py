"""How one storage call reaches an fsspec filesystem: awaited on the running loop, or run in a thread.

Async filesystems (s3fs, gcsfs: ``fs.async_impl``) are rebuilt once per event loop with
``asynchronous=True, loop=<that loop>``, and their coroutine methods (``_cat_file``, ``_pipe_file``...)
are awaited directly: a request costs no thread hop and no hop onto fsspec's own loop. Blocking
filesystems (local disk, ``memory://``) run each call in a worker thread, so blocking I/O never runs
on the loop. `AsyncIO` and `BlockingIO` offer `FsspecStorage` the same few coroutines over full paths;
names, retries and error translation stay in `storage._fsspec`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import weakref
from collections.abc import Awaitable, Iterable
from typing import Any, cast

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.implementations.local import LocalFileSystem

from .._base.syncify import before_loop_stops
from ..errors import UnsafeStoreContent
from ._conditional import create_exclusive, create_exclusive_async
from ._s3_writes import S3Writes
from ._workdir import remove_empty_parents, replace_atomically

#: Requests in flight at once in a bulk call (fsspec's own default for calls that open no local files).
BULK_BATCH = 1280
#: The attribute of a filesystem instance holding its copies bound to each event loop.
_BOUND = "_flyteplugins_memory_bound"
#: What a read of a missing object raises, by backend.
MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def bound_to_running_loop(fs: fsspec.AbstractFileSystem) -> AsyncFileSystem:
    """`fs` rebuilt for the running loop (``asynchronous=True``), once per loop and instance.

    An instance made ``asynchronous`` by its caller is used as it is. fsspec caches instances by their
    arguments, but a loop's ``str`` names no address, so two loops could share one cached instance:
    these copies skip fsspec's cache and live on `fs` itself, keyed weakly by loop.
    """
    if getattr(fs, "asynchronous", False):
        return cast(AsyncFileSystem, fs)
    loop = asyncio.get_running_loop()
    bound: weakref.WeakKeyDictionary = vars(fs).setdefault(_BOUND, weakref.WeakKeyDictionary())
    copy = bound.get(loop)
    if copy is None:
        options = {**fs.storage_options, "asynchronous": True, "loop": loop, "skip_instance_cache": True}
        copy = bound[loop] = type(fs)(*fs.storage_args, **options)
        _LIVE[id(copy)] = (weakref.ref(copy), weakref.ref(loop))
        weakref.finalize(copy, _LIVE.pop, id(copy), None).atexit = False  # at exit, `_close_sessions` needs it
    return cast(AsyncFileSystem, copy)


#: Every copy made by `bound_to_running_loop` and its loop, by id (fsspec instances compare by their
#: arguments, and a loop's ``str`` names no address), to close its HTTP session at exit.
_LIVE: dict[int, tuple[weakref.ref, weakref.ref]] = {}


@atexit.register  # copies bound to other loops that still run at exit
@before_loop_stops  # ours: before the package's loop stops (atexit alone ran this after it, by import order)
def _close_sessions() -> None:
    """Close the sessions of bound copies whose loop still runs (s3fs and gcsfs register no closing of
    their own for ``asynchronous=True`` instances that works from another thread), so exiting prints no
    "Unclosed client session". A second run finds them closed and does nothing."""
    for fs_ref, loop_ref in list(_LIVE.values()):
        fs, loop = fs_ref(), loop_ref()
        if fs is not None and loop is not None and loop.is_running():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_close(fs), loop).result(timeout=2)


async def _close(fs: AsyncFileSystem) -> None:
    session = getattr(fs, "_checkout", None)  # gcsfs: an aiohttp session
    if session is not None and not session.closed:
        await session.close()
    creator = getattr(fs, "_s3creator", None)  # s3fs: an aiobotocore client context
    if creator is not None:
        vars(fs)["_s3creator"] = None
        await creator.__aexit__(None, None, None)


async def gather_all(calls: Iterable[Awaitable[Any]]) -> list[Any]:
    """Await every call, `BULK_BATCH` at a time; their results in order, or the first failure once every
    call has settled (so nothing of a failed bulk call is still running when the caller goes on)."""
    pending, results = list(calls), []
    for start in range(0, len(pending), BULK_BATCH):
        results += await asyncio.gather(*pending[start : start + BULK_BATCH], return_exceptions=True)
    if (error := next((r for r in results if isinstance(r, BaseException)), None)) is not None:
        raise error
    return results


class AsyncIO:
    """An async fsspec filesystem, awaited on the running loop; `parallel` if it takes concurrent requests.

    Uploads go through `writes` where it is given (`storage._s3_writes`: the same S3 bucket and credentials
    through a lighter client), everything else through `fs`."""

    def __init__(self, fs: fsspec.AbstractFileSystem, *, parallel: bool, writes: S3Writes | None = None):
        self.fs = fs
        self.parallel = parallel
        self.writes = writes

    def _now(self) -> AsyncFileSystem:
        return bound_to_running_loop(self.fs)

    async def cat(self, path: str, root: str) -> bytes | None:
        try:
            return await self._now()._cat_file(path)
        except MISSING:
            return None

    async def cat_range(self, path: str, root: str, start: int, end: int) -> bytes | None:
        """One ranged GET; a range past the object's end (S3 answers 416) is empty, not an error."""
        try:
            return await self._now()._cat_file(path, start=start, end=end)
        except MISSING:
            return None
        except OSError as exc:
            if _past_end(exc):
                return b""
            raise

    async def cat_many(self, paths: list[tuple[str, str]]) -> list[bytes | None]:
        """One after the other (`FsspecStorage` fans out itself where the backend takes concurrency)."""
        return [await self.cat(path, root) for path, root in paths]

    async def pipe_many(self, objects: dict[str, bytes]) -> None:
        for path, data in objects.items():
            if self.writes is not None and self.writes.handles(path):
                await self.writes.put(path, data)
            else:
                await self._now()._pipe_file(path, data)

    async def create(self, path: str, data: bytes) -> bool:
        if self.writes is not None and self.writes.handles(path):
            return await self.writes.create(path, data)
        return await create_exclusive_async(self._now(), path, data)

    async def rm(self, path: str, root: str) -> None:
        await self._now()._rm_file(path)

    async def exists(self, path: str) -> bool:
        return await self._now()._exists(path)

    async def find(self, root: str, *, withdirs: bool) -> dict[str, dict[str, Any]]:
        fs = self._now()
        fs.invalidate_cache()
        return cast(dict, await fs._find(root, withdirs=withdirs, detail=True))

    async def ls(self, path: str) -> list[dict[str, Any]]:
        """The entries directly under `path` (one listing request; files and directories)."""
        fs = self._now()
        fs.invalidate_cache()
        return cast(list, await fs._ls(path, detail=True))


class BlockingIO:
    """A blocking fsspec filesystem, each call in a worker thread; on local disk, writes are atomic
    (temp file, then rename), symlinks leading out of the store are refused, and empty directories go."""

    parallel = False

    def __init__(self, fs: fsspec.AbstractFileSystem):
        self.fs = fs
        self.local = isinstance(fs, LocalFileSystem)

    async def cat(self, path: str, root: str) -> bytes | None:
        return await asyncio.to_thread(self._cat, path, root)

    async def cat_range(self, path: str, root: str, start: int, end: int) -> bytes | None:
        return await asyncio.to_thread(self._cat, path, root, start, end)

    async def cat_many(self, paths: list[tuple[str, str]]) -> list[bytes | None]:
        return await asyncio.to_thread(lambda: [self._cat(path, root) for path, root in paths])

    async def pipe_many(self, objects: dict[str, bytes]) -> None:
        await asyncio.to_thread(self._pipe_many, objects)

    async def create(self, path: str, data: bytes) -> bool:
        return await asyncio.to_thread(create_exclusive, self.fs, path, data)

    async def create_many(self, objects: dict[str, bytes]) -> list[bool]:
        """`create` of each object, in one worker thread (a thread hop per file cost a 1,000-file save more
        than its writes); an object whose create failed counts as not created."""
        return await asyncio.to_thread(lambda: [self._create_quietly(p, d) for p, d in objects.items()])

    def _create_quietly(self, path: str, data: bytes) -> bool:
        try:
            return create_exclusive(self.fs, path, data)
        except OSError:  # a parent that is a file, say: not created here
            return False

    async def rm(self, path: str, root: str) -> None:
        await asyncio.to_thread(self._rm, path, root)

    async def exists(self, path: str) -> bool:
        return await asyncio.to_thread(self.fs.exists, path)

    async def find(self, root: str, *, withdirs: bool) -> dict[str, dict[str, Any]]:
        return await asyncio.to_thread(self._find, root, withdirs)

    async def ls(self, path: str) -> list[dict[str, Any]]:
        """The entries directly under `path` (one listing; files and directories)."""
        self.fs.invalidate_cache()
        return cast(list, await asyncio.to_thread(self.fs.ls, path, detail=True))

    def _cat(self, path: str, root: str, start: int | None = None, end: int | None = None) -> bytes | None:
        if self.local and os.path.lexists(path):
            refuse_local_escape(path, root)
        try:
            return cast(bytes, self.fs.cat_file(path, start=start, end=end))
        except MISSING:
            return None

    def _pipe_many(self, objects: dict[str, bytes]) -> None:
        for path, data in objects.items():
            if not self.local:
                self.fs.pipe_file(path, data)
                continue
            replace_atomically(path, data)

    def _rm(self, path: str, root: str) -> None:
        self.fs.rm_file(path)
        if self.local:
            remove_empty_parents(path, root)

    def _find(self, root: str, withdirs: bool) -> dict[str, dict[str, Any]]:
        self.fs.invalidate_cache()
        return cast(dict, self.fs.find(root, withdirs=withdirs, detail=True))


def _past_end(exc: OSError) -> bool:
    """Whether `exc` is a backend's answer to a range that starts past the object's end (HTTP 416)."""
    text = str(exc).lower()  # s3fs: "[Errno 22] The requested range is not satisfiable"
    return "invalidrange" in text or "range not satisfiable" in text or "range is not satisfiable" in text


def refuse_local_escape(path: str, root: str) -> None:
    """On local disk, an object reached through a symlink that leaves `root` is hostile."""
    real_root = os.path.realpath(root)
    if not os.path.realpath(path).startswith(real_root + os.sep):
        raise UnsafeStoreContent(f"Stored object {path!r} resolves outside the store")
