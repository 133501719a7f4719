"""One handle's session with its store: how it began, its working copy, and the moves between the two.

`MemoryStore` (the facade) talks to this object only. A session begins one of four ways (`Lifecycle`):
built directly (``new``: it loads the committed state on first use, if there is one), received as a task
input (pinned to the commit it was sent at), opened (`open`) or created (`create`, exclusive). It owns the
handle's working copy (`_rules.state.WorkingCopy`: committed base, unsaved changes, working root), the location
of the store, and the one lock that every read, write and save of the handle takes. Commits that are
more than a save (settings, decisions, transcript folds) are mixed in from `_handle.special_commits`.

The facade owns the transcript list (``store.messages``, public as upstream) and passes itself in as the
`TranscriptHolder`; transcripts are compared by content (see `_rules.transcript`), and the handle's messages
and a committed state never share an object.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import pathlib
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from .._journal.commit import SaveJob, checkpoint, run_save, update_upstream_layout
from .._journal.generations import at_generation, generation_to_create, newest_generation
from .._journal.journal_storage import JournalStorage
from .._journal.opening import landed_state, latest_state, open_state, state_at
from .._rules.codecs import MemoryMeta
from .._rules.journal_objects import same_write
from .._rules.limits import check_paths_fit, written_paths
from .._rules.merge import conflicts, merged_transcript
from .._rules.operations import Create, Operation, Save, Settings, settings_of, transcript_event
from .._rules.paths import MESSAGES_PATH
from .._rules.search_index import Corpus, Updates
from .._rules.state import State
from .._rules.transcript import (
    adopt_committed,
    after_committed,
    as_committed,
    committed_form,
    fingerprints,
    fresh_copy,
    is_rewrite,
    rewrite_event,
)
from .._rules.writes import ChangeOptions
from ..errors import (
    ConcurrencyError,
    InvalidMessage,
    StorageError,
    StoreAlreadyExists,
    StoreDeleted,
    StoreFormatTooNew,
    StoreNotFound,
)
from .search_cache import SearchCache
from .special_commits import SpecialCommits
from .working_copy import WorkingCopy

Messages = list[dict[str, Any]]
T = TypeVar("T")
logger = logging.getLogger(__name__)


class TranscriptHolder(Protocol):
    """The store facade, as seen from here: the public transcript list and the audit switch."""

    messages: Messages
    audit: bool


class Lifecycle(enum.Enum):
    """How a handle began; it decides what its first use loads."""

    #: built directly: loads the newest committed state on first use, or starts empty if there is none
    NEW = "new"
    #: received as a task input: loads exactly the commit it was sent at (its inline transcript wins)
    RECEIVED = "received"
    #: opened at the newest committed state (``get_or_create`` of an existing store)
    OPENED = "opened"
    #: created by this handle (``create``, or ``get_or_create`` of a missing store)
    CREATED = "created"


class Checkout(SpecialCommits):
    """One handle's working copy and its relation to the store's journal."""

    def __init__(self, root: pathlib.Path, *, private: bool, remote_path: str | None, resolve: Callable[[], str]):
        self.working_copy = WorkingCopy(root, private=private)
        #: serializes every read, write and save of the handle (all run on the one syncify loop)
        self.lock = asyncio.Lock()
        self.lifecycle = Lifecycle.NEW
        #: the search index of the working copy, in memory (`_handle.search_cache`)
        self.search = SearchCache()
        self._remote_path = remote_path
        self._resolve_path = resolve
        self._remote: JournalStorage | None = None
        #: which of the key's stores this handle names (`_journal.generations`): None until its first load finds
        #: out (0 until then); fixed by that load, or by the payload of a received store
        self.generation: int | None = None
        #: the committed state is loaded (a handle with no location yet has nothing to load)
        self.loaded = remote_path is None
        #: for a received store: the exact commit it was sent at
        self._pinned_seq: int | None = None
        #: how many leading messages of the handle came from its working root's messages.json
        self._root_transcript = 0
        #: the content of the transcript as last committed or received (see `_rules.transcript.fingerprints`)
        self._saved_transcript: list[str] = []
        #: the last save failed after it may have reached its commit point
        self._unresolved: SaveJob | None = None
        #: saves that committed but could not bring upstream's layout up to date; the next save does
        self._unprojected: list[SaveJob] = []

    # -- how a handle begins ------------------------------------------------------------------------------

    def adopt_working_root(self, holder: TranscriptHolder) -> None:
        """A caller-chosen root's files become unsaved changes, and its ``messages.json`` the transcript
        (unless the handle was given messages): a snapshot, reconciled with the committed one on load."""
        transcript = self.working_copy.adopt_working_root()
        if not holder.messages:
            holder.messages, self._root_transcript = transcript, len(transcript)

    def receive(self, holder: TranscriptHolder, seq: int | None) -> None:
        """This handle is a task input sent at commit `seq` (None: the sender never loaded its store;
        its messages are appends, kept after the committed transcript when this loads)."""
        self.lifecycle = Lifecycle.RECEIVED
        self._pinned_seq = seq
        if seq is not None:
            self._saved_transcript = fingerprints(holder.messages)

    async def open(self, holder: TranscriptHolder) -> bool:
        """Load the newest committed state; False (and nothing loaded) if the store does not exist."""
        async with self.lock:
            if not await self._load_if_exists(holder):
                return False
            self.lifecycle = Lifecycle.OPENED
            return True

    async def create(self, holder: TranscriptHolder, settings: Settings | None = None) -> None:
        """Create the store: the first commit, exclusive (`StoreAlreadyExists` if another got there),
        holding `settings` (store-level extensions and the audit events of setting them). A deleted key
        takes a new generation (`_journal.generations`)."""
        async with self.lock:
            remote, self.generation = await generation_to_create(self.remote(), self.generation or 0)
            self._remote = remote
            if await self.remote().exists(MESSAGES_PATH):  # also refuses stores that upstream created
                raise StoreAlreadyExists(f"MemoryStore already exists at {self.remote().uri}")
            self.loaded = True
            await self._commit(holder, Create(settings))
            self.lifecycle = Lifecycle.CREATED

    # -- where the store lives --------------------------------------------------------------------------

    @property
    def remote_path(self) -> str | None:
        return self._remote_path

    @remote_path.setter
    def remote_path(self, value: str | None) -> None:
        self._remote_path, self._remote = value, None

    def remote(self) -> JournalStorage:
        if self._remote is None:
            if self._remote_path is None:
                self._remote_path = self._resolve_path()
            remote = JournalStorage.at(self._remote_path)
            self._remote = at_generation(remote, self.generation) if self.generation else remote
        return self._remote

    def remote_if_known(self) -> JournalStorage | None:
        return self.remote() if self._remote_path is not None else None

    def payload_seq(self) -> int | None:
        """The commit a payload of this handle names (see `_api.payload`)."""
        return self.working_copy.base.seq if self.loaded else self._pinned_seq

    # -- reads and writes (each under the lock; fetching committed content happens outside it) -------------

    async def ready(self, holder: TranscriptHolder) -> WorkingCopy:
        """The working copy, with the committed state loaded on first use."""
        async with self.lock:
            await self._ensure_loaded(holder)
            return self.working_copy

    async def look(
        self,
        holder: TranscriptHolder,
        question: Callable[[WorkingCopy], T],
        *,
        paths: Iterable[str] = (),
        under: str | None = None,
    ) -> T:
        """Answer `question` about the working copy, after loading the parts of its file index that looking
        at `paths` and listing directory `under` need. Under the lock, so a `refresh` cannot swap in a base
        whose parts are not loaded between loading and looking."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self.working_copy.need(paths)
            if under is not None:
                await self.working_copy.need_under(under)
            return question(self.working_copy)

    async def read(self, holder: TranscriptHolder, rel: str) -> bytes | None:
        """Contents of `rel`, or None if there is no such file (committed content fetched on first read,
        concurrently with other reads: it is addressed by its sha256 and verified)."""
        async with self.lock:
            await self._ensure_loaded(holder)
            found = await self.working_copy.local_bytes(rel)
        if not isinstance(found, tuple):
            return found
        return await self.working_copy.fetch_committed(self.remote_if_known(), *found)

    async def write(
        self,
        holder: TranscriptHolder,
        rel: str,
        content: str | bytes,
        options: ChangeOptions,
        ext: dict[str, Any] | None = None,
    ) -> MemoryMeta:
        async with self.lock:
            await self._ensure_loaded(holder)
            return await self.working_copy.write(rel, content, options, ext)

    async def delete(self, holder: TranscriptHolder, rel: str, options: ChangeOptions) -> bool:
        async with self.lock:
            await self._ensure_loaded(holder)
            await self.working_copy.check_inside_root(rel)
            return await self.working_copy.delete(rel, options)

    async def delete_under(
        self, holder: TranscriptHolder, prefix: str, options: ChangeOptions, admit: Callable[[str], object]
    ) -> list[str]:
        """Delete every file under directory `prefix`, each passed through `admit` before any is deleted
        (all or none); one lock, so no write of this handle lands between the listing and the deletes."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self.working_copy.check_inside_root(prefix)
            await self.working_copy.need_under(prefix)
            paths = self.working_copy.paths(prefix)
            for path in paths:
                admit(path)
            for path in paths:
                await self.working_copy.delete(path, options)
            return paths

    async def searching(self, holder: TranscriptHolder) -> tuple[Corpus, Updates]:
        """The base's search corpus (loaded on first use) and docs for the unsaved changes over it."""
        async with self.lock:
            await self._ensure_loaded(holder)
            corpus = await self.search.corpus(self.remote_if_known(), self.working_copy)
            return corpus, self.search.shadow(self.working_copy)

    def redact_held(self, holder: TranscriptHolder, redact: Callable[[list[Any]], list[Any] | None]) -> None:
        """A message purge rewrote stored transcripts: the committed transcript this handle holds (its
        base, and the same messages in `holder`) takes the redaction too, so that its next save neither
        writes the old text back nor sees a change it did not make."""
        held = self.working_copy.base
        # the checkpoint this handle loaded too: a refresh onto a later commit of the same checkpoint and
        # purge count reuses it (`_journal.log_reads.state_from`) instead of reading its rewritten copy
        if (checkpoint := redact(list(held.checkpoint.messages))) is not None:
            held.checkpoint = held.checkpoint.model_copy(update={"messages": checkpoint})
        base = redact(list(held.messages))
        if base is None:
            return
        unsaved = self.has_unsaved_changes(holder)
        self.working_copy.base.messages = as_committed(base)
        holder.messages[:] = redact(list(holder.messages)) or holder.messages
        if not unsaved:
            self._saved_transcript = fingerprints(holder.messages)

    def has_unsaved_changes(self, holder: TranscriptHolder) -> bool:
        if self.working_copy.has_unsaved_changes():
            return True
        try:
            return fingerprints(holder.messages) != self._saved_transcript
        except InvalidMessage:
            return True  # a message that cannot be saved is certainly not saved

    def unsaved_paths(self, holder: TranscriptHolder) -> list[str]:
        """The files with unsaved changes, and ``messages.json`` when the transcript has some."""
        paths = list(self.working_copy.changes.files)
        try:
            transcript = fingerprints(holder.messages) != self._saved_transcript
        except InvalidMessage:
            transcript = True
        return [*paths, MESSAGES_PATH] if transcript else paths

    # -- save, refresh, compact ---------------------------------------------------------------------------

    async def save(self, holder: TranscriptHolder, *, actor: str | None = None, reason: str | None = None) -> None:
        """Commit the unsaved changes (or, with none, only finish what earlier saves owe upstream's view);
        `actor` and `reason` go into the commit info (None: taken from the writes)."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self._settle(holder)
            try:
                saved = await self._save_pending(holder, actor=actor, reason=reason)
            except StoreDeleted:
                if not await self._take_new_generation():
                    raise
                saved = await self._save_pending(holder, actor=actor, reason=reason)
            if not saved:
                await self._repair_projections()

    async def _take_new_generation(self) -> bool:
        """A handle that never loaded a store (built directly, or found its key deleted on first use) saves
        into whatever store its key has: after a deletion, a new generation, as ``get_or_create`` would
        (`_journal.generations`). False for a handle of a deleted store, which must never commit into a new one."""
        if self.generation is not None or self.working_copy.base.seq != 0:
            return False
        self._remote, self.generation = await generation_to_create(self.remote())
        return True

    async def revert(self, holder: TranscriptHolder, paths: list[str] | None) -> list[str]:
        """Drop the unsaved changes of `paths` (every changed file when None): the paths dropped."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self._settle(holder)
            changed = self.working_copy.changes.files
            chosen = sorted(changed if paths is None else set(paths) & set(changed))
            self.working_copy.drop(chosen)
            await self.working_copy.forget_local(chosen)
            return chosen

    async def refresh(self, holder: TranscriptHolder) -> list[str]:
        """Move to the newest commit, dropping only unsaved changes that conflict with it."""
        async with self.lock:
            await self._ensure_loaded(holder)
            await self._settle(holder)
            return await self._refresh(holder)

    async def _refresh(self, holder: TranscriptHolder) -> list[str]:
        """The body of `refresh` (callers hold the lock)."""
        view, base = self.working_copy, self.working_copy.base
        latest = await latest_state(self.remote(), base) or base
        await base.files.need(view.changes.files)
        await latest.files.need(view.changes.files)
        messages = committed_form(holder.messages)
        gone: set[str] = set()
        while found := set(conflicts(base, latest, view.changes, messages)) - gone:
            gone |= found  # dropping `x` can leave our `x/y` clashing with their file `x`: go again
            view.drop(sorted(found))
        dropped = sorted(gone)
        await view.forget_local([p for p in dropped if p != MESSAGES_PATH and not p.startswith("/")])
        transcript = merged_transcript(base.messages, latest.messages, messages)
        holder.messages[:] = fresh_copy(latest.messages if transcript is None else transcript)
        view.base, self._saved_transcript = latest, fingerprints(latest.messages)
        await view.forget_stale(latest)
        return dropped

    async def checkpoint(self) -> None:
        """Fold the newest commit into a checkpoint."""
        async with self.lock:
            remote = self.remote()
            latest = await latest_state(remote, self.working_copy.base) or self.working_copy.base
            folded = await checkpoint(remote, latest)
            if latest.seq == self.working_copy.base.seq:  # same state, now based on the checkpoint; never pull newer
                self.working_copy.base = folded

    # -- internals (callers hold the lock) -----------------------------------------------------------------

    async def _save_pending(self, holder: TranscriptHolder, *, actor: str | None, reason: str | None) -> bool:
        """Commit the handle's unsaved changes, if it has any (or its base owes a save); whether it did."""
        if not (self.has_unsaved_changes(holder) or self.working_copy.base.needs_save):
            return False
        # paths written before the store's location was known are checked against it now
        check_paths_fit(written_paths(self.working_copy.changes.files), self.remote().uri)
        await self._commit(holder, actor=actor, reason=reason)
        return True

    async def _ensure_loaded(self, holder: TranscriptHolder) -> None:
        """Load the committed state on first use; a store that does not exist yet starts empty, and so
        does one whose key was deleted, for a handle that did not name a store yet (built directly, or
        received from a sender that never loaded): its first save takes the key's next generation."""
        unnamed = self.generation is None and self.lifecycle in (Lifecycle.NEW, Lifecycle.RECEIVED)
        if not self.loaded and not await self._load_if_exists(holder, deleted_is_missing=unnamed):
            self.loaded = True

    async def _load_if_exists(self, holder: TranscriptHolder, *, deleted_is_missing: bool = False) -> bool:
        try:
            await self._load(holder)
        except StoreDeleted:
            if deleted_is_missing and self.generation is None:
                return False
            raise  # `open`, or a handle of the deleted store: never one to start afresh (`_journal.store_deletion`)
        except StoreNotFound:
            return False
        return True

    async def _load(self, holder: TranscriptHolder) -> None:
        """Load the pinned commit of a received store, else the newest one. Messages the handle held
        before (appended before its first load) stay, after the committed transcript."""
        remote = self.remote()
        if self._pinned_seq:
            state, imported = await state_at(remote, self._pinned_seq), False
        else:
            state, imported = await self._open_newest(remote)
        self.working_copy.base, self.working_copy.imported, self.loaded = state, imported, True
        if self._pinned_seq is None:  # else the received inline transcript wins, as upstream
            holder.messages = after_committed(state.messages, holder.messages, self._root_transcript)
            self._root_transcript = 0
            self._saved_transcript = fingerprints(state.messages)

    async def _open_newest(self, remote: JournalStorage) -> tuple[State, bool]:
        """The newest state of the key's newest store: a handle that does not know its generation yet
        follows a deleted one to the store its key took since (`_journal.generations`)."""
        try:
            state, imported = await open_state(remote)
        except StoreDeleted:
            if self.generation is not None:
                raise
            newest, generation, _ = await newest_generation(remote)
            if generation == 0:
                raise
            self._remote = newest
            try:
                state, imported = await open_state(newest)
            except StoreDeleted:  # deleted too: the handle stays unresolved (a later create starts the next)
                self._remote = None
                raise
            except StoreNotFound:  # claimed, but its creator has not committed yet: a first save goes there
                self.generation = generation
                raise
            self.generation = generation
        if self.generation is None:
            self.generation = 0
        return state, imported

    async def _commit(
        self,
        holder: TranscriptHolder,
        operation: Operation | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Commit the handle's unsaved changes and transcript as `operation` (a plain `Save` by default)."""
        operation = operation or Save()
        view = self.working_copy
        settings, event = settings_of(operation), transcript_event(operation)
        await self._repair_projections()
        messages = as_committed(committed_form(holder.messages))  # an unencodable message raises before any I/O
        changes = view.changes.copy()
        if settings is not None:
            changes.ext.update(settings.ext)
            changes.audit.extend(settings.audit)  # always: audit=False is about file writes
        if holder.audit and is_rewrite(fingerprints(view.base.messages), fingerprints(messages)):
            changes.audit.append(event or rewrite_event(view.base.messages, messages))
        job = SaveJob(
            view.base,
            changes,
            messages,
            dict(view.unsaved),
            dict(view.versions),
            uuid.uuid4().hex,
            imported=view.imported,
            operation=operation,
            actor=actor,
            reason=reason,
            search_repairs=self.search.repairs_for(view.base),
            held=dict(view.held),
        )
        try:
            committed = await run_save(self.remote(), job)
        except (ConcurrencyError, StoreAlreadyExists, StoreFormatTooNew, StoreDeleted):
            raise  # decided before anything was committed
        except BaseException:
            self._unresolved = job  # it may have committed before failing; `_settle` finds out
            raise
        if job.projection_failed:
            self._unprojected.append(job)
        adopt_committed(holder.messages, job.messages, committed.messages)
        self._saved_transcript = fingerprints(committed.messages)
        await view.committed(committed)
        await view.forget_stale(committed)  # rebased onto other writers' commits

    async def _settle(self, holder: TranscriptHolder) -> None:
        """After a save that failed with an unknown outcome: if its commit landed, adopt that commit and
        forget the changes it saved, so saving again cannot commit them (and their audit events and
        messages) twice. No I/O unless the failed save got as far as trying to commit."""
        job = self._unresolved
        if job is None:
            return
        remote, landed = self.remote(), None
        for seq in job.attempted:
            if (landed := await landed_state(remote, seq, job.commit_id)) is not None:
                break
        if landed is not None:
            self.working_copy.forget_saved(job.changes, job.versions, landed)
            adopt_committed(holder.messages, job.messages, landed.messages)
            self._saved_transcript = fingerprints(landed.messages)
            self._unprojected.append(job)  # the failure may have cut its projection short
        self._unresolved = None

    async def _repair_projections(self) -> None:
        """Bring upstream's layout up to date for saves that committed without finishing it: each path
        they changed is projected as the newest commit has it, unless a newer save changed it since (that
        save projected it). Best effort: what still fails stays owed."""
        if not self._unprojected:
            return
        remote = self.remote()
        latest = await latest_state(remote, self.working_copy.base) or self.working_copy.base
        owed, self._unprojected = self._unprojected, []
        for job in owed:
            try:
                await latest.files.need(job.changes.files)
                await update_upstream_layout(remote, _still_current(job, latest), latest)
            except StorageError as exc:
                logger.warning("Upstream's layout still lags after an earlier save: %s", exc)
                self._unprojected.append(job)


def _still_current(job: SaveJob, latest: State) -> SaveJob:
    """`job` narrowed to the paths whose newest committed content is still the one it wrote or deleted."""
    files = {p: r for p, r in job.changes.files.items() if same_write(latest.files.get(p), r)}
    changes = job.changes.copy()
    changes.files = files
    return SaveJob(job.base, changes, job.messages, job.contents, job.versions, job.commit_id)
