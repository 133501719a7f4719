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
import weakref
from collections.abc import Sequence
from typing import Any

from flyte.io import Dir
from mashumaro.types import SerializableType

from . import _location
from ._errors import StoreAlreadyExists
from ._legacy import scan_local
from ._maintenance import MaintenanceAPI
from ._paths import MESSAGES_PATH, check_writable, normalize_path, validate_segment
from ._reading import ReadAPI
from ._records import MemoryMeta, encode_messages
from ._relocate import journal_exists
from ._state import LocalState
from ._storage import RemoteStore
from ._sync import Sync
from ._syncify import syncify
from ._writes import ChangeOptions


class _ExistsAccessor:
    """``store.exists(path)`` on a handle, ``MemoryStore.exists(key=...)`` on the class; both with ``.aio``."""

    def __get__(self, obj: MemoryStore | None, owner: type[MemoryStore]) -> Any:
        return owner._key_exists if obj is None else obj._path_exists


class MemoryStore(ReadAPI, MaintenanceAPI, SerializableType):
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
        self.read_only_prefixes = tuple(read_only_prefixes)
        self.audit = audit
        self.keep_versions = keep_versions
        self.root = pathlib.Path(root) if root is not None else _temporary_root(self)
        self._state = LocalState(self.root, private=root is None)
        self._sync = Sync(self._state, remote_path, lambda: self.remote_path_for_key(key=self.key))
        if root is not None:
            scanned, transcript = scan_local(self._state.workdir)
            self._state.adopt_local_files(scanned.files)
            self.messages = self.messages or transcript

    @property
    def remote_path(self) -> str | None:
        """Where the store lives (resolved from `key` and the Flyte context on first save if unset)."""
        return self._sync.remote_path

    @remote_path.setter
    def remote_path(self, value: str | None) -> None:
        self._sync.remote_path = value

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
        """Whether a store exists for `key`: its transcript object, or else its first commit (a save that
        died after its commit point may not have written the transcript yet)."""
        remote = RemoteStore(cls.remote_path_for_key(key=key, org=org, project=project, domain=domain))
        return await remote.exists(MESSAGES_PATH) or await journal_exists(remote)

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
        if await store._sync.remote().exists(MESSAGES_PATH):  # also refuses stores that upstream created
            raise StoreAlreadyExists(f"MemoryStore {key!r} already exists at {remote_path}")
        store._sync.loaded = True
        await store._sync.save(store.messages, exclusive=True)
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
        options = {"read_only_prefixes": read_only_prefixes, "audit": audit, "keep_versions": keep_versions}
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        store = cls(key, remote_path=remote_path, **options)
        if await store._sync.load_if_exists(store.messages):
            return store
        try:
            return await cls.create.aio(key=key, org=org, project=project, domain=domain, **options)
        except StoreAlreadyExists:  # another creator won the race: open what it made
            await store._sync.load(store.messages)
            return store

    @syncify
    async def save(self) -> Dir:
        """Commit this handle's changes atomically; returns a `Dir` reference to `remote_path`.

        Concurrent saves of the same key merge (different paths, transcript appends, audit events);
        a real conflict raises `ConcurrencyError` naming the paths and leaves this handle unchanged.
        """
        async with self._state.lock:
            await self._sync.ensure_loaded(self.messages)
            await self._sync.settle(self.messages)
            if self.has_unsaved_changes() or self._state.base.needs_save:
                await self._sync.save(self.messages)
        return Dir.from_existing_remote(self._sync.remote().uri)

    @syncify
    async def refresh(self) -> list[str]:
        """Move this handle to the newest committed state, keeping unsaved changes that do not conflict.

        Returns the paths whose unsaved changes conflicted and were dropped (``messages.json`` if the
        transcript was); afterwards they show the committed content, so the caller can retry.
        """
        async with self._state.lock:
            await self._sync.ensure_loaded(self.messages)
            return await self._sync.refresh(self.messages)

    @syncify
    async def compact(self) -> None:
        """Save, then fold the newest commit into a checkpoint, bringing ``audit/log.jsonl`` up to date.

        Saves do this on their own every few hundred commits; call it before handing a store to
        upstream readers that need the newest audit trail.
        """
        await self.save.aio()
        async with self._state.lock:
            await self._sync.compact()

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
        return self._sync.has_unsaved_changes(self.messages)

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
            return await self._state.write(rel, content, self._change_options(actor, reason, expected_sha))

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
            return await self._state.delete(rel, self._change_options(actor, reason, expected_sha))

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
            "seq": self._sync.payload_seq(),
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
        seq = value.get("seq")
        store._sync.pinned_seq = seq if isinstance(seq, int) else None
        store._sync.inline_transcript = True
        store._sync.saved_messages = list(store.messages)
        return store

    # -- internals ------------------------------------------------------------------------------------

    def _change_options(self, actor: str, reason: str, expected_sha: str | None) -> ChangeOptions:
        return ChangeOptions(actor, reason, expected_sha, self.keep_versions, self.audit)


def _temporary_root(store: MemoryStore) -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix="flyte_agent_mem_"))
    weakref.finalize(store, shutil.rmtree, root, ignore_errors=True)
    return root
