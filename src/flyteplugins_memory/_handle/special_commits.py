"""Commits that are more than a save of the handle's changes: a change of store-level settings, a decision
on a staged memory, a purge, and a fold of the transcript (compaction), each as its typed operation
(`_rules.operations`). `Checkout` mixes them in; each takes the
session's lock, settles an earlier save of unknown outcome, and commits through the session's `_journal.commit`,
so each merges with concurrent writers like a save and is one audited commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._rules.fold import Fold
from .._rules.operations import ChangeSettings, Decision, FoldTranscript, Operation, Purge, Settings
from .._rules.paths import MESSAGES_PATH
from .._rules.state import State
from .._rules.transcript import committed_form, fingerprints, is_rewrite
from .._rules.writes import ChangeOptions
from ..errors import (
    ConcurrencyError,
    InvalidMessage,
    ReadOnlyPath,
    StorageError,
    StoreDeleted,
    StoreFormatTooNew,
)
from .working_copy import WorkingCopy

if TYPE_CHECKING:
    from .._journal.journal_storage import JournalStorage
    from .checkout import TranscriptHolder

#: a write to stage: path, content, how it is recorded, extensions of its file entry (`WorkingCopy.write`)
StagedFile = tuple[str, str | bytes, ChangeOptions, dict[str, Any] | None]
T = TypeVar("T")
#: Attempts of a purge's commit against concurrent purges (see `SpecialCommits.purge_commit`).
PURGE_ATTEMPTS = 5
logger = logging.getLogger(__name__)


class SpecialCommits:
    """Mixed into `Checkout`; relies on its lock, working copy and commit internals, declared here with their
    types and defined there."""

    lock: asyncio.Lock
    working_copy: WorkingCopy

    def remote(self) -> JournalStorage:
        raise NotImplementedError

    async def _ensure_loaded(self, holder: TranscriptHolder) -> None:
        raise NotImplementedError

    async def _settle(self, holder: TranscriptHolder) -> None:
        raise NotImplementedError

    async def _save_pending(self, holder: TranscriptHolder, *, actor: str | None, reason: str | None) -> bool:
        raise NotImplementedError

    async def _refresh(self, holder: TranscriptHolder) -> list[str]:
        raise NotImplementedError

    async def _commit(
        self,
        holder: TranscriptHolder,
        operation: Operation | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        raise NotImplementedError

    async def change_settings(
        self, holder: TranscriptHolder, plan: Callable[[State], Settings], *, actor: str | None, reason: str | None
    ) -> None:
        """Commit a change of store-level settings now, planned from the base it commits on (with the
        handle's unsaved changes, in one commit); `ConcurrencyError` if another commit changed them since."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self._settle(holder)
            await self._commit(holder, ChangeSettings(plan(self.working_copy.base)), actor=actor, reason=reason)

    async def decide(
        self,
        holder: TranscriptHolder,
        change: Callable[[WorkingCopy], Awaitable[T]],
        *,
        actor: str,
        reason: str,
        trusted: bool = False,
    ) -> T:
        """Commit the handle's unsaved changes, move to the newest commit, then make `change` on the clean
        working copy and commit it on its own (a decision: `_api.staged`). If that commit fails, its changes
        are forgotten, so a decision that lost a race leaves nothing behind in the handle."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self._settle(holder)
            await self._save_pending(holder, actor=None, reason=None)  # its actor and reason: its writes
            await self._refresh(holder)
            result = await change(self.working_copy)
            try:
                await self._commit(holder, Decision(trusted), actor=actor, reason=reason)
            except BaseException:
                await self.working_copy.forget_unsaved()
                raise
            return result

    async def purge_commit(
        self,
        holder: TranscriptHolder,
        change: Callable[[WorkingCopy], Awaitable[T]],
        *,
        actor: str,
        reason: str,
        rewrites_transcript: bool = False,
        undo: Callable[[], None] | None = None,
    ) -> tuple[T, int]:
        """A purge's commit (`_journal.purge`): commit the handle's unsaved changes, move to the newest commit, make
        `change` on the clean working copy (the path deleted, its proposals redacted, the ``purge`` audit
        event) and commit it on its own, as commit kind ``purge``. A change that `rewrites_transcript`
        returns its audit event, recorded in place of the generic rewrite event (whatever the handle's
        ``audit``). Returns what `change` returned and the commit.

        If that commit fails, its changes are forgotten (and `undo` undoes what `change` did outside the
        working copy). A commit that lost to a concurrent one (another purge: each counts itself, a
        compare-and-swap) is made again on the newest commit, up to `PURGE_ATTEMPTS` times."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self._settle(holder)
            await self._save_pending(holder, actor=None, reason=None)
            for attempt in range(PURGE_ATTEMPTS):
                await self._refresh(holder)
                result = await change(self.working_copy)
                event = result if rewrites_transcript and isinstance(result, dict) else None
                if event is not None and not (holder.audit and self._rewrites(holder)):
                    self.working_copy.changes.audit.append(event)  # else the commit records it as the rewrite's event
                try:
                    await self._commit(holder, Purge(event), actor=actor, reason=reason)
                except BaseException as exc:
                    await self.working_copy.forget_unsaved()
                    if undo is not None:
                        undo()
                    if isinstance(exc, ConcurrencyError) and attempt + 1 < PURGE_ATTEMPTS:
                        continue
                    raise
                return result, self.working_copy.base.seq
            raise AssertionError("unreachable")  # every attempt returns or raises

    def _rewrites(self, holder: TranscriptHolder) -> bool:
        """Whether the handle's transcript rewrites its base's (then the commit records a rewrite event)."""
        return is_rewrite(fingerprints(self.working_copy.base.messages), fingerprints(committed_form(holder.messages)))

    async def save_fold(
        self,
        holder: TranscriptHolder,
        fold: Fold,
        archive: StagedFile,
        event: dict[str, Any],
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Commit `fold` of the transcript with `archive` (a file holding what it folds), `event` (its
        audit event) and the handle's other unsaved changes, as one commit that merges with concurrent
        appends. `ConcurrencyError` if the folded messages are gone (from the handle's transcript or, at
        commit, from the newest one); then the handle is left as it was."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self._settle(holder)
            base = self.working_copy.base.messages
            if not fold.applies_to(base) or fingerprints(holder.messages[: len(base)]) != fingerprints(base):
                raise ConcurrencyError(MESSAGES_PATH, "", "", paths=(MESSAGES_PATH,))
            before = list(holder.messages)
            await self.working_copy.write(*archive)
            holder.messages[:] = fold.apply(holder.messages)
            try:
                await self._commit(holder, FoldTranscript(fold, event), actor=actor, reason=reason)
            except (ConcurrencyError, StoreFormatTooNew, StoreDeleted, InvalidMessage, ReadOnlyPath):
                holder.messages[: 1 + len(before) - fold.count] = before  # appends made meanwhile stay after
                self.working_copy.drop([archive[0]])
                await self.working_copy.forget_local([archive[0]])
                await self._remove_stray(archive[0])
                raise

    async def _remove_stray(self, path: str) -> None:
        """Remove a file a failed save created at its own path before its commit point (`_journal.inplace`), so
        upstream does not list it; only for a path no other writer can choose (a log segment's)."""
        try:
            await self.remote().remove_many([path])
        except StorageError as exc:
            logger.warning("Could not remove %s, left by a save that did not commit: %s", path, exc)
