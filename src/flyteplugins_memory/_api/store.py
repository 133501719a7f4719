"""`MemoryStore`: a keyed agent memory (transcript + path-addressed files), drop-in for upstream's.

This module is the facade: it admits every caller path through one gate (`_rules.admission`) and hands the
call to one collaborator, the handle's `_handle.checkout.Checkout`, which owns the working copy, the lock and
every move between the handle and storage. Every I/O method is ``async def`` wrapped by `syncify`
(``f()`` and ``f.aio()``). The keyed constructors live in `_api.keyed`, the read and maintenance halves of
the API in `_api.reading` and `_api.maintenance`, its HTML report in `_api.report.build`; what a store
travels as between tasks, in `_api.payload`.

The class subclasses upstream's ``flyte.ai.agents.MemoryStore`` so that everything accepting upstream's
(its ``Agent`` checks ``isinstance``) accepts ours; it keeps its own ``__init__``, identity equality and
hashing, and makes upstream's private helpers that would act on the working root behind the journal's
back unreachable (`_base.compat.unavailable`).
"""

from __future__ import annotations

import json
import pathlib
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from flyte.ai.agents import MemoryStore as UpstreamMemoryStore
from flyte.io import Dir

from .._base.compat import unavailable, upstream_awaitable
from .._base.syncify import syncify
from .._handle.checkout import Checkout
from .._handle.mirror import remove_when_idle, write_text_file
from .._journal import gc as _gc
from .._journal.commit_log import Commit, read_log
from .._rules.admission import Access, PathAdmission
from .._rules.arguments import check_flag, check_int, check_optional_str, check_prefixes
from .._rules.codecs import MemoryMeta, encode_messages
from .._rules.commit_info import check_note
from .._rules.messages import MessageModel, admit, admit_all
from .._rules.metadata import Scalar, check_metadata
from .._rules.paths import MESSAGES_PATH, validate_segment
from .._rules.record_codec import check_not_segment
from .._rules.transcript import check_messages
from .._rules.ttl import check_ttl, expiry_ext
from .._rules.writes import ChangeOptions, text_content
from ..errors import InvalidArgument
from . import metadata_update as _metadata_update
from . import payload as _payload
from .archive.export import ExportAPI
from .archive.import_archive import ImportAPI
from .binary import BinaryAPI
from .bulk_delete import BulkDeleteAPI
from .compaction import CompactionAPI
from .conversations import Conversation, conversation_log
from .history import HistoryAPI
from .keyed import KeyedAPI
from .maintenance import MaintenanceAPI
from .read_only_settings import ReadOnlySettingsAPI
from .reading import ReadAPI
from .records import PendingRecords, RecordLog, save_pending
from .report.build import ReportAPI
from .retention_settings import RetentionAPI
from .scopes import ScopedStore
from .search import SearchAPI
from .staged import StagedAPI
from .time_travel import TimeTravelAPI
from .transcript_reads import TranscriptReadAPI


