"""`ScopedStore`: a view of one handle confined to a prefix (``store.scope("users/alice")``).

Paths given to a scope are relative to its prefix and results come back relative to it. Each call
passes the scope's own gate first (`_rules.scope_paths`: stricter than a store's rules; plus, in the local
working copy, no symlink that leads out of the prefix), then the store's (`_rules.admission`: reserved and
read-only prefixes), and is then the store's own call on the full path: a scope is no second working
copy. Its writes are unsaved changes of the handle; ``scope.save()`` saves the handle, everything it
holds. The transcript (``messages``, ``append``) is not a file and is not offered: a scope's
conversations are ``scope.session(name)``, record logs under its prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from flyte.io import Dir

from ..._base.syncify import syncify
from ..._journal.commit_log import Commit
from ..._journal.history import HistoryEntry
from ..._journal.purge import PurgeResult
from ..._rules.arguments import check_int
from ..._rules.codecs import MemoryMeta
from ..._rules.layout import Kind, classify
from ..._rules.metadata import Scalar
from ..._rules.scope_paths import is_inside, joined, relative, scope_path
from ...errors import InvalidArgument, InvalidPath, UnsafeStoreContent, VersionNotFound
from ...storage._byte_stream import ByteStream
from ..conversations import Conversation, conversation_log
from ..records import RecordLog
from ..search import Embed, SearchHit
from .history import newest_matching, scoped_commit, scoped_event
from .staged import ScopedStagedAPI

if TYPE_CHECKING:
    pass

__all__ = ["ScopedStore"]


class ScopedStore(ScopedStagedAPI):
    """A store handle confined to `prefix`: reads, writes, lists, deletes, metadata, bytes, versions,
    history, record logs, search, staged memories and the audit trail of the files under it, and nothing
    else.

    Obtain one with ``store.scope(prefix)``; ``scope.scope(sub)`` nests. Every I/O method runs as
    ``scope.f(...)`` or ``await scope.f.aio(...)``. Escapes raise `PathEscapesRoot` (``..``, absolute
    paths, backslashes, lookalike or percent-encoded dots and separators, symlinks out of the prefix) or
    `InvalidPath`; see `_rules.scope_paths` for the exact rules.
    """

    def __repr__(self) -> str:
        return f"ScopedStore(key={self._store.key!r}, prefix={self._prefix!r})"

    def scope(self, prefix: str) -> ScopedStore:
        """A scope confined to `prefix` under this one."""
        return ScopedStore(self._store, joined(self._prefix, scope_path(prefix)))

    def _meta(self, meta: MemoryMeta | None) -> Any:
        return None if meta is None else dataclasses.replace(meta, path=relative(self._prefix, meta.path))

    # -- reads ----------------------------------------------------------------------------------------

    @syncify
    async def read_text(self, rel_path: str, default: str = "") -> str:
        """`MemoryStore.read_text` of the file at `rel_path` in this scope."""
        return await self._store.read_text.aio(await self._full(rel_path), default)

    @syncify
    async def read_json(self, rel_path: str, default: Any = None) -> Any:
        """`MemoryStore.read_json` of the file at `rel_path` in this scope."""
        return await self._store.read_json.aio(await self._full(rel_path), default)

    @syncify
    async def read_bytes(self, rel_path: str, default: bytes | None = None) -> bytes | None:
        """`MemoryStore.read_bytes` of the file at `rel_path` in this scope."""
        return await self._store.read_bytes.aio(await self._full(rel_path), default)

    @syncify
    async def open_bytes(self, rel_path: str) -> ByteStream:
        """`MemoryStore.open_bytes` of the file at `rel_path` in this scope."""
        return await self._store.open_bytes.aio(await self._full(rel_path))

    @syncify
    async def list_paths(self, prefix: str = "", *, where: Mapping[str, Scalar] | None = None) -> list[str]:
        """Sorted paths (relative to the scope) of its files under directory `prefix`; `where` as in
        `MemoryStore.list_paths`."""
        full = await self._full(prefix, directory=True)
        return [relative(self._prefix, p) for p in await self._store.list_paths.aio(full, where=where)]

    @syncify
    async def exists(self, rel_path: str) -> bool:
        """Whether `rel_path` is a file of the scope, or a directory holding one."""
        return await self._store._path_exists.aio(await self._full(rel_path))

    @syncify
    async def get_meta(self, rel_path: str) -> MemoryMeta | None:
        """The metadata of `rel_path` (its ``path`` relative to the scope), or None."""
        return self._meta(await self._store.get_meta.aio(await self._full(rel_path)))

    @syncify
    async def current_sha(self, rel_path: str) -> str:
        """The sha256 of `rel_path`'s content, or ``""`` if there is no such file."""
        return await self._store.current_sha.aio(await self._full(rel_path))

    @syncify
    async def prefetch(self, prefix: str = "") -> int:
        """Materialize the scope's files under `prefix` in the handle's working root; how many were fetched."""
        return await self._store.prefetch.aio(await self._full(prefix, directory=True))

    # -- writes and deletes (unsaved changes of the handle) --------------------------------------------

    async def _write(self, write: Any, rel_path: str, value: Any, options: dict[str, Any]) -> MemoryMeta:
        """`write` (one of the handle's write methods) of `value` at `rel_path` in this scope."""
        return self._meta(await write.aio(await self._full(rel_path), value, **options))

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
        """`MemoryStore.write_text` at `rel_path` in this scope (`ttl` as there)."""
        options = {"actor": actor, "reason": reason, "expected_sha": expected_sha, "metadata": metadata, "ttl": ttl}
        return await self._write(self._store.write_text, rel_path, content, options)

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
        """`MemoryStore.write_json` at `rel_path` in this scope (`ttl` as there)."""
        options = {"actor": actor, "reason": reason, "expected_sha": expected_sha, "metadata": metadata, "ttl": ttl}
        return await self._write(self._store.write_json, rel_path, obj, options)

    @syncify
    async def write_bytes(
        self,
        rel_path: str,
        data: bytes,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
        ttl: timedelta | None = None,
    ) -> MemoryMeta:
        """`MemoryStore.write_bytes` at `rel_path` in this scope (`ttl` as there)."""
        options = {"actor": actor, "reason": reason, "expected_sha": expected_sha, "metadata": metadata, "ttl": ttl}
        return await self._write(self._store.write_bytes, rel_path, data, options)

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
        """`MemoryStore.set_metadata` of the file at `rel_path` in this scope."""
        full = await self._full(rel_path)
        options = {"actor": actor, "reason": reason, "expected_sha": expected_sha}
        return self._meta(await self._store.set_metadata.aio(full, metadata, **options))

    @syncify
    async def delete(
        self, rel_path: str, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> bool:
        """`MemoryStore.delete` of the file at `rel_path` in this scope."""
        full = await self._full(rel_path)
        return await self._store.delete.aio(full, actor=actor, reason=reason, expected_sha=expected_sha)

    @syncify
    async def delete_prefix(self, prefix: str, *, actor: str = "agent", reason: str = "") -> list[str]:
        """`MemoryStore.delete_prefix` of directory `prefix` in this scope (``""``: every file of the
        scope); returns the deleted paths, relative to the scope."""
        full = await self._full(prefix, directory=True)
        deleted = await self._store.delete_prefix.aio(full, actor=actor, reason=reason)
        return [relative(self._prefix, p) for p in deleted]

    @syncify
    async def purge(self, rel_path: str, *, actor: str = "agent", reason: str = "") -> PurgeResult:
        """`MemoryStore.purge` of `rel_path` in this scope (removes every stored copy now); the result's
        ``path`` relative to the scope."""
        result = await self._store.purge.aio(await self._full(rel_path), actor=actor, reason=reason)
        return dataclasses.replace(result, path=relative(self._prefix, result.path))

    @syncify
    async def save(self, *, actor: str | None = None, reason: str | None = None) -> Dir:
        """Save the handle: every unsaved change it holds, this scope's and any other (one working copy)."""
        return await self._store.save.aio(actor=actor, reason=reason)

    def has_unsaved_changes(self) -> bool:
        """Whether the handle (not only this scope) holds unsaved changes."""
        return self._store.has_unsaved_changes()

    @syncify
    async def revert(self, paths: Sequence[str] | None = None) -> list[str]:
        """`MemoryStore.revert` of the files at scope paths `paths` (None: every unsaved file change of this
        scope), e.g. after a save refused with `ReadOnlyPath`: their changes are dropped, the handle's others
        stay for the next save. Returns the scope paths whose changes were dropped."""
        if isinstance(paths, str) or not (paths is None or isinstance(paths, Sequence)):
            raise InvalidArgument(f"paths is a sequence of paths or None, got {type(paths).__name__}")
        if paths is None:
            store, prefix = self._store, self._prefix
            changed = await store._checkout.look(store, lambda view: list(view.changes.files))
            full = [p for p in changed if is_inside(prefix, p)]
        else:
            full = [await self._full(p) for p in paths]
        return [relative(self._prefix, p) for p in await self._store.revert.aio(full)]

    # -- versions, history, audit -------------------------------------------------------------------------

    @syncify
    async def list_versions(self, rel_path: str) -> list[str]:
        """Names of the version snapshots of `rel_path`, oldest first (store-level names: pass them to
        `read_version`)."""
        return await self._store.list_versions.aio(await self._full(rel_path))

    def _own_version(self, version_file: str) -> str:
        try:
            named = classify(version_file)
        except UnsafeStoreContent as exc:  # no name at all: as the store says (`_journal.versions`)
            raise InvalidPath(f"{version_file!r} does not name a version snapshot") from exc
        if named.kind is not Kind.VERSION:
            raise InvalidPath(f"{version_file!r} does not name a version snapshot")
        if not is_inside(self._prefix, named.path):  # another scope's: as if it did not exist
            raise VersionNotFound(f"No version {version_file!r} in scope {self._prefix!r}")
        return version_file

    @syncify
    async def read_version(self, version_file: str) -> str:
        """Text of a version snapshot of a file of this scope (`VersionNotFound` for any other)."""
        return await self._store.read_version.aio(self._own_version(version_file))

    @syncify
    async def read_version_bytes(self, version_file: str) -> bytes:
        """Bytes of a version snapshot of a file of this scope (`VersionNotFound` for any other)."""
        return await self._store.read_version_bytes.aio(self._own_version(version_file))

    @syncify
    async def history(self, rel_path: str, limit: int = 20) -> list[HistoryEntry]:
        """`MemoryStore.history` of the file at `rel_path` in this scope (version ids as the store's)."""
        return await self._store.history.aio(await self._full(rel_path), limit)

    @syncify
    async def restore(
        self,
        rel_path: str,
        version_id: str,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
    ) -> Any:
        """`MemoryStore.restore` of version `version_id` of the file at `rel_path` in this scope."""
        full = await self._full(rel_path)
        found = await self._store.restore.aio(full, version_id, actor=actor, reason=reason, expected_sha=expected_sha)
        return self._meta(found)

    @syncify
    async def diff(self, rel_path: str, a: str, b: str | None = None) -> str:
        """`MemoryStore.diff` of the file at `rel_path` in this scope."""
        return await self._store.diff.aio(await self._full(rel_path), a, b)

    @syncify
    async def log(self, limit: int = 20, path: str | None = None) -> list[Commit]:
        """The newest `limit` commits that wrote or deleted files of this scope (with `path`, that file),
        newest first; their paths relative to the scope, other paths and the transcript left out."""
        check_int("limit", limit)
        full = None if path is None else await self._full(path)
        read = lambda k: self._store.log.aio(k, full)  # noqa: E731
        return await newest_matching(read, lambda c: scoped_commit(self._prefix, c), limit, oldest_first=False)

    @syncify
    async def audit_tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The last `n` audit events about files of this scope (all if ``n <= 0``), oldest first, their
        ``path`` relative to the scope."""
        check_int("n", n, minimum=None)
        keep = lambda e: scoped_event(self._prefix, e)  # noqa: E731
        if n <= 0:
            return [e for e in map(keep, await self._store.audit_tail.aio(0)) if e is not None]
        return await newest_matching(self._store.audit_tail.aio, keep, n, oldest_first=True)

    # -- record logs and conversations ----------------------------------------------------------------

    def records(self, name: str) -> RecordLog:
        """The record log at scope path `name` (`MemoryStore.records`; its ``name`` is the store path)."""
        full = joined(self._prefix, scope_path(name))
        self._refuse_symlink_escape(full)  # a few lstat calls: cheap enough to block for
        return self._store.records(full)

    def session(self, name: str) -> Conversation:
        """The conversation of session `name` within this scope (the log ``<prefix>/sessions/<name>``)."""
        return Conversation(self.records(conversation_log(name)), name, validate=self._store.validate_messages)

    @syncify
    async def search(
        self,
        query: str,
        prefix: str = "",
        limit: int = 10,
        where: Mapping[str, Scalar] | None = None,
        *,
        embed: Embed | None = None,
    ) -> list[SearchHit]:
        """`MemoryStore.search` over the scope's files only (hit paths relative to the scope). The
        transcript is not part of a scope, so there is no `include_transcript`."""
        full = await self._full(prefix, directory=True)
        hits = await self._store.search.aio(query, prefix=full, limit=limit, where=where, embed=embed)
        return [
            dataclasses.replace(hit, path=relative(self._prefix, hit.path), meta=self._meta(hit.meta)) for hit in hits
        ]
