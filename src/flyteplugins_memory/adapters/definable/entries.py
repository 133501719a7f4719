"""Definable's entries as the adapter stores them: our `MemoryEntry` (for callers without Definable), the
fields of an entry checked before anything is written (`entry_fields`, `check_prefix`, `check_time`), and an
entry built back from stored fields (`entry_of`)."""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ... import InvalidArgument

__all__ = [
    "ENTRY_FIELDS",
    "FORMAT",
    "DuplicateMemoryId",
    "MemoryEntry",
    "check_id",
    "check_prefix",
    "check_time",
    "default_entry_class",
    "entry_fields",
    "entry_of",
    "time_key",
]

#: the fields of Definable's protocol; the real class has more (semantic fields), kept through its to_dict
ENTRY_FIELDS = ("session_id", "memory_id", "user_id", "role", "content", "message_data", "created_at", "updated_at")
FORMAT = 1
#: the store's reserved top-level names (its audit, metadata and version directories, the transcript)
_RESERVED = frozenset({"audit", "meta", "versions", "messages.json"})
#: created_at is a path segment of 20 digits of nanoseconds: below 1e11 seconds (the year 5138)
_MAX_TIME = 1e11


@dataclasses.dataclass
class MemoryEntry:
    """Definable's ``MemoryEntry`` fields, for callers without Definable installed."""

    session_id: str
    memory_id: str | None = None
    user_id: str = "default"
    role: str = "user"
    content: str = ""
    message_data: dict[str, Any] | None = None
    created_at: float | None = None
    updated_at: float | None = None

    def __post_init__(self) -> None:
        now = time.time()
        self.memory_id = self.memory_id if self.memory_id is not None else str(uuid.uuid4())
        self.created_at = self.created_at if self.created_at is not None else now
        self.updated_at = self.updated_at if self.updated_at is not None else now


class DuplicateMemoryId(InvalidArgument):
    """`add` of an entry whose memory_id is already stored (Definable's SQLite store refuses it too)."""


def default_entry_class() -> type:
    """Definable's ``MemoryEntry`` when importable, else ours."""
    try:
        from definable.memory.types import MemoryEntry as Real  # pyright: ignore[reportMissingImports]
    except ImportError:
        return MemoryEntry
    return Real


def entry_fields(entry: Any) -> dict[str, Any]:
    """The entry as a JSON-ready dict: the real class's ``to_dict`` (semantic fields too), else our fields.

    Every field the adapter relies on is checked here, before anything is written (`InvalidArgument`):
    an object with Definable's fields (not a dict), non-empty str ``memory_id``, ``session_id`` and
    ``user_id``, str ``role`` and ``content``, ``message_data`` None or a dict, times as epoch seconds,
    and the whole entry plain JSON (no sets, NaN or other objects, which would be stringified or
    unreadable)."""
    to_dict: Any = getattr(entry, "to_dict", None)
    if isinstance(entry, Mapping | type) or not (callable(to_dict) or all(hasattr(entry, n) for n in ENTRY_FIELDS)):
        raise InvalidArgument(
            f"an entry is a Definable MemoryEntry or an object with its fields ({', '.join(ENTRY_FIELDS)}), "
            f"got {type(entry).__name__}"
        )
    if callable(to_dict):
        data: Any = to_dict()
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"an entry's to_dict() returns a mapping, got {type(data).__name__}")
        fields: dict[str, Any] = {str(name): value for name, value in data.items()}
    else:
        fields = {name: getattr(entry, name) for name in ENTRY_FIELDS}
    for name in ("memory_id", "session_id", "user_id"):
        value = fields.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"an entry's {name} is a non-empty str, got {value!r}")
    for name in ("role", "content"):
        if not isinstance(fields.get(name), str):
            raise InvalidArgument(f"an entry's {name} is a str, got {fields.get(name)!r}")
    if fields.get("message_data") is not None and not isinstance(fields["message_data"], dict):
        raise InvalidArgument(f"an entry's message_data is a dict or None, got {type(fields['message_data']).__name__}")
    fields["created_at"] = check_time("created_at", fields.get("created_at"), time.time())
    fields["updated_at"] = check_time("updated_at", fields.get("updated_at"), None)
    try:
        json.dumps(fields, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidArgument(f"an entry must be plain JSON (dicts, lists, str, finite numbers): {err}") from None
    return fields


def check_prefix(prefix: object) -> str:
    """`prefix` as the adapter's directory: a non-empty relative path without ``..`` outside the store's
    reserved directories; `InvalidArgument` otherwise, when the adapter is made (not at its first write)."""
    if not isinstance(prefix, str):
        raise InvalidArgument(f"prefix is a str (a directory of the store), got {type(prefix).__name__}")
    parts = [part for part in prefix.split("/") if part not in ("", ".")]  # "a//./b/" is a/b, as the store's
    plain = all(part.isprintable() and part.encode("utf-8", "replace").decode() == part for part in parts)
    if prefix.startswith("/") or not parts or ".." in parts or not plain:
        raise InvalidArgument(f"prefix must be a non-empty relative directory of the store (no '..'), got {prefix!r}")
    if parts[0] in _RESERVED:
        raise InvalidArgument(f"prefix {prefix!r} is inside a directory the store reserves ({parts[0]})")
    return "/".join(parts)


def check_id(name: str, value: object, *, optional: bool = False) -> None:
    """A session, user or memory id argument: a non-empty str (or None where `optional`)."""
    if optional and value is None:
        return
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{name} is a non-empty str{' or None' if optional else ''}, got {value!r}")


def check_time(name: str, value: Any, default: float | None) -> float | None:
    """`value` if it is epoch seconds (`default` for None); else `InvalidArgument`, before anything is
    written: a string sorted against numbers would break `get_entries` of the whole session later."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"an entry's {name} is epoch seconds (an int or float), got {value!r}")
    if not (0 <= value < _MAX_TIME):  # NaN fails it too; a huge int compares without overflowing
        raise InvalidArgument(f"an entry's {name} must be finite, >= 0 and < {_MAX_TIME:.0e} seconds, got {value!r}")
    return value


def time_key(value: Any) -> float:
    """A stored created_at as a sort key; one written before times were checked sorts as 0."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else 0.0


def entry_of(cls: type, fields: dict[str, Any]) -> Any:
    """An instance of `cls` from stored fields (``from_dict`` when it has one)."""
    from_dict = getattr(cls, "from_dict", None)
    if callable(from_dict):
        return from_dict(fields)
    known = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set(ENTRY_FIELDS)
    return cls(**{name: value for name, value in fields.items() if name in known})
