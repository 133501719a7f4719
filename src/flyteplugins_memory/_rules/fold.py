"""Pure: a transcript fold, the change `compact_transcript` commits: the first `count` messages of the
transcript are replaced by one summary message.

A fold is stated against content, not positions in one list: it names the messages it folds (their
fingerprints, `_rules.transcript.fingerprints`), so it applies to any transcript that still begins with them,
the handle's base or a newer one that other writers appended to. That is what lets a compaction merge
with concurrent appends (they land after the summary) while a second compaction of the same messages,
or a rewrite of them, finds them gone and conflicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .transcript import committed_form, fingerprints

Message = dict[str, Any]


@dataclass(frozen=True)
class Fold:
    """Replace the leading messages whose fingerprints are `prefix` with `summary` (in committed form)."""

    prefix: tuple[str, ...]
    summary: Message

    @property
    def count(self) -> int:
        return len(self.prefix)

    def applies_to(self, messages: Sequence[Message]) -> bool:
        """Whether `messages` still begins with the folded messages."""
        return tuple(fingerprints(messages[: self.count])) == self.prefix

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """`messages` folded: the summary (a fresh copy), then everything after the folded messages."""
        return committed_form([self.summary]) + list(messages[self.count :])

    def unfold(self, folded: Sequence[Message], base: Sequence[Message]) -> list[Message]:
        """The inverse of `apply` against `base` (which `applies_to`): `folded` with its summary replaced
        by the folded messages of `base`, so appends after a fold compare like appends to `base`."""
        return list(base[: self.count]) + list(folded[1:])


def fold_point(messages: Sequence[Message], keep_last: int) -> int:
    """How many leading messages a compaction keeping the last `keep_last` folds.

    The boundary never splits a tool exchange: when the first kept message is a tool result, or the
    last folded one an assistant message with ``tool_calls``, the boundary moves earlier until neither
    holds, so the kept part may hold more than `keep_last` messages (it rounds up, never down). An
    assistant message whose tool calls are not answered yet stays too (even with ``keep_last=0``): its
    results will be appended after it."""
    point = max(len(messages) - keep_last, 0)
    while point > 0 and (_opens_with_tool_result(messages, point) or _calls_tools(messages[point - 1])):
        point -= 1
    return point


def _opens_with_tool_result(messages: Sequence[Message], point: int) -> bool:
    return point < len(messages) and _is_tool_result(messages[point])


def _is_tool_result(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "tool"


def _calls_tools(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant" and bool(message.get("tool_calls"))
