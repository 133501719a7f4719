"""`MemoryStore`: a keyed agent memory (transcript + path-addressed files), drop-in for upstream's.

This module is the facade. The handle's identity, settings and collaborators are `_api.core.StoreCore`'s;
the API comes in families, one per thing a user does (`_api.files`, `_api.transcript`, `_api.history`,
`_api.staged`, `_api.search`, `_api.upkeep`, `_api.archive`, `_api.keyed`), each a subclass of the core;
record logs, sessions, scopes and time travel are objects behind accessors (`records`, `session`,
`scope`, `at`). Defined here are what upstream's class declares as ``flyte.syncify`` wrappers (so a
type checker checks them as overrides of upstream's: `_api.core` says why), the accessors, and what makes
a handle a value of upstream's type (identity, the working root, task I/O), and `report` (a page reads
through this facade's public API only). Every I/O method is ``async
def`` wrapped by `syncify` (``f()`` and ``f.aio()``).

Follow one call: ``write_text`` below admits the path (`_rules.admission`), builds the change's options
and hands it to the handle's `_handle.checkout.Checkout`, which writes it into the working copy
(`_handle.working_copy`); ``save`` commits the working copy through the journal (`_journal.commit`),
which writes the objects through the storage seam (`storage`).

The class subclasses upstream's ``flyte.ai.agents.MemoryStore`` so that everything accepting upstream's
(its ``Agent`` checks ``isinstance``) accepts ours; it keeps its own ``__init__`` (the core's), identity
equality and hashing, and makes upstream's private helpers that would act on the working root behind the
journal's back unreachable (`_base.compat.unavailable`).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Self

from flyte.ai.agents import MemoryStore as UpstreamMemoryStore
from flyte.io import Dir

from .._base.compat import unavailable
from .._base.syncify import syncify
from .._journal import gc as _gc
from .._journal import versions as _versions
from .._rules.admission import Access
from .._rules.codecs import MemoryMeta
from .._rules.commit_info import check_note
from .._rules.metadata import Scalar, check_metadata
from .._rules.record_codec import check_not_segment
from .._rules.ttl import check_ttl, expiry_ext
from .._rules.writes import text_content
from ..errors import CorruptStore
from . import payload as _payload
from .archive import ArchiveAPI
from .conversations import Conversation, conversation_log
from .files import FilesAPI
from .files.reads import sha_of
from .history import HistoryAPI
from .keyed import KeyedAPI, create_store, handle_options, open_or_create_store
from .records import RecordLog
from .report import build as _report
from .report.build import Limits
from .scopes import ScopedStore
from .search import SearchAPI
from .staged import StagedAPI
from .transcript import TranscriptAPI
from .upkeep import UpkeepAPI


class MemoryStore(
    FilesAPI,
    TranscriptAPI,
    HistoryAPI,
    StagedAPI,
    SearchAPI,
    UpkeepAPI,
    ArchiveAPI,
    KeyedAPI,
    UpstreamMemoryStore,
):
    """Conversation transcript plus path-addressed files, persisted under a deterministic keyed path.

    Obtain one with `create` or `get_or_create`; `save` commits local changes atomically, merging with
    concurrent saves of the same key. Every I/O method runs as ``store.f(...)`` or ``await store.f.aio(...)``.

    Args:
        key: The store's key, a single path segment.
        messages: Initial transcript (mutate through `append` / `extend`).
        root: Local working directory; a fresh temp dir (removed on garbage collection) when omitted.
            An existing directory's files become unsaved changes, and its ``messages.json`` is loaded
            unless `messages` is given.
        remote_path: Where the store lives; resolved from `key` and the Flyte context when omitted.
        read_only_prefixes: Path prefixes that writes and deletes through this handle may not target
            (upstream's per-handle setting). The store's persisted ones (`persisted_read_only_prefixes`,
            set by `create` and `set_read_only_prefixes`) apply to every handle as well.
        audit: Record every write and delete in the audit trail.
        keep_versions: Snapshot every write (and a tombstone for every delete) under ``versions/``.
        validate_messages: Check every message `append`/`extend` (and `messages`) take against the typed
            transcript's models (`Message`); off by default, as upstream, which takes any dict.
        trusted: A trusted handle may do what the store's read-only prefixes otherwise forbid every handle
            (accept a proposal into them, change them, delete the store). It is a property of the code
            that opens the handle: it does not travel with the store to another task.
    """

    # upstream's helpers that bypass the journal; the ones with a meaning here are redefined below
    __post_init__ = unavailable()
    _meta_path = unavailable()
    _versions_dir = unavailable()
    _audit_path = unavailable()
    _append_audit = unavailable()
    _load_from_dir = unavailable()

    @property
    def remote_path(self) -> str | None:  # pyright: ignore[reportIncompatibleVariableOverride]
        """Where the store lives (resolved from `key` and the Flyte context on first save if unset)."""
        return self._checkout.remote_path

    @remote_path.setter
    def remote_path(self, value: str | None) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        self._checkout.remote_path = value

    def __repr__(self) -> str:
        return f"MemoryStore(key={self.key!r}, remote_path={self.remote_path!r})"

    # a handle is an object with a working root and unsaved changes, not a value: identity, as before
    # subclassing upstream's dataclass (whose generated __eq__ compares fields and drops __hash__)
    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__  # pyright: ignore[reportAssignmentType]

    @property
    def _needs_remote_hydration(self) -> bool:
        """Upstream's flag: the committed state is not loaded yet (loaded on first use)."""
        return not self._checkout.loaded

    @property
    def root(self) -> pathlib.Path:  # type: ignore[override]
        """The local working directory, in upstream's layout: it holds every file, sidecar, version
        snapshot and audit line this handle wrote (and every file it read) by the time you read this
        attribute; ``prefetch()`` adds the rest of the store."""
        self._checkout.working_copy.mirror.settle_blocking()
        return self._root_path

    @property
    def _root(self) -> pathlib.Path:
        return self.root

    def _require_remote_path(self) -> str:
        return self._checkout.remote().uri

    async def _ensure_hydrated(self) -> None:
        await self._checkout.ready(self)

    def _abs(self, rel_path: str) -> pathlib.Path:
        """Absolute local path of `rel_path` in the working root (refusing escapes, as upstream)."""
        return self._checkout.working_copy.workdir.resolve(self._admission.admit(rel_path, Access.READ))

    def _assert_can_write(self, rel: str) -> None:
        self._admission.admit(rel, Access.DELETE)

    @syncify
    async def save(self, *, actor: str | None = None, reason: str | None = None) -> Dir:
        """Commit this handle's changes atomically; returns a `Dir` reference to `remote_path`.

        Concurrent saves of the same key merge (different paths, transcript appends, audit events);
        a real conflict raises `ConcurrencyError` naming the paths and leaves this handle unchanged.
        `actor` and `reason` are recorded in the commit (see `log`); by default they are taken from the
        writes it holds. A save with nothing to commit records nothing.
        """
        check_note("actor", actor)
        check_note("reason", reason)
        await self._save(actor=actor, reason=reason)
        return Dir.from_existing_remote(self._checkout.remote().uri)

    # -- by key: creating and opening (`_api.keyed` has `open`, `list_keys`, `exists`) ---------------------

    @syncify
    @classmethod
    async def create(
        cls,
        *,
        key: str,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
        validate_messages: bool = False,
        trusted: bool = False,
    ) -> Self:
        """Create a new store for `key`; of concurrent creates exactly one wins, the rest raise
        `StoreAlreadyExists`. `read_only_prefixes` are this handle's, and are persisted with the store
        too, so that every handle enforces them (`set_read_only_prefixes` changes them later). A key whose
        store was deleted takes a new, empty one (a new generation): nothing of the deleted store shows
        through it, and handles of the deleted store still get `StoreDeleted` when they save."""
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        options = handle_options(read_only_prefixes, audit, keep_versions, validate_messages, trusted)
        return await create_store(cls, remote_path, key, options)

    @syncify
    @classmethod
    async def get_or_create(
        cls,
        *,
        key: str,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
        validate_messages: bool = False,
        trusted: bool = False,
    ) -> Self:
        """Open the store for `key` at its newest committed state, creating it if it does not exist. A key
        whose store was deleted (`delete_store`) gets a new, empty one, as with `create`."""
        options = handle_options(read_only_prefixes, audit, keep_versions, validate_messages, trusted)
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        return await open_or_create_store(cls, remote_path, key, options)

    # -- reads (`_api.files.reads` has listings, existence, prefetch and the audit trail) ------------------

    @syncify
    async def read_text(self, rel_path: str, default: str = "") -> str:
        """UTF-8 contents of `rel_path` (fetched on first read), or `default` if there is no such file;
        `NotText` if it holds binary content (`read_bytes` reads that)."""
        rel = self._admission.admit(rel_path, Access.READ)
        data = await self._checkout.read(self, rel)
        return default if data is None else _versions.decode_text(data, rel)

    @syncify
    async def read_json(self, rel_path: str, default: Any = None) -> Any:
        """JSON-decoded contents of `rel_path`, or `default` if it is missing or empty."""
        text = await self.read_text.aio(rel_path, default="")
        if not text.strip():
            return default
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorruptStore(f"{rel_path!r} is not valid JSON: {exc}") from exc

    @syncify
    async def get_meta(self, rel_path: str) -> MemoryMeta | None:
        """The metadata sidecar of `rel_path`, or None if it has none."""
        rel = self._admission.admit(rel_path, Access.READ)
        return await self._checkout.look(self, lambda view: view.meta(rel), paths=[rel])

    @syncify
    async def current_sha(self, rel_path: str) -> str:
        """The sha256 of `rel_path`'s content, or ``""`` if there is no such file."""
        rel = self._admission.admit(rel_path, Access.READ)
        return await self._checkout.look(self, lambda view: sha_of(view, rel), paths=[rel])

    # -- writes (`_api.files` has `set_metadata`, `delete`, `write_bytes`, `delete_prefix`) ----------------

    @syncify
    async def write_text(
        self,
        rel_path: str,
        content: str,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
        ttl: timedelta | None = None,
    ) -> MemoryMeta:
        """Write `content` to `rel_path` locally, with metadata, an audit event and (optionally) a version.

        With `expected_sha`, the write happens only if the current sha256 matches (``""`` for a new
        file), here and again against the committed state at `save`; otherwise `ConcurrencyError`.
        `metadata` (str keys to str, int, float or bool; see `list_paths`' ``where``) replaces the file's
        metadata: a write without it leaves the file with none. It lives in the journal, not the sidecar.
        With `ttl` (a positive timedelta), the file expires that long after this call: every handle then
        reads it as missing, and the next ``gc()`` deletes it (audited, op ``expired``). A write without
        `ttl` makes the file permanent again.
        """
        rel = self._admission.admit(rel_path, Access.WRITE)
        check_not_segment(rel)
        text = text_content(content)  # bytes go through write_bytes
        expiry = expiry_ext(check_ttl(ttl), _gc.clock())
        options = self._change_options(actor, reason, expected_sha, metadata)
        return await self._checkout.write(self, rel, text, options, expiry)

    @syncify
    async def write_json(
        self,
        rel_path: str,
        obj: Any,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
        ttl: timedelta | None = None,
    ) -> MemoryMeta:
        """JSON-encode `obj` (sorted keys, indent 2) and write it with `write_text` (`metadata`, `ttl` as
        there)."""
        check_metadata(metadata)  # before encoding `obj`: nothing is done with bad input
        check_ttl(ttl)
        content = json.dumps(obj, indent=2, sort_keys=True, default=str)
        return await self.write_text.aio(
            rel_path, content, actor=actor, reason=reason, expected_sha=expected_sha, metadata=metadata, ttl=ttl
        )

    # -- the report (upkeep; it reads through this facade's public API only: `_api.report.build`) --------

    @syncify
    async def report(
        self,
        *,
        publish: bool = False,
        max_files: int = Limits.files,
        max_messages: int = Limits.messages,
        max_commits: int = Limits.commits,
        max_events: int = Limits.events,
    ) -> str:
        """One self-contained HTML page of this store: the transcript as a chat (tool calls and tool results
        shown apart, each message with its time), sessions, the files (size, versions, metadata, last actor
        and time, content folded: text capped, binary shown as such), the commit log (the newest commits'
        changes as diffs), proposals with their status, record logs and the audit trail.

        It has no scripts and loads nothing (inline CSS), and every string from the store is escaped. It
        shows this handle's view, unsaved changes included (the page says when there are some). Each
        section shows its newest `max_*` entries and says how many older ones it leaves out; gathering
        lists each shown file's versions (one listing per file), reads one record per commit shown, the
        content of the first 100 files of at most 256 KiB, and the store as of each of the newest 10
        commits and the one before it (for their diffs).

        With `publish`, inside a Flyte task the page also goes to the task's report under a "Memory" tab
        (replacing what an earlier publish put there) and the report is flushed; the task needs
        ``report=True`` for the Flyte UI to show it. Outside a task, `publish` does nothing but log a warning.
        """
        return await _report.page(
            self,
            publish=publish,
            max_files=max_files,
            max_messages=max_messages,
            max_commits=max_commits,
            max_events=max_events,
        )

    # -- accessors: families that are objects of their own ------------------------------------------------

    def records(self, name: str) -> RecordLog:
        """The append-only log of JSON records at store path `name` (any path a file could have, e.g.
        ``"users/alice/events"``): `append`/`extend` (saved by `save`), `read(since, limit)`, `count()`.
        Concurrent saves of appends from many handles all survive. See `RecordLog`."""
        return RecordLog(self, name)

    def session(self, name: str) -> Conversation:
        """The conversation of session `name` (one path segment): a transcript-like view (`messages`,
        `append`, `extend`) over the record log ``sessions/<name>``. See `Conversation`."""
        return Conversation(self.records(conversation_log(name)), name, validate=self.validate_messages)

    def scope(self, prefix: str) -> ScopedStore:
        """A view of this handle confined to `prefix` (``"users/alice"``): paths relative to it, every
        read, write, list, delete, version, log, record-log and audit call limited to it, escapes refused
        (`PathEscapesRoot`). Its writes are this handle's unsaved changes. See `ScopedStore`."""
        return ScopedStore(self, prefix)

    # -- Flyte task I/O (mashumaro SerializableType, as upstream) ------------------------------------------

    def _serialize(self) -> dict[str, Any]:
        """The payload a store travels as when nested in another value (mashumaro calls this, synchronously);
        raises `UnsavedChanges` rather than losing unsaved changes, which it cannot save here (see `_api.payload`)."""
        _payload.refuse_unsaved(self)
        return _payload.payload(self)

    @classmethod
    def _deserialize(cls, value: dict[str, Any]) -> MemoryStore:
        """Rebuild a received store; it loads the exact commit it was sent at on first use."""
        return _payload.received_store(cls, value)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Inside a pydantic model a store travels as the same payload as anywhere else (see `_api.payload`)."""
        return _payload.pydantic_schema(cls)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "object", "title": "MemoryStore", "properties": {"key": {"type": "string"}}}
