"""The OpenRath backend's failures: how an op stops early, and how a store exception becomes a
``MemoryExecutionFailure``.

OpenRath's contract is that ``dispatch`` returns failures the caller can expect instead of raising, so
the op code raises `OpFailure` (a failure already in OpenRath's terms) or lets our store's typed errors
through, and `failure_of` translates both in this one place.
"""

from __future__ import annotations

from rath.memory import MemoryExecutionFailure
from rath.memory.results import FailureKind

from flyteplugins_memory import InvalidPath, ReadOnlyPath, ReservedPath, StorageError, UnsavedChanges

__all__ = ["OpFailure", "fail", "failure_of"]


class OpFailure(Exception):
    """An op stopped with a failure the caller can expect; `failure` is what ``dispatch`` returns."""

    def __init__(self, failure: MemoryExecutionFailure):
        super().__init__(failure.message)
        self.failure = failure


def fail(kind: FailureKind, message: str) -> OpFailure:
    return OpFailure(MemoryExecutionFailure(kind=kind, message=message))


def failure_of(err: Exception) -> MemoryExecutionFailure:
    """The failure an exception raised by an op stands for (``internal`` for anything unexpected)."""
    if isinstance(err, OpFailure):
        return err.failure
    if isinstance(err, InvalidPath | ReservedPath):
        return MemoryExecutionFailure(kind="invalid_uri", message=str(err))
    if isinstance(err, ReadOnlyPath):
        return MemoryExecutionFailure(kind="unauthorized", message=str(err))
    if isinstance(err, UnsavedChanges):  # OpenRath has no conflict kind: a refusal, named in `detail`
        return MemoryExecutionFailure(kind="unauthorized", message=str(err), detail="UnsavedChanges")
    if isinstance(err, StorageError | OSError):
        return MemoryExecutionFailure(kind="transport", message=f"{type(err).__name__}: {err}")
    return MemoryExecutionFailure(kind="internal", message=f"{type(err).__name__}: {err}")
