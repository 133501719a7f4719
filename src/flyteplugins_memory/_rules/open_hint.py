"""Pure: what the head hint names for an open to fetch in one round trip (decision 0147).

An open reads ``head.json`` first; everything else it needs depends on that answer alone, so the head
names it, and the open asks for all of it at once: the two log slots past the hint (a small save leaves the
hint one commit behind, `_journal.projection.write_head`), the hinted commit's record, its checkpoint and,
when they are small, that checkpoint's index parts (a listing of a store of a few thousand files then costs
no round trip of its own). What the head names lives in its ``ext`` under `EXT_KEY`:

    {"open": {"stored": true, "parts": ["<sha256>", ...]}}

``stored`` says whether the checkpoint has an object (checkpoint 0 of a store this package created has
none); ``parts`` are content-addressed, so a stale name reads nothing wrong: a prefetched part is used only
when the checkpoint read references that very sha256 (and it is verified like any part). Only sha256s are
named, never paths, so the head carries no label a purge would have to reach. The head is a hint: a
missing, stale or malformed entry costs round trips, never correctness. Readers before this field carry
and ignore it (``ext``); a head without it is read as before, with the checkpoint fetched at once when its
number is above 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import parts as _parts
from .codecs import is_sha256
from .journal_objects import EMPTY_CHECKPOINT, Checkpoint, Head

__all__ = ["EXT_KEY", "OpenHint", "head_for", "read_hint"]

EXT_KEY = "open"
#: A hostile head cannot make an open read more than this many parts ahead.
MAX_NAMED_PARTS = 64


@dataclass(frozen=True)
class OpenHint:
    """What a head names for an open: whether its checkpoint has an object (None: the head does not
    say), and the sha256s of the parts to read with it."""

    checkpoint_stored: bool | None = None
    parts: tuple[str, ...] = ()


def head_for(seq: int, checkpoint: Checkpoint) -> Head:
    """The head hint of committed state `seq` on `checkpoint`, naming what an open of it reads."""
    stored = checkpoint.seq > 0 or checkpoint != EMPTY_CHECKPOINT  # an import's checkpoint 0 is stored
    refs = checkpoint.parts
    # named when together they are at most one part's worth (`_rules.parts.PART_MAX_BYTES`, read at call
    # time: tests lower it; 1 MiB, a store of about 4,000 files); a larger index is read when something
    # looks at its files, as before
    parts = [ref.sha256 for ref in refs] if sum(ref.bytes for ref in refs) <= _parts.PART_MAX_BYTES else []
    hint: dict[str, Any] = {"stored": stored}
    if parts:
        hint["parts"] = parts
    return Head(seq=seq, checkpoint=checkpoint.seq, ext={EXT_KEY: hint})


def read_hint(head: Head) -> OpenHint:
    """The open hint a head carries; anything malformed in it is ignored (it is only a hint)."""
    hint = head.ext.get(EXT_KEY)
    if not isinstance(hint, dict):
        return OpenHint()
    stored = hint.get("stored")
    parts = hint.get("parts")
    named = parts[:MAX_NAMED_PARTS] if isinstance(parts, list) else []
    return OpenHint(
        checkpoint_stored=stored if isinstance(stored, bool) else None,
        parts=tuple(sha for sha in named if isinstance(sha, str) and is_sha256(sha)),
    )
