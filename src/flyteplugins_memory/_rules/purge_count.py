"""Pure: the marks a purge leaves in the journal's structured objects.

The count of purges a store has committed, in its store-level ``ext``: a purge rewrites stored checkpoints
in place (`_journal.redact`); a handle that holds one in memory must not reuse it for a record committed after the
purge. Every purge commit counts itself, so a record whose count differs from the handle's state makes the
reader read the checkpoint again (`_journal.opening._state_from`).

The purged file entry: every entry of a purged path, in every stored record, checkpoint and part, has its
``ext`` replaced by ``{"purged": true}`` (labels, ttl and other extensions gone). Its bytes may still be
stored for another live path that holds the same content, but no read of this entry returns them
(`ContentPurged`, `_journal.contents.fetch_contents`; `read_version` and `restore` raise `VersionNotFound`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The ``ext`` of a purged path's file entry (and the mark of a redacted proposal).
PURGED_FLAG = "purged"


def is_purged_entry(ext: Mapping[str, Any]) -> bool:
    """Whether a file entry's `ext` marks it as an entry of a purged path."""
    return ext.get(PURGED_FLAG) is True


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


__all__ = ["PURGED_FLAG", "PURGES_EXT", "counted", "is_purged_entry", "purged_since", "purges"]
