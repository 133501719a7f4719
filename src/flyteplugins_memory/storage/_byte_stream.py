"""`ByteStream`: a binary file object over one stored object, read in ranged parts, verified at the end.

What `MemoryStore.open_bytes` (and a scope's, and a past state's: `StoreAt.open_bytes`) returns. It holds
at most `READ_AHEAD` parts (`storage._ranges.PART_SIZE` each) plus the one being read, never the whole
object: parts ahead of the reader are fetched side by side while it consumes the current one, and parts
behind it are dropped. It is seekable (a seek moves a position; nothing is fetched until the next read).

Integrity: the bytes are hashed in order as the reader gets them, and when the reader reaches the end
the hash must be the file's sha256 (a gap left by a forward seek is fetched and hashed then), else the
error `failure` makes is raised: a stream never ends silently on a mix of two versions or on damaged
bytes. A part that is missing (content purged or collected meanwhile) or of the wrong length raises
that error at once.

Sync methods (``read``, ``readinto``) block the calling thread while the package's loop fetches; the
``a``-prefixed twins (``aread``, ``aclose``, ``async with``) await it from any loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
from collections.abc import Awaitable, Callable
from typing import Any

from .._base.syncify import run_async, run_sync
from . import _ranges

__all__ = ["READ_AHEAD", "ByteStream"]

#: Parts fetched ahead of the reader: with the part being read, what a stream holds at most.
READ_AHEAD = 4

#: Fetch bytes ``[start, end)`` of the object, None if it is gone.
Fetch = Callable[[int, int], Awaitable[bytes | None]]
#: The error for content that is gone or does not match (say, `ContentPurged` or `CorruptStore`).
Failure = Callable[[], Awaitable[Exception]]


class ByteStream(io.BufferedIOBase):
    """A read-only, seekable binary file over `size` stored bytes whose sha256 is `sha256` (`open_bytes`).

    Use it as a context manager (``with store.open_bytes(path) as f: f.read(1 << 20)``), or from async
    code with ``aread`` and ``async with``. ``name`` is the file's path in the store.
    """

    def __init__(self, name: str, size: int, sha256: str | None, fetch: Fetch, failure: Failure):
        super().__init__()
        self.name = name
        self.size = size
        self._sha256 = sha256
        self._fetch = fetch
        self._failure = failure
        self._pos = 0
        self._parts: dict[int, asyncio.Future[bytes | None]] = {}
        self._hasher = hashlib.sha256()
        self._hashed = 0  # bytes hashed so far: always a prefix of the object
        self._verified = sha256 is None

    # -- io.BufferedIOBase ---------------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence ({whence})")
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        """Up to `size` bytes from the current position (all the rest if `size` is negative or None)."""
        return run_sync(self.aread, size)

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            for part in self._parts.values():  # from any thread: the parts live on the package's loop
                with contextlib.suppress(RuntimeError):  # that loop already closed (at exit)
                    part.get_loop().call_soon_threadsafe(part.cancel)
            self._parts.clear()
        super().close()

    # -- async twins ---------------------------------------------------------------------------------------

    async def aread(self, size: int | None = -1) -> bytes:
        """`read`, awaited (from any event loop)."""
        return await run_async(self._read(size))

    async def aclose(self) -> None:
        """`close`, awaited."""
        self.close()

    async def __aenter__(self) -> ByteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # -- reading (on the package's loop) ------------------------------------------------------------------

    async def found(self) -> bool:
        """Request the first parts; whether the object exists (False also closes the stream). Opening
        with it makes a missing object an error at open, and starts the first wave of parts at once."""
        if self.size == 0:
            return True
        self._request(0)
        if await self._parts[0] is None:
            self.close()
            return False
        return True

    async def _read(self, size: int | None) -> bytes:
        self._check_open()
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        chunks = []
        while self._pos < end:
            part = await self._part(self._pos // _ranges.PART_SIZE)
            offset = self._pos % _ranges.PART_SIZE
            chunk = part[offset : offset + end - self._pos]
            await self._hash(self._pos, chunk)
            chunks.append(chunk)
            self._pos += len(chunk)
        if self._pos >= self.size:
            await self._verify()
        return b"".join(chunks)

    async def _part(self, index: int) -> bytes:
        """Part `index`, with the parts after it requested; parts behind it are dropped."""
        for behind in [i for i in self._parts if i < index]:
            self._parts.pop(behind).cancel()
        self._request(index)
        data = await self._parts[index]
        expected = min(_ranges.PART_SIZE, self.size - index * _ranges.PART_SIZE)
        if data is None or len(data) != expected:
            raise await self._failure()
        return data

    def _request(self, index: int) -> None:
        """Fetch part `index` and the `READ_AHEAD` after it, unless already requested."""
        step, count = _ranges.PART_SIZE, -(-self.size // _ranges.PART_SIZE)
        for ahead in range(index, min(index + 1 + READ_AHEAD, count)):
            if ahead not in self._parts:
                start = ahead * step
                part = self._parts[ahead] = asyncio.ensure_future(self._fetch(start, min(start + step, self.size)))
                part.add_done_callback(_retrieved)  # a part dropped unread must not log its failure

    async def _hash(self, at: int, chunk: bytes) -> None:
        """Hash `chunk` (the object's bytes at `at`) if it continues the hashed prefix."""
        if self._verified or at > self._hashed or at + len(chunk) <= self._hashed:
            return
        fresh = chunk[self._hashed - at :]
        if len(fresh) > 1 << 20:  # hashlib lets go of the GIL: keep the shared loop free
            await asyncio.to_thread(self._hasher.update, fresh)
        else:
            self._hasher.update(fresh)
        self._hashed += len(fresh)

    async def _verify(self) -> None:
        """At the end: hash what a forward seek skipped, then compare with the file's sha256."""
        if self._verified:
            return
        while self._hashed < self.size:
            index = self._hashed // _ranges.PART_SIZE
            await self._hash(index * _ranges.PART_SIZE, await self._part(index))
        if self._hasher.hexdigest() != self._sha256:
            raise await self._failure()
        self._verified = True

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")


def _retrieved(part: asyncio.Future[Any]) -> None:
    if not part.cancelled():
        part.exception()


def stream_of_bytes(name: str, data: bytes) -> ByteStream:
    """A `ByteStream` over bytes already held (a handle's unsaved write): nothing to fetch or verify."""
    view = memoryview(data)

    async def fetch(start: int, end: int) -> bytes | None:
        return bytes(view[start:end])

    async def failure() -> Exception:  # never called: held bytes are always whole
        return AssertionError("held bytes changed")

    return ByteStream(name, len(data), None, fetch, failure)
