"""The OpenRath ops over one opened store: the `Bound` handle they share and the table from op type to
the function that carries it out (reads in `reads`, writes and commits in `writes`).

Every op raises `OpFailure` or our store's typed errors; ``FlyteMemoryBackend.dispatch`` turns those into
``MemoryExecutionFailure`` (`errors.failure_of`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rath.memory import (
    MemoryListResult,
    MemoryOp,
    MemoryOpCommit,
    MemoryOpFind,
    MemoryOpList,
    MemoryOpRead,
    MemoryOpResource,
    MemoryOpSearch,
    MemoryOpTree,
    MemoryOpWrite,
    MemoryResult,
)

from flyteplugins_memory import MemoryStore

from .errors import fail
from .reads import entries, find, read
from .resources import ingest
from .sources import ResourcePolicy
from .writes import commit_session, write

__all__ = ["OPS", "Bound", "Extract", "apply"]

OPS: frozenset[type[MemoryOp]] = frozenset(
    {
        MemoryOpWrite,
        MemoryOpRead,
        MemoryOpList,
        MemoryOpTree,
        MemoryOpFind,
        MemoryOpSearch,
        MemoryOpResource,
        MemoryOpCommit,
    }
)
Extract = Callable[[list[dict[str, Any]]], Any]


@dataclass
class Bound:
    """An opened OpenRath store: our handle, its options, and a lock (one op at a time per handle)."""

    store: MemoryStore
    actor: str
    extract: Extract | None
    abstract_chars: int
    overview_lines: int
    policy: ResourcePolicy = field(default_factory=ResourcePolicy)
    lock: threading.Lock = field(default_factory=threading.Lock)


def apply(bound: Bound, op: MemoryOp) -> MemoryResult:
    if isinstance(op, MemoryOpWrite):
        return write(bound, op)
    if isinstance(op, MemoryOpRead):
        return read(bound, op)
    if isinstance(op, MemoryOpList):
        return MemoryListResult(entries=tuple(entries(bound, op.uri, 0)))
    if isinstance(op, MemoryOpTree):
        return MemoryListResult(entries=tuple(entries(bound, op.uri, max(op.depth, 0))))
    if isinstance(op, MemoryOpFind | MemoryOpSearch):
        return find(bound, op.query, op.target_uri, op.top_k)
    if isinstance(op, MemoryOpCommit):
        return commit_session(bound, op)
    if isinstance(op, MemoryOpResource):
        return ingest(bound, op)
    raise fail("unsupported", f"{type(op).__name__} is not supported")  # pragma: no cover (dispatch checks)
