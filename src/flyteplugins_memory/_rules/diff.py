"""Pure: the unified diff `MemoryStore.diff` returns, of two versions' contents (either may be absent).

Text is compared line by line (`difflib.unified_diff`), lines ending at ``\n`` only, as patch and git
split them (`str.splitlines` also breaks at ``\r``, form feed, NEL, U+2028...: a "line" it cuts there has
no ``\n`` and would get a "No newline" marker mid-file); binary content (not UTF-8) is not diffed: one
line says whether the two differ, so a caller printing a diff of an image gets a sentence, not an error.
An absent side (a deletion, or no file now) is empty content labelled ``/dev/null``, as git shows it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Side:
    """One side of a diff: a label (``<path>@<version id>``) and its content (None: no file there)."""

    label: str
    data: bytes | None


def unified_diff(a: Side, b: Side) -> str:
    """The unified diff from `a` to `b` (``""`` when they are equal)."""
    text_a, text_b = _text(a.data), _text(b.data)
    if text_a is None or text_b is None:
        return _binary(a, b)
    lines = difflib.unified_diff(
        _lines(text_a),
        _lines(text_b),
        fromfile=_label(a),
        tofile=_label(b),
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _lines(text: str) -> list[str]:
    """`text` split after each ``\n`` (the last line without one, if the text does not end in one)."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _text(data: bytes | None) -> str | None:
    """`data` decoded (absent content is empty text), or None if it is binary."""
    try:
        return "" if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _label(side: Side) -> str:
    return "/dev/null" if side.data is None else side.label


def _binary(a: Side, b: Side) -> str:
    if a.data == b.data:
        return ""
    return f"Binary content {_label(a)} and {_label(b)} differ\n"
