"""Orbiter's memory data types, written from its documentation (Orbiter is not on PyPI): `MemoryError`,
`MemoryStatus` and its lifecycle, `MemoryMetadata`, `MemoryItem` and the System/Human/AI/Tool subtypes,
and the adapter's own errors. `item_classes` prefers Orbiter's own classes when they are importable.
"""

from __future__ import annotations

import functools
import importlib
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ALLOWED",
    "AIMemory",
    "HumanMemory",
    "InvalidMemoryInput",
    "InvalidStatusTransition",
    "ItemNotFound",
    "MemoryError",
    "MemoryItem",
    "MemoryMetadata",
    "MemoryStatus",
    "SystemMemory",
    "ToolMemory",
    "check_transition",
    "item_classes",
    "now",
]


class MemoryError(Exception):  # Orbiter's name (shadows the builtin here only)
    """Base exception for memory operations."""


class InvalidMemoryInput(MemoryError, ValueError):
    """An item, id or argument the adapter cannot store or use (the message says which and why)."""


class InvalidStatusTransition(MemoryError, ValueError):
    """A status change the lifecycle does not allow (draft -> accepted | discard, accepted -> discard)."""


class ItemNotFound(InvalidMemoryInput, KeyError):
    """`transition` of an id the store does not hold."""


class MemoryStatus(StrEnum):
    DRAFT = "draft"
    ACCEPTED = "accepted"
    DISCARD = "discard"


ALLOWED: dict[str, frozenset[str]] = {
    "draft": frozenset({"accepted", "discard"}),
    "accepted": frozenset({"discard"}),
    "discard": frozenset(),
}


def now() -> str:
    """Now, as Orbiter stamps `created_at` and `updated_at` (ISO-8601, UTC)."""
    return datetime.now(UTC).isoformat()


class MemoryMetadata(BaseModel):
    model_config = ConfigDict(frozen=True)
    user_id: str | None = None
    session_id: str | None = None
    task_id: str | None = None
    agent_id: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class MemoryItem(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    content: str
    memory_type: str
    status: MemoryStatus = MemoryStatus.ACCEPTED
    metadata: MemoryMetadata = Field(default_factory=MemoryMetadata)
    created_at: str = Field(default_factory=now)
    updated_at: str = Field(default_factory=now)

    def transition(self, new_status: MemoryStatus) -> None:
        """Move to `new_status` and stamp `updated_at`; `InvalidStatusTransition` if not allowed."""
        check_transition(str(self.status), str(new_status))
        self.status = MemoryStatus(new_status)
        self.updated_at = now()


class SystemMemory(MemoryItem):
    memory_type: str = "system"


class HumanMemory(MemoryItem):
    memory_type: str = "human"


class AIMemory(MemoryItem):
    memory_type: str = "ai"
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)


class ToolMemory(MemoryItem):
    memory_type: str = "tool"
    tool_call_id: str = ""
    tool_name: str = ""
    is_error: bool = False


def check_transition(old: str, new: str) -> None:
    if new not in ALLOWED:
        raise InvalidMemoryInput(f"unknown status {new!r}; one of {sorted(ALLOWED)}")
    if new not in ALLOWED.get(old, frozenset()):
        raise InvalidStatusTransition(f"cannot move a memory from {old!r} to {new!r}")


@functools.cache
def item_classes() -> tuple[type[Any], dict[str, type[Any]]]:
    """The base item class and the subtypes by ``memory_type``: Orbiter's if importable, else ours."""
    try:
        base = importlib.import_module("orbiter.memory.base")
    except ImportError:
        base = None
    names = ("MemoryItem", "SystemMemory", "HumanMemory", "AIMemory", "ToolMemory")
    found = [getattr(base, n, None) for n in names] if base else []
    classes: list[type[Any]] = [c for c in found if isinstance(c, type)]
    if len(classes) != len(names):
        classes = [MemoryItem, SystemMemory, HumanMemory, AIMemory, ToolMemory]
    subtypes: dict[str, type[Any]] = dict(zip(("system", "human", "ai", "tool"), classes[1:], strict=True))
    return classes[0], subtypes
