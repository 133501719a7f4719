"""A checked copy: one object's bytes into a new object, only if they hash to an expected sha256.

A save that replaces an in-place file first keeps its old bytes in a content-addressed blob
(`_journal.preserve`). Read and written again by the client, that is two sequential round trips before the
commit; done where the bytes are, one (docs/decisions/0143-in-place-bytes-are-copied-by-the-backend.md):

- Local disk: read, hash and create-only link in one worker thread (no network: one call).
- Anything else (S3, GCS, memory): no checked copy; the caller reads, checks and writes
  (docs/decisions/0160-no-server-side-copy-on-object-storage.md: a server-side copy checks the bytes only after
  they sit under the blob's name, and a failure before its cleanup leaves a blob of other bytes).

Under a forwarding wrapper (`flyteplugins_memory.testing`'s fault injector) the copy passes its hook as one
write of the target, so it is counted and can fail like any other call.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import os
from collections.abc import Awaitable, Callable
from typing import cast

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ._backend import class_path
from ._conditional import create_exclusive
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


def checked_copier(fs: fsspec.AbstractFileSystem) -> Copier | None:
    """How to copy with a check on `fs`, or None where the backend has no such copy."""
    target = underlying(fs)
    if not isinstance(target, LocalFileSystem) or class_path(target) != "fsspec.implementations.local.LocalFileSystem":
        return None
    copier: Copier = lambda s, t, sha, root: asyncio.to_thread(_local_copy, target, s, t, sha, root)  # noqa: E731
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
