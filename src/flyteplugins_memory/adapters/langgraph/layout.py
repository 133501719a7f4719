"""Pure: where a LangGraph item lives in a store, the labels it carries, and LangGraph's filter and
namespace-matching rules (as its `InMemoryStore` applies them).

An item ``(namespace, key)`` is the JSON file ``langgraph/<label>/.../<label>/<key>.json`` holding its
value, each segment as `adapters._segments.encode_id` writes an id (a plain lowercase id as it is, any
other encoded), so no label or key leaves its directory or meets another. LangGraph forbids ``.`` in a
namespace label and every item file ends in ``.json``, so a directory never meets a file. The exact
namespace, key, times and ttl are the file's labels (``lg_namespace`` as a JSON list, ``lg_key``,
``lg_created_at``, ``lg_updated_at``, ``lg_ttl`` in minutes, ``lg_indexed`` false for a put with
``index=False``): listings read them, never the segments.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from langgraph.store.base import InvalidNamespaceError, MatchCondition

from flyteplugins_memory import InvalidArgument, MemoryMeta

from .._segments import encode_id

__all__ = [
    "ROOT",
    "InvalidNamespace",
    "InvalidStoreInput",
    "Labels",
    "directory_of",
    "labels_of",
    "matches_filter",
    "matches_namespace",
    "path_of",
]

ROOT = "langgraph"
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


class InvalidStoreInput(InvalidArgument):
    """An op the adapter cannot carry out as given (a value that is not a JSON object, text that is not
    valid Unicode, a bad filter,
    ttl, limit or offset, or a namespace or key too long for a path or for the labels' 4 KiB); nothing
    is written. A `flyteplugins_memory.InvalidArgument`, so a ``ValueError``; the store's own refusal,
    if any, is its ``__cause__``."""


class InvalidNamespace(InvalidStoreInput, InvalidNamespaceError):
    """A namespace LangGraph refuses (empty, a label that is empty, not a str, or holds ``.`` or NUL; its root
    label ``langgraph``), or one not valid Unicode (a lone surrogate), from any method of the store:
    LangGraph's `InvalidNamespaceError` and our `InvalidStoreInput` at once."""


def check_namespace(namespace: object, *, empty_ok: bool = False) -> tuple[str, ...]:
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespace(f"a namespace is a tuple of str, got {namespace!r}")
    if not namespace and not empty_ok:
        raise InvalidNamespace("Namespace cannot be empty.")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespace(
                f"Invalid namespace label {label!r} in {tuple(namespace)}: labels are non-empty str without '.' or NUL"
            )
        if not _unicode(label):
            raise InvalidNamespace(f"Invalid namespace label {label!r} in {tuple(namespace)}: not valid Unicode")
    return tuple(namespace)


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidStoreInput(f"a key is a non-empty str, got {key!r}")
    if not _unicode(key):
        raise InvalidStoreInput(f"a key must be valid Unicode (no lone surrogate), got {key!r}")
    return key


def _unicode(text: str) -> bool:
    """Whether `text` is valid Unicode: no lone surrogate, which UTF-8 (our files, labels and index) cannot hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def directory_of(namespace: tuple[str, ...]) -> str:
    return "/".join([ROOT, *(encode_id(label) for label in namespace)])


def path_of(namespace: tuple[str, ...], key: str) -> str:
    return f"{directory_of(namespace)}/{encode_id(key)}.json"


class Labels:
    """What an item file's labels say: its namespace, key, times and ttl (None when they are not an
    item's: a file some other writer put under ``langgraph/``)."""

    def __init__(self, meta: MemoryMeta | None) -> None:
        raw = dict(meta.metadata) if meta is not None else {}
        self.namespace: tuple[str, ...] | None = _namespace_label(raw.get("lg_namespace"))
        key = raw.get("lg_key")
        self.key: str | None = key if isinstance(key, str) else None
        self.created_at = _time(raw.get("lg_created_at"))
        self.updated_at = _time(raw.get("lg_updated_at"))
        ttl = raw.get("lg_ttl")
        self.ttl = float(ttl) if isinstance(ttl, int | float) and not isinstance(ttl, bool) else None
        self.indexed = raw.get("lg_indexed") is not False

    @property
    def is_item(self) -> bool:
        return self.namespace is not None and self.key is not None and None not in (self.created_at, self.updated_at)


def labels_of(
    namespace: tuple[str, ...],
    key: str,
    created_at: datetime,
    updated_at: datetime,
    ttl: float | None,
    *,
    indexed: bool = True,
) -> dict[str, str | float | bool]:
    labels: dict[str, str | float | bool] = {
        "lg_namespace": json.dumps(list(namespace), ensure_ascii=False),
        "lg_key": key,
        "lg_created_at": created_at.isoformat(),
        "lg_updated_at": updated_at.isoformat(),
    }
    if ttl is not None:
        labels["lg_ttl"] = ttl
    if not indexed:  # a put with index=False: found by get, filters and listings, never ranked by a query
        labels["lg_indexed"] = False
    return labels


def _namespace_label(raw: object) -> tuple[str, ...] | None:
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _time(raw: object) -> datetime | None:
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


def check_ttl(ttl: object) -> float | None:
    """A put's ttl in minutes: None, or a positive finite number."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl) or ttl <= 0:
        raise InvalidStoreInput(f"ttl is None or a positive number of minutes, got {ttl!r}")
    return float(ttl)


def check_value(value: object) -> dict[str, Any]:
    """A put's value as the JSON object it will read back as, its keys in their order; refused
    (`InvalidStoreInput`) if it is not a JSON object of valid Unicode."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidStoreInput(f"a value is a mapping with str keys, got {type(value).__name__}")
    try:
        text = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidStoreInput(f"a value must be JSON-serializable (no NaN or infinity): {exc}") from exc
    if not _unicode(text):  # a lone surrogate in a str or a key: refused, as the store refuses it in any text
        raise InvalidStoreInput("a value must be valid Unicode: it holds a lone surrogate (such as '\\ud800')")
    return json.loads(text)


def check_filter(filter: object) -> dict[str, Any]:
    """A search filter: field to a value (equality) or to ``{"$op": operand}`` with LangGraph's ops."""
    if filter is None:
        return {}
    if not isinstance(filter, Mapping) or not all(isinstance(k, str) for k in filter):
        raise InvalidStoreInput(f"a filter is a mapping of field names, got {filter!r}")
    for field, wanted in filter.items():
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            for op, operand in wanted.items():
                if op not in _OPERATORS:
                    raise InvalidStoreInput(f"filter on {field!r}: unsupported operator {op!r} (use {_OPERATORS})")
                if op in ("$gt", "$gte", "$lt", "$lte") and not _number(operand):
                    raise InvalidStoreInput(f"filter on {field!r}: {op} needs a number, got {operand!r}")
    return dict(filter)


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether `value` passes `filter`, as LangGraph's `InMemoryStore` decides (nested dicts compare field
    by field, lists element by element; a dotted field is a nested path); an ordering operator on a field
    that is not a number fails."""
    return all(_compare(_field(value, field), wanted) for field, wanted in filter.items())


def _field(value: Mapping[str, Any], field: str) -> Any:
    """`value[field]`; a field it does not hold that has dots is a path into nested objects
    (``"user.access-level"``), as LangGraph's SQL stores read filter keys."""
    if field in value or "." not in field:
        return value.get(field)
    held: Any = value
    for part in field.split("."):
        if not isinstance(held, Mapping) or part not in held:
            return None
        held = held[part]
    return held


def _compare(held: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(held, op, operand) for op, operand in wanted.items())
        return isinstance(held, Mapping) and all(_compare(held.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(held, list | tuple)
            and len(held) == len(wanted)
            and all(_compare(h, w) for h, w in zip(held, wanted, strict=True))
        )
    return held == wanted


def _apply(held: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return held == operand
    if op == "$ne":
        return held != operand
    if not _number(held):
        return False
    a, b = float(held), float(operand)
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def matches_namespace(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix match, ``*`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    held = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == h for p, h in zip(path, held, strict=True))
