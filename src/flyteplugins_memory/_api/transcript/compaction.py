"""Transcript compaction: ``store.compact_transcript(summarize, keep_last=N)``.

The older messages of the transcript move to an archive record log (``store.records(archive)``) and are
replaced by one summary message that the caller's `summarize` writes. The archive segment, the folded
transcript and an audit event are one commit, whose transcript change is a *fold* (`_rules.fold`): it merges
with messages other handles append meanwhile (they land after the summary), and a second compaction of
the same messages finds them gone and raises `ConcurrencyError`, so no message is archived twice or lost.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel

from ..._base.syncify import syncify
from ..._handle.special_commits import StagedFile
from ..._rules.admission import Access
from ..._rules.arguments import check_int
from ..._rules.codecs import encode_messages, sha256_bytes, utc_timestamp, write_event
from ..._rules.commit_info import check_note
from ..._rules.fold import Fold, fold_point
from ..._rules.messages import MessageModel, admit
from ..._rules.paths import MESSAGES_PATH
from ..._rules.record_codec import (
    ARCHIVE_EXT,
    ARCHIVE_REASON,
    COUNT_EXT,
    DEFAULT_ARCHIVE,
    check_records,
    encode_segment,
    is_transcript_archive,
    segment_name,
)
from ..._rules.transcript import committed_form, fingerprints
from ..._rules.writes import ChangeOptions
from ...errors import InvalidArgument, InvalidMessage, InvalidRecord
from ..core import StoreCore
from ..records import RecordLog

__all__ = ["ARCHIVE_EXT", "DEFAULT_ARCHIVE", "CompactionResult", "Summarize", "Summary", "is_transcript_archive"]

#: What `summarize` returns: a message (dict or typed), or text, stored as a ``user`` message.
Summary = Union[str, dict[str, Any], MessageModel]  # noqa: UP007 (a runtime alias: pydantic models in a union)
#: The caller's summarizer: takes the messages being folded (copies), returns the summary (or awaits it).
Summarize = Callable[[list[dict[str, Any]]], Union[Summary, Awaitable[Summary]]]  # noqa: UP007


@dataclass(frozen=True)
class CompactionResult:
    """What `compact_transcript` did: `archived` messages moved to the record log `archive`, replaced by
    `summary` (the message as stored; None when there was nothing to compact and nothing changed)."""

    archived: int
    archive: str
    summary: dict[str, Any] | None


class CompactionAPI(StoreCore):
    """Folding old transcript messages into a record log (`compact_transcript`)."""

    @syncify
    async def compact_transcript(
        self,
        summarize: Summarize,
        keep_last: int = 10,
        *,
        archive: str = DEFAULT_ARCHIVE,
        actor: str | None = None,
        reason: str | None = None,
    ) -> CompactionResult:
        """Move all but the last `keep_last` messages of the transcript to the record log `archive`, in
        order, and put one summary message in their place, written by ``summarize(messages)`` (sync, run
        in a thread, or async). A ``str`` summary is stored as ``{"role": "user", "content": ...}``; the
        summary is validated like an appended message (`InvalidMessage`).

        Saves the handle's unsaved changes first, then commits the compaction at once (audited: op
        ``compact`` on ``messages.json``). `keep_last` rounds up so that a tool exchange (an assistant
        message with ``tool_calls`` and the tool results answering it) is never split. With nothing to
        fold, nothing changes and `summarize` is not called. If `summarize` raises, nothing is compacted.
        Messages other handles append meanwhile survive, after the summary; if another handle compacted
        or rewrote the same messages first, `ConcurrencyError` (this handle stays as it was).
        """
        log = self._check_arguments(summarize, keep_last, archive, actor, reason)
        await self._save_through_facade()
        view = await self._checkout.ready(self)
        committed = committed_form(view.base.messages)
        point = fold_point(committed, keep_last)
        if point == 0:
            return CompactionResult(0, log.name, None)
        folded = committed[:point]
        staged = self._archive_segment(log, folded, actor)  # before summarize: no model call for nothing
        summary = self._summary(await _call(summarize, committed_form(folded)))
        fold = Fold(tuple(fingerprints(folded)), summary)
        event = self._compaction_event(committed, fold, log.name, actor, reason)
        await self._checkout.save_fold(self, fold, staged, event, actor=actor, reason=reason or event["reason"])
        return CompactionResult(point, log.name, committed_form([summary])[0])

    # -- internals ------------------------------------------------------------------------------------

    def _check_arguments(
        self, summarize: object, keep_last: object, archive: object, actor: object, reason: object
    ) -> RecordLog:
        """Refuse bad input before anything is saved or summarized; the archive log, checked writable."""
        if not callable(summarize):
            raise InvalidArgument(f"summarize must be callable, got {type(summarize).__name__}")
        check_int("keep_last", keep_last)
        if not isinstance(archive, str):
            raise InvalidArgument(f"archive must be a str (a record log's path), got {type(archive).__name__}")
        check_note("actor", actor)
        check_note("reason", reason)
        log = RecordLog(self, archive)
        log._admit_segment()  # ReadOnlyPath (naming the log), ReservedPath
        return log

    def _summary(self, produced: object) -> dict[str, Any]:
        """The summary message as stored: text becomes a user message; validated as an append is."""
        if isinstance(produced, str):
            produced = {"role": "user", "content": produced}
        if not isinstance(produced, dict | BaseModel):
            raise InvalidMessage(f"summarize must return a message or a str, got {type(produced).__name__}")
        try:
            return committed_form([admit(produced, validate=self.validate_messages)])[0]
        except InvalidMessage as exc:
            raise InvalidMessage(f"The summary cannot be stored: {exc}") from exc

    def _archive_segment(self, log: RecordLog, folded: list[dict[str, Any]], actor: str | None) -> StagedFile:
        """The archive log's new segment holding the folded messages, one a line, in order."""
        try:
            lines = check_records(folded)
        except InvalidRecord as exc:  # a NaN upstream's transcript allows: a log holds strict JSON
            raise InvalidMessage(f"A message cannot be archived: {exc}") from exc
        path = self._admission.admit(f"{log.name}/{segment_name()}", Access.WRITE)
        why = f"{len(lines)} {ARCHIVE_REASON}"
        options = ChangeOptions(actor or "agent", why, None, False, self.audit)
        return path, encode_segment(lines), options, {COUNT_EXT: len(lines), ARCHIVE_EXT: True}

    @staticmethod
    def _compaction_event(
        committed: list[dict[str, Any]], fold: Fold, archive: str, actor: str | None, reason: str | None
    ) -> dict[str, Any]:
        """The audit event of the compaction: how many messages moved where (and the caller's reason)."""
        why = f"{fold.count} messages moved to log {archive}, replaced by a summary"
        return write_event(
            op="compact",
            path=MESSAGES_PATH,
            old_sha=sha256_bytes(encode_messages(committed)),
            new_sha=sha256_bytes(encode_messages(fold.apply(committed))),
            actor=actor or "agent",
            reason=f"{why}: {reason}" if reason else why,
            ts=utc_timestamp(),
            version_file="",
        )


async def _call(summarize: Summarize, messages: list[dict[str, Any]]) -> object:
    """``summarize(messages)``: awaited if async; a sync one runs in a thread (it may block on a model
    call, or use a store's sync API, which must not run on the loop)."""
    if inspect.iscoroutinefunction(summarize):
        return await summarize(messages)
    result = await asyncio.to_thread(summarize, messages)
    return await result if inspect.isawaitable(result) else result
