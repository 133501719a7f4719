"""Keeping one handle in step with the journal: load, save, refresh and compact.

The store facade owns the transcript list (``store.messages``, public as upstream); this object owns
everything else about the handle's relation to storage, and updates the transcript in place.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from ._commit import Save, checkpoint, project, save
from ._errors import ConcurrencyError, StorageError, StoreAlreadyExists, StoreNotFound
from ._merge import Changes, conflicts, merged_transcript
from ._open import landed_state, latest_state, open_state, state_at
from ._state import LocalState
from ._storage import RemoteStore

Messages = list[dict[str, Any]]
logger = logging.getLogger(__name__)


class Sync:
    """One handle's committed base, and the moves that bring it and storage together."""

    def __init__(self, state: LocalState, remote_path: str | None, resolve_path: Callable[[], str]):
        self.state = state
        self.remote_path = remote_path
        self._resolve_path = resolve_path
        self._remote: RemoteStore | None = None
        #: the committed state is not loaded yet (handles built directly or received as task inputs)
        self.loaded = remote_path is None
        #: for a received store: the exact commit it was sent at; its inline transcript wins, as upstream
        self.pinned_seq: int | None = None
        self.inline_transcript = False
        self.saved_messages: Messages = []
        #: the last save failed after it may have reached its commit point
        self.unresolved: Save | None = None

    def remote(self) -> RemoteStore:
        if self._remote is None:
            if self.remote_path is None:
                self.remote_path = self._resolve_path()
            self._remote = RemoteStore(self.remote_path)
        return self._remote

    def remote_if_known(self) -> RemoteStore | None:
        return self.remote() if self.remote_path is not None else None

    def has_unsaved_changes(self, messages: Messages) -> bool:
        return self.state.has_unsaved_changes() or messages != self.saved_messages

    async def ensure_loaded(self, messages: Messages) -> None:
        """Load the committed state on first use; a store that does not exist yet starts empty."""
        if not self.loaded and not await self.load_if_exists(messages):
            self.loaded = True

    async def load_if_exists(self, messages: Messages) -> bool:
        """`load`, or False if there is no store."""
        try:
            await self.load(messages)
        except StoreNotFound:
            return False
        return True

    async def load(self, messages: Messages) -> None:
        """Load the pinned commit of a received store, else the newest one."""
        remote = self.remote()
        if self.pinned_seq:
            state, imported = await state_at(remote, self.pinned_seq), False
        else:
            state, imported = await open_state(remote)
        self.state.base, self.state.imported, self.loaded = state, imported, True
        if not self.inline_transcript:
            messages[:] = state.messages
            self.saved_messages = list(state.messages)

    async def save(self, messages: Messages, *, exclusive: bool = False) -> None:
        """Commit unsaved changes (callers hold the state's lock)."""
        state = self.state
        job = Save(
            state.base,
            Changes(dict(state.changes.files), list(state.changes.audit)),
            list(messages),
            dict(state.unsaved),
            dict(state.versions),
            uuid.uuid4().hex,
            imported=state.imported,
            exclusive=exclusive,
        )
        try:
            committed = await save(self.remote(), job)
        except (ConcurrencyError, StoreAlreadyExists):
            raise  # decided before anything was committed
        except BaseException:
            self.unresolved = job  # it may have committed before failing; `settle` finds out
            raise
        _adopt_transcript(messages, job.messages, committed.messages)
        self.saved_messages = list(committed.messages)
        await state.committed(committed)

    async def settle(self, messages: Messages) -> None:
        """After a save that failed with an unknown outcome: if its commit landed, adopt that commit and
        forget the changes it saved, so saving again cannot commit them (and their audit events and
        messages) twice. No I/O unless the failed save got as far as trying to commit."""
        job = self.unresolved
        if job is None:
            return
        remote, landed = self.remote(), None
        for seq in job.attempted:
            if (landed := await landed_state(remote, seq, job.commit_id)) is not None:
                break
        if landed is not None:
            self.state.forget_saved(job.changes, job.versions, landed)
            _adopt_transcript(messages, job.messages, landed.messages)
            self.saved_messages = list(landed.messages)
        self.unresolved = None
        if landed is not None and (await latest_state(remote, landed) or landed).seq == landed.seq:
            try:  # nothing newer to overwrite: redo upstream's view, which the failure may have cut short
                await project(remote, job, landed)
            except StorageError as exc:  # the commit stands; upstream's view lags, as after a crash
                logger.warning("Could not update upstream's layout after an earlier save: %s", exc)

    async def refresh(self, messages: Messages) -> list[str]:
        """Move to the newest commit, dropping only unsaved changes that conflict with it."""
        await self.settle(messages)
        state, base = self.state, self.state.base
        latest = await latest_state(self.remote(), base) or base
        gone: set[str] = set()
        while found := set(conflicts(base, latest, state.changes, messages)) - gone:
            gone |= found  # dropping `x` can leave our `x/y` clashing with their file `x`: go again
            state.drop(sorted(found))
        dropped = sorted(gone)
        transcript = merged_transcript(base.messages, latest.messages, messages)
        messages[:] = latest.messages if transcript is None else transcript
        state.base, self.saved_messages = latest, list(latest.messages)
        return dropped

    async def compact(self) -> None:
        """Fold the newest commit into a checkpoint."""
        remote = self.remote()
        latest = await latest_state(remote, self.state.base) or self.state.base
        folded = await checkpoint(remote, latest)
        if latest.seq == self.state.base.seq:  # same state, now based on the checkpoint; never pull newer
            self.state.base = folded

    def payload_seq(self) -> int | None:
        return self.state.base.seq if self.loaded else self.pinned_seq


def _adopt_transcript(messages: Messages, sent: Messages, committed: Messages) -> None:
    """After `sent` was committed as `committed`: the handle's transcript is the committed one plus
    whatever was appended since `sent` was taken (an async caller may append while a save runs)."""
    if messages[: len(sent)] == sent:
        messages[:] = committed + messages[len(sent) :]
