"""Reading the audit trail from the newest end, fetching only as much history as asked for.

Events since the newest checkpoint travel in the commit record; older ones sit in one immutable segment
per checkpoint, and those of an imported upstream store in the first lines of ``audit/log.jsonl``.
"""

from __future__ import annotations

from typing import Any

from .._rules.codecs import decode_audit_lines
from .._rules.journal_objects import Origin
from .._rules.layout import AUDIT_LOG_PATH, audit_segment_name
from .._rules.state import State
from .journal_storage import JournalStorage
from .old_journal import old_view


async def audit_tail(
    remote: JournalStorage | None, state: State, pending: list[dict[str, Any]], n: int
) -> list[dict[str, Any]]:
    """The last `n` events (all for ``n <= 0``), oldest first, unsaved ones last."""
    events = list(state.recent_audit) + list(pending)
    checkpoint = state.checkpoint
    if remote is not None and state.origin is Origin.OLD_JOURNAL:
        remote = old_view(remote)  # a store whose journal has not moved yet
    if remote is not None:
        for seq in reversed(checkpoint.audit_segments):
            if 0 < n <= len(events):
                break
            events = decode_audit_lines(await remote.read(audit_segment_name(seq)) or b"") + events
        if checkpoint.legacy_audit_lines and not 0 < n <= len(events):
            legacy = decode_audit_lines(await remote.read(AUDIT_LOG_PATH) or b"")
            events = legacy[: checkpoint.legacy_audit_lines] + events
    return events[-n:] if n > 0 else events