# pyright compares the mixins' wrappers (typed for `ReadAPI` as their `self`) with upstream's declarations
# (typed for upstream's class); at run time both are bound to this class
class MemoryStore(  # pyright: ignore[reportIncompatibleVariableOverride]
    KeyedAPI,
    ReadAPI,
    TranscriptReadAPI,
    CompactionAPI,
    BinaryAPI,
    BulkDeleteAPI,
    StagedAPI,
    MaintenanceAPI,
    ReportAPI,
    ReadOnlySettingsAPI,
    RetentionAPI,
    SearchAPI,
    HistoryAPI,
    TimeTravelAPI,
    ExportAPI,
    ImportAPI,
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

    def __init__(
        self,
        key: str,
        messages: list[dict[str, Any]] | None = None,
        root: pathlib.Path | str | None = None,
        remote_path: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
        *,
        validate_messages: bool = False,
        trusted: bool = False,
    ):
        self.key = validate_segment(key, name="key")
        self.validate_messages = check_flag("validate_messages", validate_messages)
        self.trusted = check_flag("trusted", trusted)
        # a copy: nothing the store does (load, save, refresh) ever changes the caller's list
        self.messages: list[dict[str, Any]] = admit_all(list(messages or []), validate=validate_messages)
        self.read_only_prefixes = check_prefixes(read_only_prefixes)
        self.audit = check_flag("audit", audit)
        self.keep_versions = check_flag("keep_versions", keep_versions)
        self._root_path = pathlib.Path(root) if root is not None else _temporary_root(self)
        self._root_real = self._root_path.resolve()
        resolve = lambda: self.remote_path_for_key(key=self.key)  # noqa: E731
        self._checkout = Checkout(self._root_path, private=root is None, remote_path=remote_path, resolve=resolve)
        #: the one gate every caller path passes (a scope swaps it)
        self._admission = PathAdmission(self._enforced_read_only_prefixes, lambda: self.remote_path)
        #: records appended to logs (`records`, `session`) and not saved yet
        self._pending_records = PendingRecords()
        if root is not None:
            self._checkout.adopt_working_root(self)

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
        await save_pending(self, actor)
        await self._checkout.save(self, actor=actor, reason=reason)
        return Dir.from_existing_remote(self._checkout.remote().uri)

    @syncify
    async def log(self, limit: int = 20, path: str | None = None) -> list[Commit]:
        """The store's newest `limit` commits, newest first: when, who, why, the paths each wrote and
        deleted, the messages it appended (see `Commit`). With `path`, only the commits that wrote or
        deleted that path.

        Reads one commit record per commit returned (plus finding the newest commit), however long the
        history; for a path that is not a file now, it first reads back to the last commit that changed
        it. The log ends where ``gc()`` collected the history; a store imported from upstream's layout
        starts with one ``import`` commit.
        """
        rel = None if path is None else self._admission.admit(path, Access.READ)
        check_int("limit", limit)
        view = await self._checkout.ready(self)
        return await read_log(self._checkout.remote_if_known(), view.base, limit, rel)

    @syncify
    async def refresh(self) -> list[str]:
        """Move this handle to the newest committed state, keeping unsaved changes that do not conflict.

        Returns the paths whose unsaved changes conflicted and were dropped (``messages.json`` if the
        transcript was); afterwards they show the committed content, so the caller can retry.
        """
        return await self._checkout.refresh(self)

    @syncify
    async def revert(self, paths: Sequence[str] | None = None) -> list[str]:
        """Drop this handle's unsaved changes to the files at `paths` (every unsaved file change when
        None): their writes, deletes, metadata, versions and audit events. They read as committed again
        and the next save leaves them alone. Returns the paths whose changes were dropped (a path without
        one is skipped). The transcript and record-log appends are not touched.

        A retry loop's undo: apply a change, and if a check fails half-way, revert what it wrote.
        """
        if isinstance(paths, str) or not (paths is None or isinstance(paths, Sequence)):
            raise InvalidArgument(f"paths is a sequence of paths or None, got {type(paths).__name__}")
        rels = None if paths is None else [self._admission.admit(p, Access.READ) for p in paths]
        return await self._checkout.revert(self, rels)

    @syncify
    async def compact(self) -> None:
        """Save, then fold the newest commit into a checkpoint, bringing ``audit/log.jsonl`` up to date.

        Saves do this on their own every few hundred commits; call it before handing a store to
        upstream readers that need the newest audit trail.
        """
        await self.save.aio()
        await self._checkout.checkpoint()

    # -- transcript -----------------------------------------------------------------------------------

    def append(self, message: dict[str, Any] | MessageModel) -> None:
        """Append one message to the transcript (persisted by `save`).

        Stored as upstream stores it (``json.dumps(..., default=str)``: a ``datetime`` is saved as its
        ``str``); a message that cannot be encoded at all raises `InvalidMessage` and is not appended. A
        typed message (`UserMessage`, ...) is stored as its dict; with ``validate_messages=True`` a dict
        must match one of them too (`InvalidMessage` saying why).
        """
        self.messages.append(admit(message, validate=self.validate_messages))

    def extend(self, messages: Sequence[dict[str, Any] | MessageModel]) -> None:
        """Append messages to the transcript (persisted by `save`); all or none (`InvalidMessage`)."""
        self.messages.extend(admit_all(list(messages), validate=self.validate_messages))

    @upstream_awaitable
    @syncify
    async def flush_messages(self) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Write the transcript (the committed one, loaded first if need be, plus this handle's changes)
        to ``messages.json`` in the local working root, atomically."""
        view = await self._checkout.ready(self)
        check_messages(self.messages)
        data = encode_messages(self.messages)
        await view.mirror.now(write_text_file, view.workdir, MESSAGES_PATH, data)

    def flush_messages_sync(self) -> None:
        """Alias of ``flush_messages()`` kept for upstream compatibility."""
        self.flush_messages()

    def has_unsaved_changes(self) -> bool:
        """Whether this handle holds writes, deletes or transcript changes (appends, or edits of messages
        in place, compared by content) that `save` has not committed."""
        return bool(self._pending_records) or self._checkout.has_unsaved_changes(self)

    # -- record logs and conversations ----------------------------------------------------------------

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

    # -- writes ---------------------------------------------------------------------------------------

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

    @syncify
    async def set_metadata(
        self,
        rel_path: str,
        metadata: Mapping[str, Scalar] | None,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
    ) -> MemoryMeta | None:
        """Replace the metadata of the file at `rel_path`, keeping its content (an audited write of the
        same bytes: fetched first if the handle does not hold them). None if there is no such file."""
        rel = self._admission.admit(rel_path, Access.WRITE)
        check_not_segment(rel)
        options = self._change_options(actor, reason, expected_sha, metadata)
        return await _metadata_update.set_metadata(self, self._checkout, rel, options)

    @syncify
    async def delete(
        self, rel_path: str, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> bool:
        """Delete the file at `rel_path` (audited; a tombstone version with `keep_versions`).

        Returns False if there is no such file. Same path rules and `expected_sha` check as writes.
        """
        rel = self._admission.admit(rel_path, Access.DELETE)
        return await self._checkout.delete(self, rel, self._change_options(actor, reason, expected_sha))

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

    # -- internals ------------------------------------------------------------------------------------

    def _change_options(
        self, actor: str, reason: str, expected_sha: str | None, metadata: Mapping[str, Scalar] | None = None
    ) -> ChangeOptions:
        check_optional_str("expected_sha", expected_sha)
        checked = check_metadata(metadata)
        return ChangeOptions(actor, reason, expected_sha, self.keep_versions, self.audit, checked)


def _temporary_root(store: MemoryStore) -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix="flyte_agent_mem_"))
    # removed after the root writer has finished whatever the handle queued
    weakref.finalize(store, remove_when_idle, root)
    return root
