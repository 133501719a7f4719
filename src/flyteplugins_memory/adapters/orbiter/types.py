"""Orbiter's memory data types, written from its documentation (Orbiter is not on PyPI): `MemoryError`,
`MemoryStatus` and its lifecycle, `MemoryMetadata`, `MemoryItem` and the System/Human/AI/Tool subtypes,
the adapter's own errors, and the rules an item must pass before the adapter stores it (`dump_item`).
`item_classes` prefers Orbiter's own classes when they are importable.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ALLOWED",
    "SCOPE_FIELDS",
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
    "check_id",
    "check_transition",
    "dump_item",
    "is_text",
    "item_classes",
    "now",
    "scope_of",
    "time_of",
    "with_orbiters_error",
]

SCOPE_FIELDS = ("user_id", "session_id", "agent_id", "task_id")  # the order of the path segments
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,47}")
_MAX_SCOPE_ID = 256  # file metadata holds 4 KiB in all
_MAX_LABEL = 64  # memory_type and timestamps are labels too


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


def time_of(stamp: object) -> float | None:
    """An ISO-8601 `created_at` as epoch seconds (no offset: UTC); None if it is not one. Text order is
    not time order once offsets differ (``10:00+05:00`` is before ``06:00+00:00``)."""
    if not isinstance(stamp, str):
        return None
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


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
    """Refuse a status change the lifecycle forbids: `InvalidStatusTransition`, which is Orbiter's own
    ``MemoryError`` too when ``orbiter.memory`` is importable (as ``MemoryItem.transition`` raises)."""
    if new not in ALLOWED:
        raise with_orbiters_error(InvalidMemoryInput)(f"unknown status {new!r}; one of {sorted(ALLOWED)}")
    if new not in ALLOWED.get(old, frozenset()):
        raise with_orbiters_error(InvalidStatusTransition)(f"cannot move a memory from {old!r} to {new!r}")


@functools.cache
def with_orbiters_error(cls: type[MemoryError]) -> type[MemoryError]:
    """`cls`, also a subclass of Orbiter's ``orbiter.memory.base.MemoryError`` when that is importable (so
    ``except MemoryError`` with Orbiter's class catches it); `cls` itself otherwise."""
    try:
        theirs = getattr(importlib.import_module("orbiter.memory.base"), "MemoryError", None)
    except ImportError:
        return cls
    if not isinstance(theirs, type) or not issubclass(theirs, Exception) or issubclass(cls, theirs):
        return cls
    return type(cls.__name__, (cls, theirs), {"__module__": cls.__module__, "__doc__": cls.__doc__})


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


# -- what the adapter stores ---------------------------------------------------------------------------


def is_text(value: object) -> TypeGuard[str]:
    """A str that UTF-8 can encode (no lone surrogates): paths, labels and hashes need its bytes."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_id(item_id: object) -> str:
    if not isinstance(item_id, str) or not _ID.fullmatch(item_id):
        raise InvalidMemoryInput(
            f"memory id must be 1-48 letters, digits or '_.-' starting with a letter or digit, got {item_id!r}"
        )
    return item_id


def scope_of(metadata: object, what: str) -> dict[str, Any]:
    """The scope fields and ``extra`` of a `MemoryMetadata`-shaped object (None: no scope)."""
    if metadata is None:
        return {**dict.fromkeys(SCOPE_FIELDS), "extra": {}}
    if isinstance(metadata, Mapping) or not all(hasattr(metadata, f) for f in SCOPE_FIELDS):
        # a dict (or anything else) would read as "no scope": a clear would then delete every user's items
        raise InvalidMemoryInput(f"{what}: expected a MemoryMetadata (or None), got {type(metadata).__name__}")
    fields = {f: getattr(metadata, f) for f in SCOPE_FIELDS}
    extra = getattr(metadata, "extra", {})
    if not all(v is None or (is_text(v) and 0 < len(v) <= _MAX_SCOPE_ID) for v in fields.values()):
        raise InvalidMemoryInput(f"{what}: scope ids must be None or non-empty text of at most 256 characters")
    if not isinstance(extra, dict):
        raise InvalidMemoryInput(f"{what}: metadata.extra must be a dict, got {type(extra).__name__}")
    return {**fields, "extra": extra}


def dump_item(item: object) -> dict[str, Any]:
    """The item as a JSON object, after checking every field the adapter relies on."""
    if isinstance(item, type) or not callable(getattr(item, "model_dump", None)):
        raise InvalidMemoryInput(f"expected a memory item (a pydantic model), got {type(item).__name__}")
    try:
        data = item.model_dump(mode="json")  # type: ignore[attr-defined]
    except ValueError as err:  # pydantic's serialization errors are ValueErrors
        raise InvalidMemoryInput(f"memory item is not JSON-serializable: {err}") from None
    if not isinstance(data, dict):
        raise InvalidMemoryInput(f"memory item dumps to {type(data).__name__}, not an object")
    check_id(data.get("id"))
    if not is_text(data.get("content")):  # any str, empty too (an AI turn that only calls tools), as Orbiter's
        raise InvalidMemoryInput(f"memory item content must be a str, got {data.get('content')!r}")
    for name in ("memory_type", "created_at", "updated_at"):
        value = data.get(name)
        if not is_text(value) or not value.strip() or len(value) > _MAX_LABEL:
            raise InvalidMemoryInput(f"memory item {name} must be a non-empty str (labels <= 64), got {value!r}")
    if not isinstance(data.get("status"), str) or data["status"] not in ALLOWED:
        raise InvalidMemoryInput(f"memory item status must be one of {sorted(ALLOWED)}, got {data.get('status')!r}")
    if not isinstance(data.get("metadata") or {}, dict):
        raise InvalidMemoryInput(f"memory item metadata must be an object, got {data.get('metadata')!r}")
    scope_of(MemoryMetadata.model_construct(**(data.get("metadata") or {})), "memory item")
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidMemoryInput(f"memory item is not JSON-serializable: {err}") from None
    return data
