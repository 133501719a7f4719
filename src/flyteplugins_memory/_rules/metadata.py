"""Pure: a file's user metadata (``write_text(..., metadata={...})``): its rules, and exact filtering.

Metadata is a small flat map of string keys to scalars (str, int, float, bool). It lives in our journal
only, in the file's record (``FileEntry.ext["metadata"]``), never in upstream's sidecar, so upstream
readers see exactly what they saw before. It belongs to the write that set it: a write without
`metadata` clears it, as a put replaces an item's value in mem0 or LangGraph's store (and as releases
before 0.5, which drop a rewritten file's ``ext``, do too).

Filters (``list_paths(where=...)``) match exactly: every pair must be present with an equal value, where a
bool equals only a bool (``True`` is not ``1``), a str only a str, and an int or float any number of the
same value (``1`` matches ``1.0``: JSON round-trips and CLI parsing must not decide a match).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..errors import CorruptStore, InvalidMetadata
from .paths import is_unicode

#: A metadata value.
Scalar = str | int | float | bool
#: The key of a file record's ``ext`` that holds its metadata.
EXT_KEY = "metadata"
#: Limits per file: every file record carries its metadata into each checkpoint, so it must stay small.
MAX_KEYS = 32
MAX_KEY_LENGTH = 128
MAX_ENCODED_BYTES = 4096


def check_metadata(value: object, *, name: str = "metadata") -> dict[str, Scalar]:
    """A copy of `value` if it is a valid metadata map (None: empty); `InvalidMetadata` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidMetadata(f"{name} must be a mapping of str to str, int, float or bool, got {value!r}")
    if len(value) > MAX_KEYS:
        raise InvalidMetadata(f"{name} has {len(value)} keys; at most {MAX_KEYS} are allowed")
    checked = {_check_key(key, name): _check_value(key, item, name) for key, item in value.items()}
    try:
        size = len(encode(checked))
    except ValueError as exc:  # an int with more digits than Python turns into text (sys.int_info)
        raise InvalidMetadata(f"{name} cannot be stored as JSON: {exc}") from exc
    if size > MAX_ENCODED_BYTES:
        raise InvalidMetadata(f"{name} takes {size} bytes as JSON; at most {MAX_ENCODED_BYTES} are allowed")
    return checked


def _check_key(key: object, name: str) -> str:
    if not isinstance(key, str) or not key or not is_unicode(key):
        raise InvalidMetadata(f"{name} keys must be non-empty str of valid Unicode, got {key!r}")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidMetadata(f"{name} key {key[:40]!r}... is longer than {MAX_KEY_LENGTH} characters")
    return str.__str__(key)  # a str subclass (a StrEnum) as the str storage gives back


def _check_value(key: str, value: object, name: str) -> Scalar:
    """`value` as its exact builtin type: a subclass (a StrEnum, an IntEnum) reads back as the builtin from
    storage, so the handle that wrote it must hold and match it as that builtin too."""
    if isinstance(value, str):
        if not is_unicode(value):
            raise InvalidMetadata(f"{name}[{key!r}] is not valid Unicode")
        return str.__str__(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidMetadata(f"{name}[{key!r}] must be finite, got {value!r}")
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return int(value) if isinstance(value, int) else float(value)
    raise InvalidMetadata(f"{name}[{key!r}] must be a str, int, float or bool, got {type(value).__name__}")


def encode(metadata: Mapping[str, Scalar]) -> bytes:
    return json.dumps(metadata, sort_keys=True, allow_nan=False, ensure_ascii=False).encode("utf-8")


def ext_with(metadata: Mapping[str, Scalar]) -> dict[str, Any]:
    """The ``ext`` of a file record written with `metadata` (empty: none)."""
    return {EXT_KEY: dict(metadata)} if metadata else {}


def from_ext(ext: Mapping[str, Any], path: str) -> dict[str, Scalar]:
    """The metadata a file record's ``ext`` holds (read from storage: untrusted, checked again)."""
    stored = ext.get(EXT_KEY)
    if stored is None:
        return {}
    try:
        return check_metadata(stored)
    except InvalidMetadata as exc:
        raise CorruptStore(f"The metadata stored for {path!r} is malformed: {exc}") from exc


def check_where(where: object) -> dict[str, Scalar]:
    """A filter: a metadata map (None or empty: matches every file)."""
    return check_metadata(where, name="where")


def matches(metadata: Mapping[str, Scalar], where: Mapping[str, Scalar]) -> bool:
    """Whether every pair of `where` is in `metadata` with an equal value (see the module docstring)."""
    return all(key in metadata and same_value(metadata[key], value) for key, value in where.items())


def same_value(a: Scalar, b: Scalar) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    return a == b  # int and float: by value
