"""Where the Orbiter adapter keeps items and how it finds them (pure rules, no I/O): an item's path by its
scope (`path_of`), its id's claim beside them (`claim_path`), its labels, the directory and filters of a
search or clear (`filter_of`), the order of results (`newest_first`), and an item built back (`load_item`)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .types import ALLOWED, SCOPE_FIELDS, InvalidMemoryInput, is_text, item_classes, scope_of, time_of

__all__ = [
    "CLAIMS",
    "ROOT",
    "claim_path",
    "filter_of",
    "labels_of",
    "load_item",
    "matches_extra",
    "newest_first",
    "path_of",
    "segment",
]

ROOT = "orbiter"
CLAIMS = "orbiter-ids"  # beside ROOT, not in it: listings and searches under ROOT never meet a claim
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")


def segment(value: str | None) -> str:
    if value is None:
        return "_"
    return value if _SEGMENT.fullmatch(value) else "~" + hashlib.sha256(value.encode()).hexdigest()[:32]


def path_of(data: dict[str, Any]) -> str:
    meta = data.get("metadata") or {}
    return "/".join([ROOT, *(segment(meta.get(f)) for f in SCOPE_FIELDS), data["id"] + ".json"])


def claim_path(item_path: str) -> str:
    """The claim of the id an item file is named after (``<id>.json``)."""
    return f"{CLAIMS}/{item_path.rsplit('/', 1)[-1]}"


def labels_of(data: dict[str, Any]) -> dict[str, str]:
    meta = data.get("metadata") or {}
    scope = {f: meta[f] for f in SCOPE_FIELDS if meta.get(f) is not None}
    fixed = {"orbiter_id": data["id"], "memory_type": data["memory_type"], "status": data["status"]}
    return {**fixed, **scope, "created_at": data["created_at"]}


def filter_of(metadata: object, memory_type: object, status: object) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Directory, exact `where` labels and ``extra`` pairs that a search or clear filters on."""
    scope = scope_of(metadata, "metadata filter")
    where = {f: scope[f] for f in SCOPE_FIELDS if scope[f] is not None}
    if memory_type is not None:
        if not is_text(memory_type) or not memory_type:
            raise InvalidMemoryInput(f"memory_type must be None or a non-empty str, got {memory_type!r}")
        where["memory_type"] = memory_type
    if status is not None:
        if not isinstance(status, str) or status not in ALLOWED:
            raise InvalidMemoryInput(f"status must be None or one of {sorted(ALLOWED)}, got {status!r}")
        where["status"] = str(status)
    leading = []
    for f in SCOPE_FIELDS:  # the directory of the leading scope ids that are set
        if scope[f] is None:
            break
        leading.append(segment(scope[f]))
    return "/".join([ROOT, *leading]), where, scope["extra"]


def matches_extra(data: dict[str, Any], extra: dict[str, Any]) -> bool:
    held = (data.get("metadata") or {}).get("extra") or {}
    return all(k in held and held[k] == v for k, v in extra.items())


def newest_first(created: dict[str, str]) -> list[str]:
    """Paths by their ``created_at`` as time, newest first; stamps that are not ISO-8601 after every one
    that is (by text among themselves), ties by path."""

    def key(path: str) -> tuple[bool, float, str, str]:
        seconds = time_of(created[path])
        return seconds is not None, seconds or 0.0, created[path], path

    return sorted(created, key=key, reverse=True)


def load_item(data: dict[str, Any]) -> Any:
    base, subtypes = item_classes()
    return subtypes.get(data.get("memory_type", ""), base).model_validate(data)
