"""Large S3 writes as multipart uploads whose parts go out side by side.

Why: one PUT of a 100 MB object is one TCP stream, bounded by one connection's throughput. S3 takes the
parts of a multipart upload in parallel at full speed each, so a large write costs three round trips
(start, every part at once, complete) of `PART_SIZE` parts instead of one long stream. Objects of at most
`THRESHOLD` bytes keep their single PUT: the two extra round trips buy them nothing.

What it keeps of a single PUT (docs/decisions/0163-large-writes-as-parallel-multipart-uploads.md):
- Atomic: S3 shows the object only when ``CompleteMultipartUpload`` succeeds, whole; a write that dies
  before leaves no object (and, once aborted, no parts).
- Create-only: ``If-None-Match: *`` on the completion, which S3 refuses with HTTP 412 when the key is
  taken (`upload` then answers False, as a refused create-only PUT does).
- No copies: each part is a `memoryview` of the caller's bytes, read by the HTTP client 1 MiB at a time.
- Nothing left behind: any failure (a part, the completion, a refusal, a cancellation) cancels the parts
  still in flight, waits for them, then aborts the upload. Only an abort that itself fails (an outage)
  or a lost reply to the start (no upload id to abort) leaves an incomplete upload: no object, billed
  until a bucket lifecycle rule (``AbortIncompleteMultipartUpload``) removes it.
- Failures reach the caller whole: the caller's retry policy (`storage._fsspec`) retries the upload as a
  whole, as it retries a PUT.

The sizes are module attributes read at each call, so tests make "large" small by patching them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ._conditional import _is_precondition_failure, is_conflict

__all__ = [
    "MAX_PARTS",
    "PART_SIZE",
    "THRESHOLD",
    "MultipartClient",
    "S3Multipart",
    "is_large",
    "part_bounds",
    "upload",
]

#: Writes above this many bytes go as multipart uploads. 100 MiB, where AWS advises multipart: below it one
#: stream is about as fast and the two extra round trips cost more (measured against moto: a 100 MB write
#: 2.5 s in parts, 1.4-2.0 s as one PUT; decision 0163).
THRESHOLD = 100 * 1024 * 1024
#: Bytes per part at least. 8 MiB, as the ranged reads (`storage._ranges`); S3 takes parts of 5 MiB to
#: 5 GiB (the last one may be smaller).
PART_SIZE = 8 * 1024 * 1024
#: Parts of one upload in flight at once, and the parts of an upload of up to 16 x 5 GiB: larger objects
#: take larger parts, so every part goes out in one round trip (100 MiB: 13 parts of 8 MiB; 1 GiB: 16 of
#: 64 MiB). Only an object beyond 80 GiB takes more parts than this, in waves of `MAX_PARTS`.
MAX_PARTS = 16
#: S3's largest part.
MAX_PART_BYTES = 5 * 1024**3


class MultipartClient(Protocol):
    """The four requests of a multipart upload, on full paths (``bucket/key`` for S3)."""

    async def start(self, path: str) -> str:
        """Begin an upload; its id."""
        ...

    async def part(self, path: str, upload_id: str, number: int, body: memoryview) -> str:
        """Upload part `number` (from 1); its ETag."""
        ...

    async def complete(self, path: str, upload_id: str, etags: list[str], *, create_only: bool) -> bool:
        """Join the parts into the object; False if `create_only` and the path was taken (nothing written)."""
        ...

    async def abort(self, path: str, upload_id: str) -> None:
        """Drop the upload and its parts."""
        ...


def is_large(size: int) -> bool:
    """Whether an object of `size` bytes is written as a multipart upload (more than `THRESHOLD`)."""
    return size > THRESHOLD


def part_bounds(size: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each part of an object of `size` bytes: at most `MAX_PARTS` parts of at least
    `PART_SIZE` (the last shorter), unless that would make them larger than S3 allows."""
    step = min(max(PART_SIZE, -(-size // MAX_PARTS)), MAX_PART_BYTES)
    return [(start, min(start + step, size)) for start in range(0, size, step)]


async def upload(client: MultipartClient, path: str, data: bytes | memoryview, *, create_only: bool) -> bool:
    """Write `data` at `path` as one multipart upload; False if `create_only` and the path was taken.
    On any failure the upload is aborted before the failure is raised (see the module docstring)."""
    view = memoryview(data).cast("B")  # no copy: every part is a slice of the caller's buffer
    upload_id = await client.start(path)
    try:
        etags = await _parts(client, path, upload_id, view)
        created = await client.complete(path, upload_id, etags, create_only=create_only)
    except BaseException:
        await _abort_quietly(client, path, upload_id)
        raise
    if not created:  # a refused completion leaves the upload open, with its parts
        await _abort_quietly(client, path, upload_id)
    return created


async def _parts(client: MultipartClient, path: str, upload_id: str, view: memoryview) -> list[str]:
    """Every part at once (at most `MAX_PARTS` in flight); their ETags in order. On a failure the parts
    still in flight are cancelled and awaited, so none is still being sent when the abort goes out."""
    slots = asyncio.Semaphore(MAX_PARTS)

    async def one(number: int, start: int, end: int) -> str:
        async with slots:
            return await client.part(path, upload_id, number, view[start:end])

    tasks = [asyncio.ensure_future(one(n, s, e)) for n, (s, e) in enumerate(part_bounds(len(view)), 1)]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _abort_quietly(client: MultipartClient, path: str, upload_id: str) -> None:
    """Abort the upload, best effort: the failure that led here is what the caller must see."""
    with contextlib.suppress(Exception):
        await client.abort(path, upload_id)


#: How a request reaches storage: ``hook(op, path, send)`` awaits ``send()`` and returns its result (the
#: fault injector of `flyteplugins_memory.testing` passes each one through its plan; a request it refuses
#: is never made).
Hook = Callable[[str, str, Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def _direct(op: str, path: str, send: Callable[[], Awaitable[Any]]) -> Any:
    return await send()


class S3Multipart:
    """`MultipartClient` for S3 through s3fs's own client (aiobotocore): obstore makes no conditional
    multipart upload and exposes no part requests. `fs` is an s3fs filesystem bound to the running loop;
    each request passes through `hook` (as a ``write``, the abort as a ``delete``)."""

    def __init__(self, fs: Any, hook: Hook = _direct):
        self._fs = fs
        self._hook = hook

    async def _send(self, op: str, path: str, method: str, **kwargs: Any) -> Any:
        bucket, key, _ = self._fs.split_path(path)
        return await self._hook(op, path, lambda: self._fs._call_s3(method, Bucket=bucket, Key=key, **kwargs))

    async def start(self, path: str) -> str:
        return str((await self._send("write", path, "create_multipart_upload"))["UploadId"])

    async def part(self, path: str, upload_id: str, number: int, body: memoryview) -> str:
        sent = await self._send("write", path, "upload_part", UploadId=upload_id, PartNumber=number, Body=_View(body))
        return str(sent["ETag"])

    async def complete(self, path: str, upload_id: str, etags: list[str], *, create_only: bool) -> bool:
        parts = [{"PartNumber": number, "ETag": etag} for number, etag in enumerate(etags, 1)]
        condition = {"IfNoneMatch": "*"} if create_only else {}
        try:
            completion = {"UploadId": upload_id, "MultipartUpload": {"Parts": parts}, **condition}
            await self._send("write", path, "complete_multipart_upload", **completion)
        except Exception as exc:
            if create_only and (isinstance(exc, FileExistsError) or _is_precondition_failure(exc)):
                return False
            if is_conflict(exc):  # S3: "a conflicting operation is in progress, retry": a passing failure
                raise ConnectionError(str(exc)) from exc
            raise
        return True

    async def abort(self, path: str, upload_id: str) -> None:
        await self._send("delete", path, "abort_multipart_upload", UploadId=upload_id)


class _View(io.RawIOBase):
    """A part's bytes as the file object botocore takes for a body (it refuses a `memoryview`): read in
    chunks (botocore's checksum, then the HTTP client's sends), seekable for its retries, never copied whole."""

    def __init__(self, view: memoryview):
        super().__init__()
        self._view = view
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}[whence]
        self._at = max(0, base + offset)
        return self._at

    def readinto(self, buffer: Any) -> int:
        chunk = self._view[self._at : self._at + len(buffer)]
        buffer[: len(chunk)] = chunk
        self._at += len(chunk)
        return len(chunk)

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else self._at + size
        chunk = bytes(self._view[self._at : end])
        self._at += len(chunk)
        return chunk

    def __len__(self) -> int:  # what the HTTP client sends as Content-Length
        return len(self._view)
