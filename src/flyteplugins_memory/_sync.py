"""Keeping one handle in step with the journal: load, save, refresh and compact.

The store facade owns the transcript list (``store.messages``, public as upstream); this object owns
everything else about the handle's relation to storage. It compares transcripts by content (see
`_transcript`) and never lets the handle's messages and a committed state share an object: a load gives
the handle fresh copies (and a new list, so a caller's ``messages=`` list is never changed by it), a save
commits copies.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from ._commit import Save, checkpoint, project, save
from ._errors import (
    ConcurrencyError,
    InvalidMessage,
    StorageError,
    StoreAlreadyExists,
    StoreFormatTooNew,
    StoreNotFound,
)
from ._journal import State, same_write
from ._merge import conflicts, merged_transcript
from ._open import landed_state, latest_state, open_state, state_at
from ._paths import MESSAGES_PATH
from ._records import encode_messages, sha256_bytes, write_event
from ._state import LocalState
from ._storage import RemoteStore
from ._transcript import committed_form, fingerprints, fresh_copy, is_rewrite

Messages = list[dict[str, Any]]
logger = logging.getLogger(__name__)


class TranscriptHolder(Protocol):
    """The store facade, as seen from here: the public transcript list and the audit switch."""

    messages: Messages
    audit: bool


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
        #: how many leading messages of the handle came from its working root's messages.json
        self.root_transcript = 0
        #: the content of the transcript as last committed or received (see `_transcript.fingerprints`)
        self.saved_transcript: list[str] = []
        #: the last save failed after it may have reached its commit point
        self.unresolved: Save | None = None
        #: saves that committed but could not bring upstream's layout up to date; the next save does
        self.unprojected: list[Save] = []

    def remote(self) -> RemoteStore:
        if self._remote is None:
            if self.remote_path is None:
                self.remote_path = self._resolve_path()
            self._remote = RemoteStore(self.remote_path)
        return self._remote

    def remote_if_known(self) -> RemoteStore | None:
        return self.remote() if self.remote_path is not None else None

    def has_unsaved_changes(self, holder: TranscriptHolder) -> bool:
        if self.state.has_unsaved_changes():
            return True
        try:
            return fingerprints(holder.messages) != self.saved_transcript
        except InvalidMessage:
            return True  # a message that cannot be saved is certainly not saved

    async def ensure_loaded(self, holder: TranscriptHolder) -> None:
        """Load the committed state on first use; a store that does not exist yet starts empty."""
        if not self.loaded and not await self.load_if_exists(holder):
            self.loaded = True

    async def load_if_exists(self, holder: TranscriptHolder) -> bool:
        """`load`, or False if there is no store."""
        try:
            await self.load(holder)
        except StoreNotFound:
            return False
        return True

    async def load(self, holder: TranscriptHolder) -> None:
        """Load the pinned commit of a received store, else the newest one. Messages the handle held
        before (appended before its first load) stay, after the committed transcript."""
        remote = self.remote()
        if self.pinned_seq:
            state, imported = await state_at(remote, self.pinned_seq), False
        else:
            state, imported = await open_state(remote)
        self.state.base, self.state.imported, self.loaded = state, imported, True
        if not self.inline_transcript:
            holder.messages = _after_committed(state.messages, holder.messages, self.root_transcript)
            self.root_transcript = 0
            self.saved_transcript = fingerprints(state.messages)

    async def save(
        self, holder: TranscriptHolder, *, exclusive: bool = False, actor: str | None = None, reason: str | None = None
    ) -> None:
        """Commit unsaved changes (callers hold the state's lock); `actor` and `reason` go into the commit
        info (None: taken from the writes)."""
        state = self.state
        await self.repair_projections()
        messages = committed_form(holder.messages)  # an unencodable message raises before any I/O
        changes = state.changes.copy()
        if holder.audit and is_rewrite(fingerprints(state.base.messages), fingerprints(messages)):
            changes.audit.append(_rewrite_event(state.base.messages, messages))
        job = Save(
            state.base,
            changes,
            messages,
            dict(state.unsaved),
            dict(state.versions),
            uuid.uuid4().hex,
            imported=state.imported,
            exclusive=exclusive,
            actor=actor,
            reason=reason,
        )
        try:
            committed = await save(self.remote(), job)
        except (ConcurrencyError, StoreAlreadyExists, StoreFormatTooNew):
            raise  # decided before anything was committed
        except BaseException:
            self.unresolved = job  # it may have committed before failing; `settle` finds out
            raise
        if job.projection_failed:
            self.unprojected.append(job)
        _adopt_transcript(holder, job.messages, committed.messages)
        self.saved_transcript = fingerprints(committed.messages)
        await state.committed(committed)
        await state.forget_stale(committed)  # rebased onto other writers' commits

    async def settle(self, holder: TranscriptHolder) -> None:
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
            _adopt_transcript(holder, job.messages, landed.messages)
            self.saved_transcript = fingerprints(landed.messages)
            self.unprojected.append(job)  # the failure may have cut its projection short
        self.unresolved = None

    async def repair_projections(self) -> None:
        """Bring upstream's layout up to date for saves that committed without finishing it: each path
        they changed is projected as the newest commit has it, unless a newer save changed it since (that
        save projected it). Best effort: what still fails stays owed."""
        if not self.unprojected:
            return
        remote = self.remote()
        latest = await latest_state(remote, self.state.base) or self.state.base
        owed, self.unprojected = self.unprojected, []
        for job in owed:
            try:
                await project(remote, _still_current(job, latest), latest)
            except StorageError as exc:
                logger.warning("Upstream's layout still lags after an earlier save: %s", exc)
                self.unprojected.append(job)

    async def refresh(self, holder: TranscriptHolder) -> list[str]:
        """Move to the newest commit, dropping only unsaved changes that conflict with it."""
        await self.settle(holder)
        state, base = self.state, self.state.base
        latest = await latest_state(self.remote(), base) or base
        messages = committed_form(holder.messages)
        gone: set[str] = set()
        while found := set(conflicts(base, latest, state.changes, messages)) - gone:
            gone |= found  # dropping `x` can leave our `x/y` clashing with their file `x`: go again
            state.drop(sorted(found))
        dropped = sorted(gone)
        await state.forget_local([p for p in dropped if p != MESSAGES_PATH])
        transcript = merged_transcript(base.messages, latest.messages, messages)
        holder.messages[:] = fresh_copy(latest.messages if transcript is None else transcript)
        state.base, self.saved_transcript = latest, fingerprints(latest.messages)
        await state.forget_stale(latest)
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


def _after_committed(committed: Messages, pending: Messages, from_root: int) -> Messages:
    """A new transcript list: the committed messages (fresh copies), then those the handle held before
    its first load. Appended ones always count; the first `from_root` came from a working root's
    ``messages.json``, a snapshot of this store's transcript flushed earlier: only what it holds beyond
    the committed transcript counts (nothing, if it is a stale prefix of it)."""
    done, snapshot = fingerprints(committed), fingerprints(pending[:from_root])
    if snapshot == done[: len(snapshot)]:
        kept: Messages = []  # a stale (or exact) snapshot of the committed transcript
    elif snapshot[: len(done)] == done:
        kept = list(pending[len(done) : from_root])  # the snapshot went further: those are appends
    else:
        kept = list(pending[:from_root])  # a different history: keep it, after the committed one
    return fresh_copy(committed) + kept + list(pending[from_root:])


def _adopt_transcript(holder: TranscriptHolder, sent: Messages, committed: Messages) -> None:
    """After `sent` was committed as `committed` (which holds concurrent writers' appends too): the
    handle's transcript is the committed one plus whatever it appended since `sent` was taken (an async
    caller may append while a save runs). Left alone when nothing differs, or if it was edited meanwhile."""
    sent_content = fingerprints(sent)
    current = holder.messages
    if fingerprints(current[: len(sent)]) != sent_content or fingerprints(committed) == sent_content:
        return
    current[:] = fresh_copy(committed) + current[len(sent) :]


def _rewrite_event(before: Messages, after: Messages) -> dict[str, Any]:
    """The audit event of a save that changed committed messages (an edit in place, a redaction)."""
    return write_event(
        op="rewrite",
        path=MESSAGES_PATH,
        old_sha=sha256_bytes(encode_messages(before)),
        new_sha=sha256_bytes(encode_messages(after)),
        actor="agent",
        reason="transcript history changed",
        ts=datetime.now(UTC).isoformat(timespec="seconds"),
        version_file="",
    )


def _still_current(job: Save, latest: State) -> Save:
    """`job` narrowed to the paths whose newest committed content is still the one it wrote or deleted."""
    files = {p: r for p, r in job.changes.files.items() if same_write(latest.files.get(p), r)}
    changes = job.changes.copy()
    changes.files = files
    return Save(job.base, changes, job.messages, job.contents, job.versions, job.commit_id)
