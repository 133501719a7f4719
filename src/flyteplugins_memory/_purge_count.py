"""Pure: the count of purges a store has committed, carried in its store-level ``ext``.

A purge rewrites stored checkpoints in place (`_redact`); a handle that holds one in memory must not reuse
it for a record committed after the purge. Every purge commit counts itself here, so a record whose count
differs from the handle's state makes the reader read the checkpoint again (`_open._state_from`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The store-level ``ext`` key counting the purges committed: a handle whose state counts fewer than a
#: record it reads does not reuse the checkpoint it holds in memory (a purge may have rewritten it).
PURGES_EXT = "purges"


def purges(ext: Mapping[str, Any]) -> int:
    """How many purges the store-level `ext` counts (0 if none, or not a count: it is untrusted)."""
    found = ext.get(PURGES_EXT, 0)
    return found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else 0


def purged_since(known: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Whether a record (its store-level `record` ext) comes after a purge that the state `known` (its ext)
    did not see. A record without ``ext`` carries its checkpoint's, so it says nothing."""
    return bool(record) and purges(record) != purges(known)


def counted(view: Any) -> None:
    """Count one more purge in the commit `view` is making (a compare-and-swap on the base's count: of two
    concurrent purges one raises `ConcurrencyError` and can be retried)."""
    view.changes.ext[PURGES_EXT] = purges(view.base.ext) + 1


__all__ = ["PURGES_EXT", "counted", "purged_since", "purges"]
