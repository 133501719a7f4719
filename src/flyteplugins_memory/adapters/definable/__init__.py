"""A Definable memory store (``definable.memory.store.base.MemoryStore``) kept in a flyteplugins-memory store.

Definable's store protocol is async and works on ``MemoryEntry`` objects (``definable.memory.types``).
Definable itself needs Python >= 3.12 and is never imported at module import: the real ``MemoryEntry``
is used when importable, otherwise any object with the same fields works (duck typing) and entries come
back as `MemoryEntry`, the small dataclass below.

Layout (one JSON object per entry, never a whole-table file, so concurrent tasks writing one key merge)::

    <prefix>/users/<user>/sessions/<session>/<created_ns>-<memory_id>.json
    <prefix>/ids/<memory_id>.json          the id's claim: {"memory_id", "path"}, no metadata

with metadata ``{"memory_id", "user_id", "session_id"}`` so `get_entry`, `delete` and `delete_session`
find files through a metadata listing (no content is read). Two tasks adding one memory_id write entries
at different paths (the created_at differs, or the user or session does), which the journal would merge
into two entries; so `add` also writes the id's claim, create-only (``expected_sha``), in the same
commit. Its path depends on the id alone, so of two racing adds the second commit conflicts, retries on
the newer state and finds the id taken: exactly one add wins, the other raises `DuplicateMemoryId`.
`delete` and `delete_session` remove the claim with the entry. Entries stored before claims existed have
none; the listing still finds them, so a plain duplicate is refused as before. Ids that are not plain lowercase names
(``[a-z0-9][a-z0-9_-]*``, at most 40 characters) are encoded as ``_`` + base32, or ``__`` + 128 bits of
sha256 when long (a path must fit one file name): an id with ``/``, ``..``, ``%`` or control characters
never leaves its directory or meets another's. Ids are also kept as metadata labels, so together they are
limited to the 4 KiB of a file's metadata (`InvalidMetadata` beyond).

Durability: every mutating call (`add`, `update`, `delete`, `delete_session`) is one commit, so a task
that dies loses nothing it was told was stored. Reads first move the handle to the newest commit, so
entries other tasks saved are seen (and entries purged or deleted elsewhere are not).

A handle the caller gave (instead of a key) stays the caller's (docs/decisions/0138): while it holds
unsaved changes, the adapter reads it without refreshing (a refresh would drop the caller's conflicting
edits), and refuses to write (`UnsavedChanges`, nothing staged), since its save would commit the caller's
changes under the adapter's name; ``save()`` or ``revert()`` them first, or give the adapter the key.

Forgetting: `purge` removes an entry and its id's claim from every stored version. ``store.purge(path)``
of the entry file alone leaves the claim (``<prefix>/ids/<id>.json``), which names the id and the entry's
path (user and session).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from ... import ConcurrencyError, InvalidArgument, MemoryStore, PurgeResult, UnsavedChanges
from .._segments import encode_id
from .entries import (
    ENTRY_FIELDS,
    FORMAT,
    DuplicateMemoryId,
    MemoryEntry,
    check_id,
    check_prefix,
    check_time,
    default_entry_class,
    entry_fields,
    entry_of,
    time_key,
)

_SAVE_ATTEMPTS = 8

__all__ = [
    "ENTRY_FIELDS",
    "FORMAT",
    "DefinableMemoryStore",
    "DuplicateMemoryId",
    "MemoryEntry",
    "check_prefix",
    "check_time",
    "default_entry_class",
    "encode_id",
    "entry_fields",
    "entry_of",
    "time_key",
]


class DefinableMemoryStore:
    """Definable's async ``MemoryStore`` protocol over a flyteplugins-memory store.

    Args:
        store: An open `MemoryStore` handle, or the key of one (opened with ``get_or_create`` by
            `initialize`, or by the first call).
        prefix: The store directory the entries live under.
        entry_class: The class entries are returned as; by default the class of the last entry this
            adapter was given, else Definable's ``MemoryEntry`` when importable, else `MemoryEntry`.
        actor: Recorded as the actor of every commit.

    `update` matches by memory_id and, like Definable's SQLite store, replaces everything but the
    entry's session, user and created_at (an entry never moves); an unknown memory_id is a no-op, as
    in Definable's stores. `add` of a stored memory_id raises `DuplicateMemoryId`, also when another
    task adds it at the same moment (one of the two wins). `delete` of an unknown id is a no-op; of a
    known one it removes every copy. `delete_session` without a user deletes the session of every
    user, as Definable's stores do.

    Like Definable's built-in stores it is an async context manager: ``async with
    DefinableMemoryStore(key) as store:`` initializes on entry and closes on exit (see `close`).
    """

    def __init__(
        self,
        store: MemoryStore | str,
        *,
        prefix: str = "definable",
        entry_class: type | None = None,
        actor: str = "definable",
    ) -> None:
        self._store = store if isinstance(store, MemoryStore) else None
        self._key = store if isinstance(store, str) else None
        self._owns_store = self._store is None  # opened from the key: released by close()
        #: True from `initialize` to `close`, the flag every one of Definable's built-in stores keeps
        self._initialized = False
        if self._store is None and self._key is None:
            raise InvalidArgument("store is a MemoryStore or a key")
        self.prefix = check_prefix(prefix)
        if not isinstance(actor, str) or not actor:
            raise InvalidArgument(f"actor is a non-empty str, got {actor!r}")
        self.actor = actor
        self._entry_class = entry_class
        self._seen_class: type | None = None
        self._lock = asyncio.Lock()
        self._touched: list[str] = []  # the paths the commit under way staged (reverted if it fails)
        self._last_added_ns = 0

    @property
    def store(self) -> MemoryStore:
        if self._store is None:
            raise InvalidArgument("call initialize() first")
        return self._store

    # -- lifecycle ------------------------------------------------------------------------------------

    async def initialize(self) -> None:
        """Open the store from its key (idempotent; a handle given to the constructor is used as it is)."""
        if self._store is None:
            assert self._key is not None
            self._store = await MemoryStore.get_or_create.aio(key=self._key)
        self._initialized = True

    async def close(self) -> None:
        """Release a handle the adapter opened from its key (saving anything unsaved first; every mutating
        call already committed), so a later call opens the store again (Definable's stores re-initialize
        lazily after ``close`` too). A handle it was given stays open and stays the caller's: its unsaved
        changes are the caller's to save, under the caller's name."""
        async with self._lock:
            if self._owns_store and self._store is not None and self._store.has_unsaved_changes():
                await self._store.save.aio(actor=self.actor)
            if self._owns_store:
                self._store = None
            self._initialized = False

    async def __aenter__(self) -> DefinableMemoryStore:
        """``async with DefinableMemoryStore(key) as store:``, as Definable's own stores: `initialize` on
        entry, the adapter itself as the target."""
        await self.initialize()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """`close` on exit, also when the block raised (the exception is never suppressed), as Definable's
        own stores. Every mutating call already committed, so a block that fails half-way keeps what
        its finished calls stored."""
        await self.close()

    # -- writes ---------------------------------------------------------------------------------------

    async def add(self, entry: Any) -> None:
        fields = entry_fields(entry)
        self._seen_class = type(entry)
        path, added_ns = self._path_for(fields), self._next_added_ns()

        async def write() -> bool:
            if await self._path_of(fields["memory_id"]) is not None:
                raise DuplicateMemoryId(f"memory_id {fields['memory_id']!r} is already stored")
            await self._write(path, fields, added_ns)
            await self._claim(fields["memory_id"], path)
            return True

        await self._commit(write, "add")

    async def update(self, entry: Any) -> None:
        fields = entry_fields(entry)
        self._seen_class = type(entry)

        async def write() -> bool:
            path = await self._path_of(fields["memory_id"])
            if path is None:
                return False
            stored = await self.store.read_json.aio(path)
            kept = {name: stored["entry"].get(name) for name in ("session_id", "user_id", "created_at")}
            await self._write(path, {**fields, **kept}, stored["added_ns"])
            return True

        await self._commit(write, "update")

    async def delete(self, memory_id: str) -> None:
        check_id("memory_id", memory_id)

        async def remove() -> bool:  # every copy: a race before claims existed may have left two
            return await self._remove(await self._paths_of(memory_id))

        await self._commit(remove, "delete")

    async def delete_session(self, session_id: str, user_id: str | None = None) -> None:
        check_id("session_id", session_id)
        check_id("user_id", user_id, optional=True)

        async def remove() -> bool:
            return await self._remove(await self._session_paths(session_id, user_id))

        await self._commit(remove, "delete_session")

    async def purge(self, memory_id: str, *, actor: str | None = None, reason: str = "") -> list[PurgeResult]:
        """Forget the entry `memory_id` wholly: every copy of it and its id's claim are purged
        (``MemoryStore.purge``: their content and labels removed from every stored version, audit op
        ``purge`` with `actor`, the adapter's by default, and `reason`), one purge commit per path.

        ``store.purge(path)`` of the entry file alone leaves the claim, which names the id and the
        entry's path (user and session); this purges both, and also a claim left over that way (the
        path it names is purged with it). An id with neither is a no-op (``[]``). Refused with
        `UnsavedChanges` when the handle holds unsaved changes (the store's purge would save them first,
        under the adapter's name). What stays: the commit log's records of the paths (names, not content)."""
        check_id("memory_id", memory_id)
        actor = self.actor if actor is None else actor
        async with self._lock:
            await self.initialize()
            self._refuse_unsaved("purge")
            await self.store.refresh.aio()
            paths = await self._paths_of(memory_id)
            claim = f"{self.prefix}/ids/{encode_id(memory_id)}.json"
            held = await self.store.read_json.aio(claim)
            named = held.get("path") if isinstance(held, dict) else None
            if isinstance(named, str) and named.startswith(f"{self.prefix}/users/") and named not in paths:
                paths.append(named)  # a claim whose entry was purged (or deleted) on its own
            doomed = list(dict.fromkeys([*paths, *(self._claim_path(p) for p in paths)]))
            if held is not None and claim not in doomed:
                doomed.append(claim)
            return [await self.store.purge.aio(p, actor=actor, reason=reason) for p in doomed]

    # -- reads ----------------------------------------------------------------------------------------

    # Reads hold the commit lock too: a read's refresh in the middle of a commit could drop what the
    # commit has staged (a conflicting change), and the commit would then save without it.

    async def get_entries(self, session_id: str, user_id: str = "default", limit: int | None = None) -> list[Any]:
        check_id("session_id", session_id)
        check_id("user_id", user_id)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidArgument(f"limit is None or an int >= 0, got {limit!r}")
        async with self._lock:
            await self._refresh()
            paths = await self._session_paths(session_id, user_id)
            if paths:  # one batch of parallel fetches, not one round trip per entry
                await self.store.prefetch.aio(paths[0].rsplit("/", 1)[0])
            stored = [await self.store.read_json.aio(p) for p in paths]
        stored.sort(key=lambda s: (time_key(s["entry"].get("created_at")), s["added_ns"]))
        chosen = stored if limit is None else stored[:limit]
        return [entry_of(self.entry_class, s["entry"]) for s in chosen]

    async def get_entry(self, memory_id: str) -> Any | None:
        check_id("memory_id", memory_id)
        async with self._lock:
            await self._refresh()
            path = await self._path_of(memory_id)
            found = None if path is None else await self.store.read_json.aio(path)
        return None if found is None else entry_of(self.entry_class, found["entry"])

    async def count(self, session_id: str, user_id: str = "default") -> int:
        check_id("session_id", session_id)
        check_id("user_id", user_id)
        async with self._lock:
            await self._refresh()
            return len(await self._session_paths(session_id, user_id))

    @property
    def entry_class(self) -> type:
        return self._entry_class or self._seen_class or default_entry_class()

    # -- internals ------------------------------------------------------------------------------------

    def _path_for(self, fields: dict[str, Any]) -> str:
        user, session = encode_id(fields["user_id"]), encode_id(fields["session_id"])
        created_ns = max(int(float(fields["created_at"]) * 1e9), 0)
        return f"{self.prefix}/users/{user}/sessions/{session}/{created_ns:020d}-{encode_id(fields['memory_id'])}.json"

    async def _write(self, path: str, fields: dict[str, Any], added_ns: int) -> None:
        labels = {"memory_id": fields["memory_id"], "user_id": fields["user_id"], "session_id": fields["session_id"]}
        body = {"format": FORMAT, "added_ns": added_ns, "entry": fields}
        self._touched.append(path)
        await self.store.write_json.aio(path, body, actor=self.actor, metadata=labels)

    def _claim_path(self, entry_path: str) -> str:
        """The claim of the id an entry file is named after (``<created_ns>-<encoded id>.json``)."""
        return f"{self.prefix}/ids/{entry_path.rsplit('/', 1)[-1].split('-', 1)[-1]}"

    async def _claim(self, memory_id: str, entry_path: str) -> None:
        """Write the id's claim, guarded: a claim committed by anyone since our base fails the save.
        No entry holds the id here, so a claim already there is left over; it is taken over."""
        claim = self._claim_path(entry_path)
        held = await self.store.current_sha.aio(claim)
        body = {"format": FORMAT, "memory_id": memory_id, "path": entry_path}
        self._touched.append(claim)
        await self.store.write_json.aio(claim, body, actor=self.actor, expected_sha=held)

    async def _remove(self, paths: list[str]) -> bool:
        """Delete entry files and their ids' claims; whether there were any."""
        for path in paths:
            self._touched += [path, self._claim_path(path)]
            await self.store.delete.aio(path, actor=self.actor)
            await self.store.delete.aio(self._claim_path(path), actor=self.actor)
        return bool(paths)

    async def _paths_of(self, memory_id: str) -> list[str]:
        if not isinstance(memory_id, str):
            return []
        return await self.store.list_paths.aio(self.prefix, where={"memory_id": memory_id})

    async def _path_of(self, memory_id: str) -> str | None:
        paths = await self._paths_of(memory_id)
        return paths[0] if paths else None

    async def _session_paths(self, session_id: str, user_id: str | None) -> list[str]:
        where = {"session_id": session_id} if user_id is None else {"session_id": session_id, "user_id": user_id}
        under = self.prefix if user_id is None else f"{self.prefix}/users/{encode_id(user_id)}"
        return await self.store.list_paths.aio(under, where=where)

    def _next_added_ns(self) -> int:
        """Insertion order within this process, even when the clock does not move between adds."""
        self._last_added_ns = max(time.time_ns(), self._last_added_ns + 1)
        return self._last_added_ns

    async def _refresh(self) -> None:
        """Move to the newest commit, unless the handle holds unsaved changes: a handle the caller gave
        keeps them (a refresh would drop the conflicting ones), and is read as it is
        (docs/decisions/0138-adapters-over-a-callers-handle.md)."""
        await self.initialize()
        if not self.store.has_unsaved_changes():
            await self.store.refresh.aio()

    def _refuse_unsaved(self, what: str) -> None:
        """Every call commits at once, so unsaved changes at the start of a write are the caller's: the
        adapter's save would commit them under its name. `UnsavedChanges` before anything is staged."""
        if self.store.has_unsaved_changes():
            raise UnsavedChanges(
                f"Definable {what}: the store handle holds unsaved changes the adapter did not make; save() or "
                "revert() them first, or give the adapter its own handle: the key"
            )

    async def _commit(self, change: Callable[[], Awaitable[bool]], reason: str) -> None:
        """Apply `change` to the newest state and save it as one commit; on a conflicting concurrent save
        (the same entry or id changed elsewhere), apply it again to the newer state. What an attempt staged
        is reverted when it fails or conflicts (the refresh would keep our entry at a path nobody else
        wrote), so neither the retry nor a later call commits it."""
        async with self._lock:
            await self.initialize()
            self._refuse_unsaved(reason)
            for attempt in range(_SAVE_ATTEMPTS):
                await self._refresh()
                self._touched = []
                try:
                    if not await change():
                        return
                    await self.store.save.aio(actor=self.actor, reason=f"definable {reason}")
                    return
                except ConcurrencyError:
                    await self.store.revert.aio(self._touched)
                    if attempt == _SAVE_ATTEMPTS - 1:
                        raise
                except BaseException:
                    await self.store.revert.aio(self._touched)
                    raise
