"""Create-only writes, the one primitive the commit protocol needs from a backend.

fsspec has no uniform conditional write, so this is the one place that knows each backend:
local disk links a fully written temp file into place (``link`` fails if the target exists), memory
checks and writes under a process-wide lock, and S3 and GCS send ``mode="create"`` (``If-None-Match: *``
and ``ifGenerationMatch=0``), which their servers refuse with HTTP 412 when the object exists. Backends
are told apart by exact class, as `_backends` allows them: a subclass (of ``MemoryFileSystem``, say) may
keep its data elsewhere, so it gets the generic ``mode="create"`` path its user opted in to.
"""

from __future__ import annotations

import os
import threading
import uuid

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from ._backends import is_verified

_MEMORY_LOCK = threading.Lock()


def supports_exclusive_create(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether `create_exclusive` is atomic on this filesystem.

    The GCS emulator used in tests (``STORAGE_EMULATOR_HOST``) ignores preconditions, so on it two
    writers can both "create" one object; real GCS honors them. A backend the user opted in to
    (`allow_unverified_backend`) is not known to be atomic, so it says False.
    """
    if not is_verified(fs):
        return False
    return not (type(fs).__name__ == "GCSFileSystem" and os.environ.get("STORAGE_EMULATOR_HOST"))


def create_exclusive(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    """Write `data` to `path` only if nothing is there; True if this call created it (blocking)."""
    if type(fs) is LocalFileSystem:
        return _create_local(path, data)
    if type(fs) is MemoryFileSystem:
        with _MEMORY_LOCK:
            if fs.exists(path):
                return False
            fs.pipe_file(path, data)
            return True
    if is_verified(fs) and not supports_exclusive_create(fs):
        # Check-then-write: correct for saves that do not overlap in time, racy for those that do.
        if fs.exists(path):
            return False
        fs.pipe_file(path, data)
        return True
    try:
        fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    except OSError as exc:
        if _is_precondition_failure(exc):
            return False
        raise
    return True


def _create_local(path: str, data: bytes) -> bool:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".~fpm-{uuid.uuid4().hex}")
    with open(temp, "xb") as handle:
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
