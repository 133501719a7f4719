"""Pure: how journal objects evolve (docs/journal.md, "How the format evolves").

Every versioned journal object carries

    format      its major version: a reader refuses a higher one (`StoreFormatTooNew`), naming the writer
    writer      the package version that wrote it ("flyteplugins-memory 0.3.0"): what that error names
    min_reader  the lowest reader revision that may write over it (0: any); a lower one reads, never writes
    ext         extensions: readers carry the map where they rewrite what it belongs to, and ignore it

`ext` and `min_reader` are left out of the JSON when empty, so objects without extensions stay small.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from .._base.version import READER_REVISION, WRITER
from ..errors import StoreFormatTooNew

#: The major format of commit records, checkpoints and the head hint that this version reads and writes.
FORMAT = 1
#: A writer's name is shown in error messages; anything longer is not a version string.
MAX_WRITER = 200


def _empty(value: Any) -> bool:
    return not value


class Evolving(BaseModel):
    """The evolution fields, mixed into every versioned journal model (which sets the strictness)."""

    format: Literal[1] = FORMAT
    writer: str = Field(default="", max_length=MAX_WRITER)
    min_reader: int = Field(default=0, ge=0, exclude_if=_empty)
    ext: dict[str, Any] = Field(default_factory=dict, exclude_if=_empty)


def ext_field() -> Any:
    """An ``ext`` field for nested models (a file record, a commit's info): left out when empty."""
    return Field(default_factory=dict, exclude_if=_empty)


def stamped(obj: Evolving) -> Evolving:
    """`obj` as this version writes it: naming this version as its writer."""
    return obj.model_copy(update={"writer": WRITER})


def by_whom(writer: str) -> str:
    return writer or "a newer version (the object does not say which)"


def refuse_newer_format(data: bytes, name: str, known: int) -> None:
    """Raise `StoreFormatTooNew` if `data` is a JSON object whose ``format`` is above `known`.

    A loose look at an object that failed strict validation: a newer major may change anything but its
    ``format`` and ``writer``, so those two are all this reads."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return
    major = doc.get("format") if isinstance(doc, dict) else None
    if not isinstance(major, int) or isinstance(major, bool) or major <= known:
        return
    writer = doc.get("writer")
    writer = writer[:MAX_WRITER] if isinstance(writer, str) else ""
    raise StoreFormatTooNew(
        f"Journal object {name!r} has format {major}, newer than {WRITER} reads (format {known}); "
        f"it was written by {by_whom(writer)}: use that version or a later one",
        writer=writer,
    )


def refuse_to_overwrite(min_reader: int, writer: str, operation: str, where: str) -> None:
    """Raise `StoreFormatTooNew` unless this version may write over data marked `min_reader`."""
    if min_reader <= READER_REVISION:
        return
    raise StoreFormatTooNew(
        f"Cannot {operation} {where}: it holds data from {by_whom(writer)} that only readers of revision "
        f"{min_reader} or later may write over ({WRITER} is revision {READER_REVISION}). Reading works; to "
        f"{operation}, use {by_whom(writer)} or a later one",
        writer=writer,
    )
