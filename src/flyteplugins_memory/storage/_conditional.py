"""Create-only writes, the one primitive the commit protocol needs from a backend.

fsspec has no uniform conditional write, so this is the one place that knows each backend:
local disk links a fully written temp file into place (``link`` fails if the target exists), memory
checks and writes under a process-wide lock, and S3 and GCS send ``mode="create"`` (``If-None-Match: *``
and ``ifGenerationMatch=0``), which their servers refuse with HTTP 412 when the object exists. Backends
are told apart by exact class, as `storage._registry` allows them: a subclass (of ``MemoryFileSystem``, say) may
keep its data elsewhere, so it gets the generic ``mode="create"`` path its user opted in to. Whether
the result is atomic is declared in `storage._registry` (`Capabilities.atomic_create`), not decided here.
"""

from __future__ import annotations

import os
import threading
import uuid

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from ._workdir import new_file

_MEMORY_LOCK = threading.Lock()


def create_exclusive(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    """Write `data` to `path` only if nothing is there; True if this call created it (blocking).

    Atomic exactly where `storage._registry.capabilities_of` says ``atomic_create``; elsewhere it is whatever
    the backend makes of ``mode="create"``, and the callers make up for it (see `FsspecStorage.create_exclusive`).
    """
    if type(fs) is LocalFileSystem:
        return _create_local(path, data)
    if type(fs) is MemoryFileSystem:
        with _MEMORY_LOCK:
            if fs.exists(path):
                return False
            fs.pipe_file(path, data)
            return True
    try:
        fs.pipe_file(path, data, mode="create")
    except Exception as exc:
        return _refused(exc)
    return True


async def create_exclusive_async(fs: AsyncFileSystem, path: str, data: bytes) -> bool:
    """`create_exclusive` on an async filesystem bound to the running loop (s3fs, gcsfs)."""
    try:
        await fs._pipe_file(path, data, mode="create")
    except Exception as exc:
        return _refused(exc)
    return True


def _refused(exc: Exception) -> bool:
    """False if a create-only write failed because the object exists; otherwise re-raise `exc`."""
    if isinstance(exc, FileExistsError) or _is_precondition_failure(exc):
        return False
    raise exc


def _create_local(path: str, data: bytes) -> bool:
    temp = os.path.join(os.path.dirname(path), f".~fpm-{uuid.uuid4().hex}")
    with new_file(temp) as handle:
        handle.write(data)
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(temp)
    return True


def _is_precondition_failure(exc: BaseException) -> bool:
    """Whether a failed create-only write was refused because the object exists (HTTP 412).

    Looks at status codes along the cause chain (botocore ``response``, gcsfs ``code``), and at the error
    codes' names, never at a bare "412" in a message: object names can contain it.
    """
    current: BaseException | None = exc
    while current is not None:
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            error = response.get("Error") or {}
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if error.get("Code") in ("PreconditionFailed", "412") or status == 412:
                return True
        if getattr(current, "code", None) == 412:
            return True
        if "PreconditionFailed" in str(current) or "conditionNotMet" in str(current):
            return True
        current = current.__cause__
    return False
