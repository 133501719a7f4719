"""Create-only writes, the one primitive the commit protocol needs from a backend.

fsspec has no uniform conditional write, so each backend declares its own (`storage._registry`): local disk
links a fully written temp file into place (``link`` fails if the target exists, `storage._local`), memory
checks and writes under a process-wide lock (`storage._memory`), and S3 and GCS send ``mode="create"``
(``If-None-Match: *`` and ``ifGenerationMatch=0``), which their servers refuse with HTTP 412 when the object
exists; this module runs the right one and recognises that refusal. Backends are told apart by exact class,
as `storage._registry` allows them: a subclass (of ``MemoryFileSystem``, say) may
keep its data elsewhere, so it gets the generic ``mode="create"`` path its user opted in to. Whether
the result is atomic is declared in `storage._registry` (`Capabilities.atomic_create`), not decided here.
"""

from __future__ import annotations

import fsspec
from fsspec.asyn import AsyncFileSystem

from ._backend import class_path
from ._registry import BACKENDS


def create_exclusive(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    """Write `data` to `path` only if nothing is there; True if this call created it (blocking).

    A backend with a create-only write of its own (local disk, memory: `storage._backend.Backend.create`) uses
    it when `fs` is exactly its class; any other filesystem gets ``mode="create"``. Atomic exactly where
    `storage._registry.capabilities_of` says ``atomic_create``; elsewhere it is whatever the backend makes of
    ``mode="create"``, and the callers make up for it (see `FsspecStorage.create_exclusive`).
    """
    backend = BACKENDS.get(class_path(fs))
    if backend is not None and backend.create is not None:
        return backend.create(fs, path, data)
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


def _s3_answer(exc: BaseException) -> tuple[object, object]:
    """The S3 error code and HTTP status botocore's error `exc` carries (None, None for any other)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None, None
    return (response.get("Error") or {}).get("Code"), (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")


def _is_precondition_failure(exc: BaseException) -> bool:
    """Whether a failed create-only write was refused because the object exists (HTTP 412).

    Looks at status codes along the cause chain (botocore ``response``, gcsfs ``code``), and at the error
    codes' names, never at a bare "412" in a message: object names can contain it.
    """
    current: BaseException | None = exc
    while current is not None:
        code, status = _s3_answer(current)
        if code in ("PreconditionFailed", "412") or status == 412:
            return True
        if getattr(current, "code", None) == 412:
            return True
        if "PreconditionFailed" in str(current) or "conditionNotMet" in str(current):
            return True
        current = current.__cause__
    return False


def is_conflict(exc: BaseException) -> bool:
    """Whether S3 answered 409 ``ConditionalRequestConflict`` (a conditional write raced another write of the
    key: "retry"); s3fs raises it as ``OSError(EIO)``, with botocore's error as its cause."""
    current: BaseException | None = exc
    while current is not None:
        code, status = _s3_answer(current)
        if code == "ConditionalRequestConflict" or status == 409:
            return True
        current = current.__cause__ or current.__context__
    return False
