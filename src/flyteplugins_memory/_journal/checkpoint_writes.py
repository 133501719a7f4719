"""Step 4 of a save (`_journal.commit`): fold a committed state into a checkpoint, now and then.

A checkpoint is written after its parts (`_journal.checkpoints.checkpoint_of`) and its audit segment, then
checked against a purge that landed meanwhile, then named by the head hint; upstream's ``audit/log.jsonl``
is brought up to date beside it, and gc() looks whether anything is old enough to go beside the head's
write. Independent steps go at once (`_journal.settle`): three round trips after the parts, not seven.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from .._rules.codecs import encode_audit_event, lines_holding
from .._rules.journal_objects import Checkpoint, encode
from .._rules.layout import AUDIT_LOG_PATH, HEAD_NAME, audit_segment_name, checkpoint_name
from .._rules.open_hint import head_for
from .._rules.purge_count import purged_since
from .._rules.state import State
from ..errors import StateCollected
from .checkpoints import checkpoint_of
from .gc import collect_quietly, collection_due
from .journal_storage import JournalStorage
from .log_reads import read_record
from .settle import settled

__all__ = ["PURGE_PROBES", "checkpoint"]

logger = logging.getLogger(__name__)

#: Commits after a new checkpoint's state read to see whether a purge landed meanwhile (`_purged_after`).
PURGE_PROBES = 64


async def checkpoint(remote: JournalStorage, state: State) -> State:
    """Write committed `state` as a checkpoint (and bring ``audit/log.jsonl`` up to date); returns the
    state re-based on it. Writing one twice is harmless: the content is fully determined by the state."""
    state.check_can_write("compact", remote.uri)
    if state.seq == state.checkpoint.seq:
        return state
    segments = list(state.checkpoint.audit_segments)
    named: list[Awaitable[None]] = []  # what the checkpoint names: its audit segment (its parts: `checkpoint_of`)
    audit: list[Awaitable[bytes | None]] = []  # upstream's audit/log.jsonl as it becomes (read first)
    if state.recent_audit:
        segment = b"".join(encode_audit_event(e) for e in state.recent_audit)
        named.append(remote.write_many({audit_segment_name(state.seq): segment}))
        audit.append(_audit_log(remote, state.checkpoint, segment))
        segments.append(state.seq)
    # one wave: its parts, its audit segment and the read of audit/log.jsonl; the next: it, and that log
    (checkpoint, index), *done = await settled(checkpoint_of(remote, state, segments), *named, *audit)
    log = {AUDIT_LOG_PATH: done[-1]} if audit and done[-1] is not None else {}
    await settled(remote.write_many({checkpoint_name(state.seq): encode(checkpoint)}), remote.write_many(log))
    if await _purged_after(remote, state):
        # a purge committed after this state while its checkpoint was written: the purge's rewrite may have
        # listed the journal before it landed, so it may hold what the purge redacted. No record and no head
        # names it yet (only the state this returns would): it goes, and the state keeps its checkpoint.
        await remote.remove_all([checkpoint_name(state.seq)])
        return state
    folded = state.on_checkpoint(checkpoint, index)
    # the head, and gc()'s look at whether anything is old enough to go (reads only), at once; gc() itself after
    _, due = await settled(
        remote.write_many({HEAD_NAME: encode(head_for(state.seq, checkpoint))}),
        collection_due(remote, folded),
    )
    folded.head_hint = state.seq
    if due is not None:
        await collect_quietly(remote, folded, due)
    return folded


async def _purged_after(remote: JournalStorage, state: State) -> bool:
    """Whether a commit after `state` counts a purge it did not see (`_rules.purge_count`): one probe when no
    commit followed it (a gc()-collected one, which only a newer state explains, counts as one)."""
    seq = state.seq
    for _ in range(PURGE_PROBES):
        try:
            record = await read_record(remote, seq + 1)
        except StateCollected:
            return True
        if record is None:
            return False
        if purged_since(state.ext, record.ext):
            return True
        seq += 1
    return True  # a long run of commits since: be safe, the next checkpoint folds them


async def _audit_log(remote: JournalStorage, before: Checkpoint, segment: bytes) -> bytes | None:
    """Upstream's ``audit/log.jsonl`` rewritten as the events up to checkpoint `before` plus `segment`
    (None: not rewritten)."""
    current = [line for line in (await remote.read(AUDIT_LOG_PATH) or b"").splitlines(keepends=True) if line.strip()]
    kept = _whole(lines_holding(current, before.audit_total))
    if kept is None:
        # Fewer events than recorded (a short read, an outside edit, or an earlier rewrite that failed):
        # rebuild from our segments, below the imported store's events, which exist only in this object.
        legacy = _whole(lines_holding(current, before.legacy_audit_lines))
        segments = await remote.read_many([audit_segment_name(s) for s in before.audit_segments])
        if legacy is None or len(segments) < len(before.audit_segments):
            logger.warning("Not rewriting %s: it or our audit segments lost events", AUDIT_LOG_PATH)
            return None
        kept = legacy + [segments[audit_segment_name(s)] for s in before.audit_segments]
    return b"".join(kept) + segment


def _whole(lines: list[bytes] | None) -> list[bytes] | None:
    """`lines` if the last one is complete (a short read can cut one in half), else None."""
    return lines if lines is not None and (not lines or lines[-1].endswith(b"\n")) else None
