"""`MemoryStore`: a keyed agent memory (transcript + path-addressed files), drop-in for upstream's.

This module orchestrates; the rules live in `_paths`/`_layout`/`_records`, local I/O in `_workdir`,
remote I/O in `_storage`/`_transfer`. Every I/O method is ``async def`` wrapped by `syncify`.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from typing import Any

from flyte.io import Dir
from mashumaro.types import SerializableType

from . import _location, _versions
from ._errors import CorruptStore, StoreAlreadyExists, StoreNotFound
from ._manifest import FileEntry
from ._paths import MESSAGES_PATH, check_writable, normalize_path, normalize_prefix, validate_segment
from ._records import MemoryMeta, encode_messages, sha256_bytes
from ._state import LocalState
from ._storage import RemoteStore
from ._syncify import syncify
from ._transfer import Snapshot


class _ExistsAccessor:
    """``store.exists(path)`` on a handle, ``MemoryStore.exists(key=...)`` on the class; both with ``.aio``."""

    def __get__(self, obj: MemoryStore | None, owner: type[MemoryStore]) -> Any:
        return owner._key_exists if obj is None else obj._path_exists


class MemoryStore(SerializableType):
    """Conversation transcript plus path-addressed files, persisted under a deterministic keyed path.

    Obtain one with `create` or `get_or_create`; `save` publishes local changes. Every I/O method runs
    synchronously as ``store.f(...)`` and asynchronously as ``await store.f.aio(...)``.

    Args:
        key: The store's key, a single path segment.
        messages: Initial transcript (mutate through `append` / `extend`).
        root: Local working directory; a fresh temp dir (removed on garbage collection) when omitted.
            An existing directory is indexed, and its ``messages.json`` loaded unless `messages` is given.
        remote_path: Where `save` writes; resolved from `key` and the Flyte context when omitted.
        read_only_prefixes: Path prefixes that writes may not target.
        audit: Record every write in ``audit/log.jsonl``.
        keep_versions: Snapshot every write under ``versions/``.
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
        self._needs_hydration = False
        self._remote: RemoteStore | None = None
        self._saved_transcript: str | None = None
        if root is not None:
            self._adopt(self._state.scan(), keep_messages=bool(messages))

    def __repr__(self) -> str:
        return f"MemoryStore(key={self.key!r}, remote_path={self.remote_path!r}, files={len(self._state.manifest)})"

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
        """Create a new store for `key`; raises `StoreAlreadyExists` if one is there."""
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        store = cls(
            key,
            remote_path=remote_path,
            read_only_prefixes=read_only_prefixes,
            audit=audit,
            keep_versions=keep_versions,
        )
        if await store._remote_store().exists(MESSAGES_PATH):
            raise StoreAlreadyExists(f"MemoryStore {key!r} already exists at {remote_path}")
        await store.save.aio()
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
        """Open the store for `key`, creating it if it does not exist."""
        options = dict(read_only_prefixes=read_only_prefixes, audit=audit, keep_versions=keep_versions)
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        store = cls(key, remote_path=remote_path, **options)
        if await store._remote_store().exists(MESSAGES_PATH):
            await store._hydrate(keep_messages=False)
            return store
        try:
            return await cls.create.aio(key=key, org=org, project=project, domain=domain, **options)
        except StoreAlreadyExists:
            await store._hydrate(keep_messages=False)
            return store

    @syncify
    async def save(self) -> Dir:
        """Publish this handle's changes and transcript to `remote_path`; returns a `Dir` reference to it."""
        remote = self._remote_store()
        async with self._state.lock:
            await self._ensure_hydrated()
            await self._state.push(remote, self.messages)
            self._saved_transcript = self._transcript_fingerprint()
        return Dir.from_existing_remote(remote.uri)

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
        await self._state.flush_messages(self.messages)

    def flush_messages_sync(self) -> None:
        """Alias of ``flush_messages()`` kept for upstream compatibility."""
        self.flush_messages()

    # -- reads ----------------------------------------------------------------------------------------

    @syncify
    async def read_text(self, rel_path: str, default: str = "") -> str:
        """UTF-8 contents of `rel_path`, or `default` if there is no such file."""
        rel = normalize_path(rel_path)
        await self._ensure_hydrated()
        text = await self._state.read_text(rel)
        return default if text is None else text

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
        await self._ensure_hydrated()
        if rel:
            await self._state.check_inside_root(rel)
        return self._state.manifest.paths(rel)

    @syncify
    async def _path_exists(self, rel_path: str) -> bool:
        """Whether `rel_path` is a file of the store, or a directory holding one."""
        rel = normalize_path(rel_path)
        await self._ensure_hydrated()
        await self._state.check_inside_root(rel)
        return self._state.manifest.has_file_or_dir(rel)

    @syncify
    async def get_meta(self, rel_path: str) -> MemoryMeta | None:
        """The metadata sidecar of `rel_path`, or None if it has none."""
        entry = await self._entry(rel_path)
        return entry.meta if entry else None

    @syncify
    async def current_sha(self, rel_path: str) -> str:
        """The sha256 of `rel_path`'s content, or ``""`` if there is no such file."""
        entry = await self._entry(rel_path)
        return entry.sha256 if entry else ""

    @syncify
    async def audit_tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The last `n` audit events, oldest first (all of them if ``n <= 0``)."""
        await self._ensure_hydrated()
        events = await self._state.audit_events()
        return events[-n:] if n > 0 else events

    @syncify
    async def list_versions(self, rel_path: str) -> list[str]:
        """Names of the version snapshots of `rel_path` (saved and pending), oldest first."""
        rel = normalize_path(rel_path)
        return await _versions.list_versions(self._remote_if_known(), self._state.pending.versions, rel)

    @syncify
    async def read_version(self, version_file: str) -> str:
        """Text of one version snapshot, named as by `list_versions` or an audit event's ``version_file``."""
        state = self._state
        return await _versions.read_version(
            self._remote_if_known(), state.workdir, state.pending.versions, version_file
        )

    def audit_tail_sync(self, n: int = 20) -> list[dict[str, Any]]:
        """Alias of ``audit_tail(n)`` kept for upstream compatibility."""
        return self.audit_tail(n)

    # -- writes ---------------------------------------------------------------------------------------

    @syncify
    async def write_text(
        self, rel_path: str, content: str, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> MemoryMeta:
        """Write `content` to `rel_path`, recording a sidecar, an audit event and (optionally) a version.

        With `expected_sha`, the write happens only if the current sha256 matches (``""`` for a new
        file); otherwise `ConcurrencyError` is raised and nothing changes.
        """
        rel = normalize_path(rel_path)
        check_writable(rel, self.read_only_prefixes)
        async with self._state.lock:
            await self._ensure_hydrated()
            return await self._state.write(
                rel,
                content,
                actor=actor,
                reason=reason,
                expected_sha=expected_sha,
                keep_versions=self.keep_versions,
                audit=self.audit,
            )

    @syncify
    async def write_json(
        self, rel_path: str, obj: Any, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> MemoryMeta:
        """JSON-encode `obj` (sorted keys, indent 2) and write it with `write_text`."""
        content = json.dumps(obj, indent=2, sort_keys=True, default=str)
        return await self.write_text.aio(rel_path, content, actor=actor, reason=reason, expected_sha=expected_sha)

    # -- Flyte task I/O (mashumaro SerializableType, as upstream) ------------------------------------------

    def _serialize(self) -> dict[str, Any]:
        """The payload a store travels as between tasks: identity, options and the inline transcript."""
        return {
            "messages": self.messages,
            "key": self.key,
            "remote_path": self.remote_path,
            "read_only_prefixes": list(self.read_only_prefixes),
            "audit": self.audit,
            "keep_versions": self.keep_versions,
        }

    @classmethod
    def _deserialize(cls, value: dict[str, Any]) -> MemoryStore:
        """Rebuild a received store; its files are loaded from `remote_path` on first use."""
        store = cls(
            key=value["key"],
            messages=list(value.get("messages") or []),
            remote_path=value.get("remote_path"),
            read_only_prefixes=tuple(value.get("read_only_prefixes") or ()),
            audit=value.get("audit", True),
            keep_versions=value.get("keep_versions", False),
        )
        store._saved_transcript = store._transcript_fingerprint()
        store._needs_hydration = store.remote_path is not None
        return store

    # -- internals ------------------------------------------------------------------------------------

    def _remote_if_known(self) -> RemoteStore | None:
        return self._remote_store() if self.remote_path is not None else None

    def _remote_store(self) -> RemoteStore:
        if self._remote is None:
            if self.remote_path is None:
                self.remote_path = self.remote_path_for_key(key=self.key)
            self._remote = RemoteStore(self.remote_path)
        return self._remote

    async def _entry(self, rel_path: str) -> FileEntry | None:
        rel = normalize_path(rel_path)
        await self._ensure_hydrated()
        return self._state.entry(rel)

    async def _ensure_hydrated(self) -> None:
        if self._needs_hydration:
            await self._hydrate(keep_messages=True)

    async def _hydrate(self, *, keep_messages: bool) -> None:
        """Load the remote store into this handle; an inline transcript (from task I/O) wins."""
        remote = self._remote_store()
        if not await remote.exists(MESSAGES_PATH):
            if not keep_messages:
                raise StoreNotFound(f"No MemoryStore at {remote.uri}")
            self._needs_hydration = False
            return
        self._adopt(await self._state.pull(remote), keep_messages=keep_messages)

    def _adopt(self, snapshot: Snapshot, *, keep_messages: bool) -> None:
        if not keep_messages and snapshot.messages is not None:
            self.messages = snapshot.messages
            self._saved_transcript = self._transcript_fingerprint()
        self._needs_hydration = False

    def _transcript_fingerprint(self) -> str:
        return sha256_bytes(encode_messages(self.messages))

    def has_unsaved_changes(self) -> bool:
        """Whether this handle holds writes or transcript changes that `save` has not published yet."""
        return bool(self._state.pending) or self._saved_transcript != self._transcript_fingerprint()


def _temporary_root(store: MemoryStore) -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix="flyte_agent_mem_"))
    weakref.finalize(store, shutil.rmtree, root, ignore_errors=True)
    return root
