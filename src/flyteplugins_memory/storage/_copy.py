"""A checked copy: one object's bytes into a new object, only if they hash to an expected sha256.

A save that replaces an in-place file first keeps its old bytes in a content-addressed blob
(`_journal.preserve`). Read and written again by the client, that is two sequential round trips before the
commit; done by the backend, one (docs/decisions/0143-in-place-bytes-are-copied-by-the-backend.md):

- S3: ``CopyObject`` with ``If-None-Match: *`` (create-only, like every blob write that claims a copy) and
  ``ChecksumAlgorithm=SHA256``, whose answer carries the new object's SHA-256. Bytes that do not hash to the
  expected sha256 (the path was rewritten behind our back) are removed again at once and count as not copied;
  an answer without a checksum (an S3 lookalike that ignores it) is checked by reading the copy back.
- Local disk: read, hash and create-only link in one worker thread (no network: one call).
- Anything else (GCS, memory): no checked copy; the caller reads and writes as before.

Under a forwarding wrapper (`flyteplugins_memory.testing`'s fault injector) the copy passes its hook as one
write of the target, so it is counted and can fail like any other call.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import hashlib
import os
from collections.abc import Awaitable, Callable
from typing import Any, cast

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ._backend import class_path
from ._conditional import _is_precondition_failure, create_exclusive
from ._fsio import refuse_local_escape
from ._registry import underlying

__all__ = ["Copied", "checked_copier"]


class Copied(enum.Enum):
    """What a checked copy did."""

    #: the target did not exist; it now holds the source's bytes, which hash to the expected sha256
    CREATED = "created"
    #: the target existed already (whoever wrote it owns it); nothing was written
    TAKEN = "taken"
    #: the source is missing or holds other bytes; no target was left behind
    MISMATCH = "mismatch"


#: A checked copy of full path `source` to full path `target`: (source, target, sha256, root) -> Copied.
Copier = Callable[[str, str, str, str], Awaitable[Copied]]

_MISSING = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def checked_copier(fs: fsspec.AbstractFileSystem, bind: Callable[[Any], Any]) -> Copier | None:
    """How to copy with a check on `fs` (`bind` rebinds an async filesystem to the running loop), or None
    where the backend has no such copy."""
    target = underlying(fs)
    if isinstance(target, LocalFileSystem) and class_path(target) == "fsspec.implementations.local.LocalFileSystem":
        copier: Copier = lambda s, t, sha, root: asyncio.to_thread(_local_copy, target, s, t, sha, root)  # noqa: E731
    elif class_path(target) == "s3fs.core.S3FileSystem":
        copier = lambda s, t, sha, root: _s3_copy(bind(target), s, t, sha)  # noqa: E731
    else:
        return None
    if target is fs:
        return copier
    hook = fs._through  # type: ignore[attr-defined]

    async def through(source: str, dest: str, sha256: str, root: str) -> Copied:
        return (await hook("write", dest, copier(source, dest, sha256, root)))[1]

    return through


def _local_copy(fs: fsspec.AbstractFileSystem, source: str, target: str, sha256: str, root: str) -> Copied:
    if os.path.lexists(source):
        refuse_local_escape(source, root)
    try:
        data = cast(bytes, fs.cat_file(source))
    except _MISSING:
        return Copied.MISMATCH
    if hashlib.sha256(data).hexdigest() != sha256:
        return Copied.MISMATCH
    return Copied.CREATED if create_exclusive(fs, target, data) else Copied.TAKEN


async def _s3_copy(fs: Any, source: str, target: str, sha256: str) -> Copied:
    source_bucket, _, source_key = source.partition("/")
    bucket, _, key = target.partition("/")
    try:
        answer = await fs._call_s3(
            "copy_object",
            Bucket=bucket,
            Key=key,
            CopySource={"Bucket": source_bucket, "Key": source_key},
            ChecksumAlgorithm="SHA256",
            IfNoneMatch="*",
        )
    except _MISSING:
        return Copied.MISMATCH
    except Exception as exc:
        if _is_precondition_failure(exc):
            return Copied.TAKEN
        raise
    checksum = (answer.get("CopyObjectResult") or {}).get("ChecksumSHA256")
    if checksum is not None:
        matches = checksum == base64.b64encode(bytes.fromhex(sha256)).decode()
    else:  # not told: read the copy back
        matches = hashlib.sha256(await fs._cat_file(target)).hexdigest() == sha256
    if matches:
        return Copied.CREATED
    await fs._rm_file(target)  # ours (create-only), and wrong: no reader may meet it under that name
    return Copied.MISMATCH
