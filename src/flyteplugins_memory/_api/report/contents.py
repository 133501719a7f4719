"""Pure: what the report shows of stored bytes and of the commit log, bounded.

A file's content becomes a `Preview` (text clipped to `PREVIEW_CHARS`, or "binary" with its first bytes in
hex: bytes that are not UTF-8, or hold a NUL, are never shown as text); a commit's change of one path
becomes a `FileDiff` (a unified diff clipped to `DIFF_LINES`); messages get the time of the commit that
saved them (`message_times`), since a stored message carries no time of its own (decision 0169).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._journal.commit_log import Commit
from ..._rules.diff import Side, unified_diff

#: largest file whose content the page reads (a bigger one is listed, its content not read)
READ_LIMIT = 256 * 1024
#: characters of a text file shown (the rest is counted)
PREVIEW_CHARS = 6000
#: bytes of a binary file shown, in hex
HEX_BYTES = 48
#: lines of one path's diff shown
DIFF_LINES = 120
#: keys a message may carry its own time under (an agent framework's field), tried in order
TIME_FIELDS = ("timestamp", "created_at", "time")


@dataclass(frozen=True)
class Preview:
    """A file's content as the page shows it: `text` (clipped), or `binary` with `hex` of its first bytes;
    `unread` says why nothing was read (too big, unreadable) and `size` is the content's size in bytes."""

    size: int
    text: str | None = None
    clipped: int = 0
    binary: bool = False
    hex: str = ""
    unread: str = ""


@dataclass(frozen=True)
class FileDiff:
    """One path's change in a commit: `kind` is "write" or "delete"; `text` the unified diff (clipped to
    `DIFF_LINES`, `clipped` lines left out), or `note` when there is no text diff to show."""

    path: str
    kind: str
    text: str = ""
    clipped: int = 0
    note: str = ""


def preview(data: bytes) -> Preview:
    """`data` as the page shows it."""
    text = _as_text(data)
    if text is None:
        return Preview(len(data), binary=True, hex=" ".join(f"{b:02x}" for b in data[:HEX_BYTES]))
    return Preview(len(data), text=text[:PREVIEW_CHARS], clipped=max(0, len(text) - PREVIEW_CHARS))


def unread(size: int, why: str) -> Preview:
    return Preview(size, unread=why)


def _as_text(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def file_diff(path: str, kind: str, before: bytes | None, after: bytes | None, seq: int) -> FileDiff:
    """The diff of `path` from commit ``seq - 1`` to `seq` (None: no file on that side)."""
    if max(len(before or b""), len(after or b"")) > READ_LIMIT:
        return FileDiff(path, kind, note="too large to diff here (`flyte-memory diff` shows it)")
    text = unified_diff(Side(f"{path}@c{seq - 1}", before), Side(f"{path}@c{seq}", after))
    if not text:
        return FileDiff(path, kind, note="content unchanged (metadata only)")
    lines = text.splitlines(keepends=True)
    return FileDiff(path, kind, "".join(lines[:DIFF_LINES]), max(0, len(lines) - DIFF_LINES))


def message_times(messages: Sequence[Mapping[str, Any]], committed: int, commits: Sequence[Commit]) -> list[str]:
    """A time for each of `messages`: its own (`TIME_FIELDS`), else the time of the commit that appended it
    (walking `commits`, newest first, back from the `committed` saved messages, up to a commit that
    rewrote the transcript: before it indices moved), ``"unsaved"`` past `committed`, else ``""``."""
    times = ["unsaved" if i >= committed else "" for i in range(len(messages))]
    end = min(committed, len(messages))
    for commit in commits:
        start = max(0, end - commit.appended)
        times[start:end] = [commit.time] * (end - start)
        end = start
        if commit.rewrote or end == 0:
            break
    return [_own_time(m) or t for m, t in zip(messages, times, strict=True)]


def _own_time(message: Mapping[str, Any]) -> str:
    for field in TIME_FIELDS:
        value = message.get(field)
        if isinstance(value, str) and value:
            return value
    return ""
