"""`MemoryStore`: a keyed agent memory (transcript + path-addressed files), drop-in for upstream's.

This module is the facade: it validates arguments and orders calls. The rules live in `_paths`,
`_layout`, `_records`, `_journal` and `_merge`; the handle's state in `_state`; storage in `_open`,
`_commit`, `_storage`. Every I/O method is ``async def`` wrapped by `syncify` (``f()`` and ``f.aio()``).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Sequence
from typing import Any

from flyte.io import Dir
from mashumaro.types import SerializableType

from . import _audit, _location, _versions
from ._commit import Save, checkpoint, save
from ._errors import CorruptStore, StoreAlreadyExists, StoreNotFound
from ._legacy import scan_local
from ._merge import drop_conflicting, merged_transcript
from ._open import latest_state, open_state, state_at
from ._paths import MESSAGES_PATH, check_writable, normalize_path, normalize_prefix, validate_segment
from ._records import MemoryMeta, encode_messages
from ._state import LocalState
from ._storage import RemoteStore
from ._syncify import syncify


class _ExistsAccessor:
    """``store.exists(path)`` on a handle, ``MemoryStore.exists(key=...)`` on the class; both with ``.aio``."""

    def __get__(self, obj: MemoryStore | None, owner: type[MemoryStore]) -> Any:
        return owner._key_exists if obj is None else obj._path_exists


class MemoryStore(SerializableType):
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
        read_only_prefixes: Path prefixes that writes and deletes may not target.
        audit: Record every write and delete in the audit trail.
        keep_versions: Snapshot every write (and a tombstone for every delete) under ``versions/``.
    """

    exists = _ExistsAccessor()

    def __init__(
        self,
        key: str,
        messages: list[dict[str, Any]] | None = None,
        root: pathlib.Path | str | None = None,
        remote_path: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
    ):
        self.key = validate_segment(key, name="key")
        self.messages: list[dict[str, Any]] = messages if messages is not None else []
        self.remote_path = remote_path
        self.read_only_prefixes = tuple(read_only_prefixes)
        self.audit = audit
        self.keep_versions = keep_versions
        self.root = pathlib.Path(root) if root is not None else _temporary_root(self)
        self._state = LocalState(self.root)
        self._remote: RemoteStore | None = None
        #: the committed state is not loaded yet; `_pinned_seq` names the exact one to load, if any
        self._loaded = remote_path is None
        self._pinned_seq: int | None = None
        #: received as a task input: the inline transcript wins over the stored one, as upstream
        self._inline_transcript = False
        self._saved_messages: list[dict[str, Any]] = []
        if root is not None:
            scanned, transcript = scan_local(self._state.workdir)
            self._state.changes.files.update(scanned.files)
            self._state.cached.update({p: r.sha256 for p, r in scanned.files.items()})
            self.messages = self.messages or transcript

    def __repr__(self) -> str:
        return f"MemoryStore(key={self.key!r}, remote_path={self.remote_path!r})"

    # -- keyed stores ---------------------------------------------------------------------------------

    @classmethod
    def remote_path_for_key(
        cls, *, key: str, org: str | None = None, project: str | None = None, domain: str | None = None
    ) -> str:
        """The store's path: ``{storage_root}/agents/memory-store/v0/{org}/{project}/{domain}/{key}``."""
        return _location.remote_path_for_key(key, org, project, domain)

    @syncify
    @classmethod
    async def _key_exists(
        cls, *, key: str, org: str | None = None, project: str | None = None, domain: str | None = None
    ) -> bool:
        """Whether a store exists for `key` (its transcript object is the sentinel)."""
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        return await RemoteStore(remote_path).exists(MESSAGES_PATH)

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
    ) -> MemoryStore:
        """Create a new store for `key`; of concurrent creates exactly one wins, the rest raise
        `StoreAlreadyExists`."""
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        store = cls(key, None, None, remote_path, read_only_prefixes, audit, keep_versions)
        remote = store._remote_store()
        if await remote.exists(MESSAGES_PATH):  # also refuses stores that upstream created
            raise StoreAlreadyExists(f"MemoryStore {key!r} already exists at {remote_path}")
        store._loaded = True
        await store._commit(exclusive=True)
        return store

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
    ) -> MemoryStore:
        """Open the store for `key` at its newest committed state, creating it if it does not exist."""
        options = dict(read_only_prefixes=read_only_prefixes, audit=audit, keep_versions=keep_versions)
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        store = cls(key, remote_path=remote_path, **options)
        try:
            await store._load()
            return store
        except StoreNotFound:
            pass
        try:
            return await cls.create.aio(key=key, org=org, project=project, domain=domain, **options)
        except StoreAlreadyExists:
            await store._load()
            return store

    @syncify
    async def save(self) -> Dir:
        """Commit this handle's changes atomically; returns a `Dir` reference to `remote_path`.

        Concurrent saves of the same key merge (different paths, transcript appends, audit events);
        a real conflict raises `ConcurrencyError` naming the paths and leaves this handle unchanged.
        """
        async with self._state.lock:
            await self._ensure_loaded(missing_ok=True)
            if self.has_unsaved_changes() or self._state.base.seq == 0:
                await self._commit(exclusive=False)
        return Dir.from_existing_remote(self._remote_store().uri)

    @syncify
    async def refresh(self) -> list[str]:
        """Move this handle to the newest committed state, keeping unsaved changes that do not conflict.

        Returns the paths whose unsaved changes conflicted and were dropped (``messages.json`` if the
        transcript was); afterwards they show the committed content, so the caller can retry.
        """
        async with self._state.lock:
            await self._ensure_loaded(missing_ok=True)
            state, base = self._state, self._state.base
            latest = await latest_state(self._remote_store(), base) or base
            dropped = drop_conflicting(base, latest, state.changes, self.messages)
            state.changes.audit = [e for e in state.changes.audit if e.get("path") not in dropped]
            transcript = merged_transcript(base.messages, latest.messages, self.messages)
            self.messages[:] = latest.messages if transcript is None else transcript
            state.base, self._saved_messages = latest, list(latest.messages)
            return dropped

    @syncify
    async def compact(self) -> None:
        """Save, then fold the newest commit into a checkpoint, bringing ``audit/log.jsonl`` up to date.

        Saves do this on their own every few hundred commits; call it before handing a store to
        upstream readers that need the newest audit trail.
        """
        await self.save.aio()
        async with self._state.lock:
            remote = self._remote_store()
            latest = await latest_state(remote, self._state.base) or self._state.base
            self._state.base = await checkpoint(remote, latest)

    # -- transcript -----------------------------------------------------------------------------------

    def append(self, message: dict[str, Any]) -> None:
        """Append one message to the transcript (persisted by `save`)."""
        self.messages.append(message)

    def extend(self, messages: Sequence[dict[str, Any]]) -> None:
        """Append messages to the transcript (persisted by `save`)."""
        self.messages.extend(messages)

    @syncify
    async def flush_messages(self) -> None:
        """Write the transcript to ``messages.json`` in the local working root."""
        await self._state.write_local(MESSAGES_PATH, encode_messages(self.messages))

    def flush_messages_sync(self) -> None:
        """Alias of ``flush_messages()`` kept for upstream compatibility."""
        self.flush_messages()

    def has_unsaved_changes(self) -> bool:
        """Whether this handle holds writes, deletes or transcript changes that `save` has not committed."""
        return self._state.has_unsaved_changes() or self.messages != self._saved_messages

    # -- reads ----------------------------------------------------------------------------------------

    @syncify
    async def read_text(self, rel_path: str, default: str = "") -> str:
        """UTF-8 contents of `rel_path` (fetched on first read), or `default` if there is no such file."""
        rel = normalize_path(rel_path)
        await self._ensure_loaded()
        data = await self._state.read_bytes(rel, self._remote_if_known())
        if data is None:
            return default
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptStore(f"{rel!r} is not valid UTF-8 text") from exc

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
    async def list_paths(self, prefix: str = "") -> list[str]:
        """Sorted paths of the store's files under directory `prefix` (bookkeeping and transcript excluded)."""
        rel = normalize_prefix(prefix)
        await self._ensure_loaded()
        if rel:
            await self._state.check_inside_root(rel)
        return self._state.paths(rel)

    @syncify
    async def _path_exists(self, rel_path: str) -> bool:
        """Whether `rel_path` is a file of the store, or a directory holding one."""
        rel = normalize_path(rel_path)
        await self._ensure_loaded()
        await self._state.check_inside_root(rel)
        return self._state.has_file_or_dir(rel)

    @syncify
    async def get_meta(self, rel_path: str) -> MemoryMeta | None:
        """The metadata sidecar of `rel_path`, or None if it has none."""
        rel = normalize_path(rel_path)
        await self._ensure_loaded()
        return self._state.meta(rel)

    @syncify
    async def current_sha(self, rel_path: str) -> str:
        """The sha256 of `rel_path`'s content, or ``""`` if there is no such file."""
        rel = normalize_path(rel_path)
        await self._ensure_loaded()
        self._state.meta(rel)  # a corrupt sidecar raises here, as upstream's does
        record = self._state.record(rel)
        return record.sha256 if record else ""

    @syncify
    async def prefetch(self, prefix: str = "") -> int:
        """Fetch every file under `prefix` not yet local, in bounded parallel batches; returns how many."""
        rel = normalize_prefix(prefix)
        await self._ensure_loaded()
        return await self._state.prefetch(rel, self._remote_if_known())

    @syncify
    async def audit_tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The last `n` audit events, oldest first (all of them if ``n <= 0``); reads only what it needs."""
        await self._ensure_loaded()
        return await _audit.audit_tail(self._remote_if_known(), self._state.base, self._state.changes.audit, n)

    def audit_tail_sync(self, n: int = 20) -> list[dict[str, Any]]:
        """Alias of ``audit_tail(n)`` kept for upstream compatibility."""
        return self.audit_tail(n)

    @syncify
    async def list_versions(self, rel_path: str) -> list[str]:
        """Names of the version snapshots of `rel_path` (saved and pending), oldest first."""
        rel = normalize_path(rel_path)
        return await _versions.list_versions(self._remote_if_known(), self._state.versions, rel)

    @syncify
    async def read_version(self, version_file: str) -> str:
        """Text of one version snapshot, named as by `list_versions` or an audit event's ``version_file``."""
        state = self._state
        return await _versions.read_version(self._remote_if_known(), state.workdir, state.versions, version_file)

    # -- writes ---------------------------------------------------------------------------------------

    @syncify
    async def write_text(
        self, rel_path: str, content: str, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> MemoryMeta:
        """Write `content` to `rel_path` locally, with metadata, an audit event and (optionally) a version.

        With `expected_sha`, the write happens only if the current sha256 matches (``""`` for a new
        file), here and again against the committed state at `save`; otherwise `ConcurrencyError`.
        """
        rel = normalize_path(rel_path)
        check_writable(rel, self.read_only_prefixes)
        async with self._state.lock:
            await self._ensure_loaded()
            await self._state.check_inside_root(rel)
            return await self._state.write(rel, content, **self._change_options(actor, reason, expected_sha))

    @syncify
    async def write_json(
        self, rel_path: str, obj: Any, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> MemoryMeta:
        """JSON-encode `obj` (sorted keys, indent 2) and write it with `write_text`."""
        content = json.dumps(obj, indent=2, sort_keys=True, default=str)
        return await self.write_text.aio(rel_path, content, actor=actor, reason=reason, expected_sha=expected_sha)

    @syncify
    async def delete(
        self, rel_path: str, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> bool:
        """Delete the file at `rel_path` (audited; a tombstone version with `keep_versions`).

        Returns False if there is no such file. Same path rules and `expected_sha` check as writes.
        """
        rel = normalize_path(rel_path)
        check_writable(rel, self.read_only_prefixes)
        async with self._state.lock:
            await self._ensure_loaded()
            await self._state.check_inside_root(rel)
            return await self._state.delete(rel, **self._change_options(actor, reason, expected_sha))

    # -- Flyte task I/O (mashumaro SerializableType, as upstream) ------------------------------------------

    def _serialize(self) -> dict[str, Any]:
        """The payload a store travels as: identity, options, the inline transcript and its commit."""
        return {
            "messages": self.messages,
            "key": self.key,
            "remote_path": self.remote_path,
            "read_only_prefixes": list(self.read_only_prefixes),
            "audit": self.audit,
            "keep_versions": self.keep_versions,
            "seq": self._state.base.seq if self._loaded else self._pinned_seq,
        }

    @classmethod
    def _deserialize(cls, value: dict[str, Any]) -> MemoryStore:
        """Rebuild a received store; it loads the exact commit it was sent at on first use."""
        store = cls(
            key=value["key"],
            messages=list(value.get("messages") or []),
            remote_path=value.get("remote_path"),
            read_only_prefixes=tuple(value.get("read_only_prefixes") or ()),
            audit=value.get("audit", True),
            keep_versions=value.get("keep_versions", False),
        )
        store._pinned_seq = value.get("seq") if isinstance(value.get("seq"), int) else None
        store._inline_transcript = True
        store._saved_messages = list(store.messages)
        return store

    # -- internals ------------------------------------------------------------------------------------

    def _change_options(self, actor: str, reason: str, expected_sha: str | None) -> dict[str, Any]:
        return dict(
            actor=actor, reason=reason, expected_sha=expected_sha, keep_versions=self.keep_versions, audit=self.audit
        )

    def _remote_if_known(self) -> RemoteStore | None:
        return self._remote_store() if self.remote_path is not None else None

    def _remote_store(self) -> RemoteStore:
        if self._remote is None:
            if self.remote_path is None:
                self.remote_path = self.remote_path_for_key(key=self.key)
            self._remote = RemoteStore(self.remote_path)
        return self._remote

    async def _ensure_loaded(self, *, missing_ok: bool = True) -> None:
        if not self._loaded:
            try:
                await self._load()
            except StoreNotFound:
                if not missing_ok:
                    raise
                self._loaded = True

    async def _load(self) -> None:
        """Load the committed state: the pinned commit of a received store, else the newest."""
        remote = self._remote_store()
        if self._pinned_seq:
            state, imported = await state_at(remote, self._pinned_seq), False
        else:
            state, imported = await open_state(remote)
        self._state.base, self._state.imported, self._loaded = state, imported, True
        if not self._inline_transcript:
            self.messages = list(state.messages)
            self._saved_messages = list(state.messages)

    async def _commit(self, *, exclusive: bool) -> None:
        state = self._state
        contents, versions = await state.contents_to_save()
        job = Save(
            state.base,
            state.changes,
            list(self.messages),
            contents,
            versions,
            uuid.uuid4().hex,
            imported=state.imported,
            exclusive=exclusive,
        )
        committed = await save(self._remote_store(), job)
        self.messages[:] = committed.messages
        self._saved_messages = list(committed.messages)
        state.committed(committed)


def _temporary_root(store: MemoryStore) -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix="flyte_agent_mem_"))
    weakref.finalize(store, shutil.rmtree, root, ignore_errors=True)
    return root
