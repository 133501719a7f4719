"""Orbiter's memory protocol (``orbiter.memory.base.MemoryStore``) over a flyteplugins-memory store.

Orbiter is not on PyPI, so `types` defines minimal equivalents of its data types (`MemoryStatus`,
`MemoryMetadata`, `MemoryItem` and the System/Human/AI/Tool subtypes, `MemoryError`) as its documentation
describes them. The adapter takes any objects of the same shape (a pydantic ``model_dump``); it loads items
back as ``orbiter.memory.base`` classes when that package is importable (imported lazily, never a
dependency), else as the ones here.

Layout: one JSON file per item, ``orbiter/<user>/<session>/<agent>/<task>/<id>.json``, labelled with file
metadata (``orbiter_id``, ``memory_type``, ``status``, the scope ids, ``created_at``) that `search`, `get`
and `clear` filter on with ``list_paths(where=...)``. A scope id that is unset is the segment ``_``; one of
letters, digits and ``_.-`` (starting with a letter or digit, at most 40 characters) is itself; any other
is ``~`` and 32 hex digits of its sha256. Different users and sessions therefore never share a directory,
and filters match the exact ids kept in the metadata, never the segments. Concurrent tasks adding items to
one key write different files, so their saves merge instead of conflicting.

An id names one item in the whole key, as Orbiter's ``get(item_id)`` (no scope) implies: adding an id
already stored replaces that item, wherever its scope put it. Two tasks adding one id under different
scopes write different paths, which the journal would merge into two items (and a bare `get` could
return either user's); so every add also writes ``orbiter-ids/<id>.json`` (``{"id", "path"}``, outside
``orbiter/`` so no listing or search meets it) with ``expected_sha``, in the same commit. Its path
depends on the id alone, so of two racing adds the second conflicts, refreshes and re-applies: the item
moves to its scope, one item remains. `clear` deletes the claims of the items it deletes.

Durability: with ``autosave=True`` (the default) every `add`, `transition` and `clear` commits at once
(one atomic save per call), so an item added in one Flyte task is there for the next even if the task
dies right after. ``autosave=False`` keeps `add` in the handle until `flush()` (many adds, one commit);
`transition` and `clear` always commit (with the pending adds). A commit that meets a real conflict
(another task changed the same item) refreshes and re-applies the call to the newest state, so the status
machine is checked against what is committed. Reads (`get`, `search`) first move the handle to the newest
commit, as the Definable and Upsonic adapters do: an item another handle purged or deleted, or a store
deleted since, is not served from this handle's old state (absent, or `ContentPurged`/`StoreDeleted`).

A handle the caller gave (instead of a key) stays the caller's (docs/decisions/0138): while it holds
unsaved changes, reads do not refresh it (a refresh would drop the caller's conflicting edits; with
``autosave=False`` the adapter's own pending adds count too) and read it as it is; a write (`add`,
`transition`, `clear`, `purge`, `flush`) raises `UnsavedChanges` before staging anything, since its save
would commit the caller's changes under the adapter's name. With ``autosave=False`` the adapter tells its
pending adds from the caller's changes by path (`MemoryStore.unsaved_paths`); adds the caller's own save
committed are no longer its pending ones. A change the caller makes to the handle from another coroutine
or thread while an adapter call runs is not seen, and is committed with it (share a handle only between
calls, or give the adapter the key). An `add` that is
refused (bad input, a forbidden status move, a read-only path) reverts what it staged, so no later
`flush` commits it.

Forgetting: `purge(item_id)` removes an item and its id's claim from every stored version.
``store.purge(path)`` of the item file alone leaves the claim (``orbiter-ids/<id>.json``), which names
the id and the item's path (user and session).

The lifecycle is the adapter's: writes through the store handle itself (``write_json``, ``restore`` of an
older version of an item file) are beneath it and can set any status (a DISCARD item restored to its
ACCEPTED version reads as ACCEPTED).

Search: as Orbiter's reference stores (``ShortTermMemory`` and the SQLite backend), a non-empty ``query``
keeps the items whose ``content`` holds it as a case-insensitive substring (``query.lower() in
content.lower()``: "python" finds "Pythons", "pythons" does not find "python"; ``%`` and ``_`` are plain
characters, not SQL wildcards); every result, with a query or without, comes newest first by
``created_at`` read as a time (ISO-8601, no offset meaning UTC; a stamp that is not one comes after all
that are), as the SQLite backend orders them. Ranked (BM25) search stays on the handle: ``(await
adapter.handle()).search(...)``.

Status: an item's status only moves along Orbiter's lifecycle (draft -> accepted | discard, accepted ->
discard), whether through `transition` or an `add` of a stored id with another status: such an `add`
that the lifecycle forbids (a forged item moving discard back to accepted, or accepted to draft) raises
`InvalidStatusTransition`, an Orbiter ``MemoryError`` (Orbiter's own class too when it is importable),
checked against the committed status, and stores nothing. An `add` at the stored status replaces the
item as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from flyteplugins_memory import (
    ConcurrencyError,
    InvalidArgument,
    InvalidContent,
    InvalidPath,
    MemoryStore,
    PurgeResult,
    UnsavedChanges,
)

from .layout import (
    CLAIMS,
    ROOT,
    claim_path,
    filter_of,
    labels_of,
    load_item,
    matches_extra,
    newest_first,
    path_of,
)
from .types import (
    ALLOWED,
    AIMemory,
    HumanMemory,
    InvalidMemoryInput,
    InvalidStatusTransition,
    ItemNotFound,
    MemoryError,
    MemoryItem,
    MemoryMetadata,
    MemoryStatus,
    SystemMemory,
    ToolMemory,
    check_id,
    check_transition,
    dump_item,
    now,
)

__all__ = [
    "AIMemory",
    "HumanMemory",
    "InvalidMemoryInput",
    "InvalidStatusTransition",
    "ItemNotFound",
    "MemoryError",
    "MemoryItem",
    "MemoryMetadata",
    "MemoryStatus",
    "OrbiterMemoryStore",
    "SystemMemory",
    "ToolMemory",
]

_ATTEMPTS = 5
#: the store's refusals of input (over a limit: a search query, the 4 KiB of labels; not storable): at
#: this seam they become `InvalidMemoryInput`, the adapter's one error for bad input, with the store's
#: error as __cause__
_REFUSED = (InvalidArgument, InvalidContent, InvalidPath)
T = TypeVar("T")


# -- the adapter ------------------------------------------------------------------------------------------


class OrbiterMemoryStore:
    """Orbiter's ``MemoryStore`` protocol (async `add`, `get`, `search`, `clear`) over one store key.

    `store` is an open `MemoryStore` handle, or a key opened with ``MemoryStore.get_or_create`` on first use.
    """

    def __init__(self, store: MemoryStore | str, *, autosave: bool = True, actor: str = "orbiter") -> None:
        if not isinstance(store, MemoryStore | str) or not isinstance(autosave, bool):
            raise InvalidMemoryInput("OrbiterMemoryStore needs a MemoryStore or a key, and autosave a bool")
        self._store = store if isinstance(store, MemoryStore) else None
        self._key = store if isinstance(store, str) else None
        self._autosave, self._actor = autosave, actor
        self._lock = asyncio.Lock()
        self._touched: list[str] = []  # the paths the commit under way staged (reverted if it fails)
        #: the paths this adapter's adds staged and `flush` has not committed (``autosave=False``)
        self._pending: set[str] = set()

    async def handle(self) -> MemoryStore:
        """The underlying `MemoryStore` (opened on first use when given a key)."""
        if self._store is None:
            self._store = await MemoryStore.get_or_create.aio(key=self._key or "")
        return self._store

    async def add(self, item: Any) -> None:
        """Store `item` (replacing an item of the same id, wherever its scope put it). A stored id whose
        status the item changes must follow the lifecycle, as `transition`: `InvalidStatusTransition`
        otherwise, nothing stored."""
        data = dump_item(item)

        async def apply(store: MemoryStore) -> None:
            await self._write(store, data, reason="add")

        if self._autosave:
            await self._commit(apply)
            return
        store = await self.handle()
        async with self._lock:
            self._refuse_unsaved(store, "add")
            before, self._touched = set(self._pending), []
            try:
                await apply(store)
            except BaseException:  # a refused add leaves nothing staged for a later flush to commit
                await store.revert.aio([p for p in self._touched if p not in before])
                raise
            self._pending |= set(self._touched)

    async def get(self, item_id: str) -> Any | None:
        """The item with `item_id`, or None if there is none, in the newest committed state (see
        `refresh`: a handle with unsaved changes is read as it is)."""
        check_id(item_id)
        store = await self._read_handle()
        path = await self._path_of_id(store, item_id)
        return None if path is None else load_item(await store.read_json.aio(path))

    async def search(
        self,
        *,
        query: str = "",
        metadata: Any = None,
        memory_type: str | None = None,
        status: MemoryStatus | str | None = None,
        limit: int = 10,
    ) -> list[Any]:
        """Items matching every filter (and whose content holds `query`, ignoring case), newest first."""
        if not isinstance(query, str):
            raise InvalidMemoryInput(f"query must be a str, got {type(query).__name__}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidMemoryInput(f"limit must be a positive int, got {limit!r}")
        prefix, where, extra = filter_of(metadata, memory_type, status)
        store = await self._read_handle()
        try:
            paths = await self._ranked(store, prefix, where)
        except _REFUSED as exc:
            raise InvalidMemoryInput(f"search cannot take this input: {exc}") from exc
        if query and paths:  # every candidate's content is read: one batch of parallel fetches
            await store.prefetch.aio(prefix)
        wanted = query.lower()
        found: list[Any] = []
        for path in paths:
            data = await store.read_json.aio(path)
            content = data.get("content")
            if wanted and not (isinstance(content, str) and wanted in content.lower()):
                continue
            if matches_extra(data, extra):
                found.append(load_item(data))
            if len(found) == limit:
                break
        return found

    async def clear(self, *, metadata: Any = None) -> int:
        """Delete the adapter's items in scope `metadata` (all of them for None); how many were deleted."""
        prefix, where, extra = filter_of(metadata, None, None)

        async def apply(store: MemoryStore) -> int:
            doomed = await self._listed(store, prefix, where)
            if extra:
                doomed = [p for p in doomed if matches_extra(await store.read_json.aio(p), extra)]
            for path in doomed:
                self._touched += [path, claim_path(path)]
                await store.delete.aio(path, actor=self._actor, reason="clear")
                await store.delete.aio(claim_path(path), actor=self._actor, reason="clear")
            return len(doomed)

        try:
            return await self._commit(apply, refresh=True)
        except _REFUSED as exc:  # a scope filter over the labels' budget
            raise InvalidMemoryInput(f"clear cannot take this filter: {exc}") from exc

    async def transition(self, item_id: str, new_status: MemoryStatus | str) -> Any:
        """Load the item, move it to `new_status` (`InvalidStatusTransition` if the lifecycle forbids it),
        save it at once and return it. `KeyError` (an `InvalidMemoryInput` too) if there is no such item."""
        check_id(item_id)
        if not isinstance(new_status, str) or new_status not in ALLOWED:
            raise InvalidMemoryInput(f"new_status must be one of {sorted(ALLOWED)}, got {new_status!r}")

        async def apply(store: MemoryStore) -> Any:
            path = await self._path_of_id(store, item_id)
            if path is None:
                raise ItemNotFound(f"no memory with id {item_id!r}")
            data = await store.read_json.aio(path)
            check_transition(data["status"], str(new_status))
            item = load_item({**data, "status": str(new_status), "updated_at": now()})
            await self._write(store, dump_item(item), reason=f"status {data['status']} -> {new_status}")
            return item

        return await self._commit(apply, refresh=True)

    async def purge(self, item_id: str, *, actor: str | None = None, reason: str = "") -> list[PurgeResult]:
        """Forget the item `item_id` wholly: its file and its id's claim are purged (``MemoryStore.purge``:
        content and labels removed from every stored version, audit op ``purge`` with `actor`, the
        adapter's by default, and `reason`), one purge commit per path.

        ``store.purge(path)`` of the item file alone leaves the claim ``orbiter-ids/<id>.json``, which
        names the id and the item's path (its user and session); this purges both, and also a claim left
        over that way (with the path it names). An id with neither is a no-op (``[]``). Refused with
        `UnsavedChanges` while the handle holds any unsaved change (``flush()`` the adapter's own adds
        first): the store's purge would save them under the purge. What stays: the commit log's records
        of the paths (names, not content)."""
        check_id(item_id)
        actor = self._actor if actor is None else actor
        store = await self.handle()
        async with self._lock:
            if store.has_unsaved_changes():
                raise UnsavedChanges(
                    "Orbiter purge: the store handle holds unsaved changes; save() or revert() them first (flush() "
                    "the adapter's own adds), or give the adapter its own handle: the key"
                )
            await store.refresh.aio()
            doomed = await self._listed(store, ROOT, {"orbiter_id": item_id})
            claim = f"{CLAIMS}/{item_id}.json"
            held = await store.read_json.aio(claim)
            named = held.get("path") if isinstance(held, dict) else None
            if isinstance(named, str) and named.startswith(f"{ROOT}/") and named not in doomed:
                doomed.append(named)  # a claim whose item was purged on its own
            if held is not None or doomed:
                doomed.append(claim)
            return [await store.purge.aio(p, actor=actor, reason=reason) for p in doomed]

    async def flush(self) -> None:
        """Commit what `add` kept in the handle (``autosave=False``); a no-op when there is nothing (the
        caller's own unsaved changes on a handle it gave are never saved by a flush alone).

        Not retried: if another task saved an item of the same id meanwhile, `ConcurrencyError` is raised
        and the handle keeps its adds (``refresh()`` drops the conflicting ones; add them again)."""
        store = await self.handle()
        async with self._lock:
            if not self._own_pending(store):
                return
            self._refuse_unsaved(store, "flush")
            await store.save.aio(actor=self._actor)
            self._pending.clear()

    async def refresh(self) -> None:
        """Pick up what other tasks saved to the key since this handle loaded (never in the middle of
        this adapter's commit, whose staged changes a refresh could drop). While a handle the caller gave
        holds unsaved changes the adapter did not make, it is left as it is (a refresh would drop the
        caller's conflicting edits); the adapter's own pending adds (``autosave=False``) do not stop it."""
        store = await self.handle()
        async with self._lock:
            if not self._callers_unsaved(store):
                await store.refresh.aio()

    # -- helpers ------------------------------------------------------------------------------------------

    def _own_pending(self, store: MemoryStore) -> bool:
        """Whether the handle still holds adds of this adapter (``autosave=False``) that no save committed
        (a flush, or the caller's own save of the handle)."""
        self._pending &= set(store.unsaved_paths())
        return bool(self._pending)

    def _callers_unsaved(self, store: MemoryStore) -> bool:
        """Whether the handle holds unsaved changes this adapter did not make (`MemoryStore.unsaved_paths`
        beside its pending adds; a change of store settings has no path and counts as the caller's)."""
        if not store.has_unsaved_changes():
            return False
        unsaved = set(store.unsaved_paths())
        self._pending &= unsaved
        return not unsaved or bool(unsaved - self._pending)

    def _refuse_unsaved(self, store: MemoryStore, what: str) -> None:
        """`UnsavedChanges` if the handle holds unsaved changes the adapter did not make, before anything
        is staged: the adapter's save would commit them under its name (docs/decisions/0138)."""
        if self._callers_unsaved(store):
            raise UnsavedChanges(
                f"Orbiter {what}: the store handle holds unsaved changes the adapter did not make; save() or "
                "revert() them first, or give the adapter its own handle: the key"
            )

    async def _read_handle(self) -> MemoryStore:
        """The handle, moved to the newest commit first unless it holds unsaved changes (the caller's, or
        this adapter's pending adds), which a refresh could drop: then it is read as it is."""
        store = await self.handle()
        async with self._lock:  # never refresh under a commit under way: it could drop what it staged
            if not store.has_unsaved_changes():
                await store.refresh.aio()
        return store

    async def _commit(self, apply: Callable[[MemoryStore], Awaitable[T]], *, refresh: bool = False) -> T:
        """Stage `apply`'s changes and save (`refresh`: on the newest state, as `refresh` moves it); on a
        conflict, refresh and re-apply to the newest state. What an attempt
        staged is reverted when it fails or conflicts, so no later save commits it. Refused before anything
        is staged while the handle holds unsaved changes the adapter did not make."""
        store = await self.handle()
        async with self._lock:
            self._refuse_unsaved(store, "write")
            if refresh and not self._callers_unsaved(store):
                await store.refresh.aio()  # keeps the pending adds that do not conflict, as `refresh` does
            for attempt in range(_ATTEMPTS):
                self._touched = []
                try:
                    result = await apply(store)
                    await store.save.aio(actor=self._actor)
                    self._pending.clear()  # a save commits the pending adds too
                    return result
                except ConcurrencyError:
                    await store.revert.aio(self._touched)
                    if attempt == _ATTEMPTS - 1:
                        raise
                    await store.refresh.aio()
                except BaseException:
                    await store.revert.aio(self._touched)
                    raise
        raise AssertionError("unreachable")

    async def _write(self, store: MemoryStore, data: dict[str, Any], *, reason: str) -> None:
        path = path_of(data)
        stored = await self._listed(store, ROOT, {"orbiter_id": data["id"]})
        for old in stored:  # the lifecycle holds for any write of a stored id (an add too)
            meta = await store.get_meta.aio(old)
            held = None if meta is None else meta.metadata.get("status")
            if held is not None and held != data["status"]:
                check_transition(str(held), data["status"])
        moved = [old for old in stored if old != path]
        self._touched += [path, *moved, claim_path(path)]
        try:  # the write first: one the store refuses must not leave the old copy's delete queued
            await store.write_json.aio(path, data, actor=self._actor, reason=reason, metadata=labels_of(data))
        except _REFUSED as exc:
            raise InvalidMemoryInput(f"item {data['id']!r} cannot be stored: {exc}") from exc
        for old in moved:  # the same id under another scope: it moves
            await store.delete.aio(old, actor=self._actor, reason=reason)
        await self._claim(store, data["id"], path, reason=reason)

    async def _claim(self, store: MemoryStore, item_id: str, path: str, *, reason: str) -> None:
        """Point the id's claim at `path`, guarded: if anyone commits the claim after our base, the save
        conflicts (an add of the same id racing ours, whatever scope it wrote)."""
        claim = claim_path(path)
        held = await store.current_sha.aio(claim)
        body = {"id": item_id, "path": path}
        await store.write_json.aio(claim, body, actor=self._actor, reason=reason, expected_sha=held)

    async def _listed(self, store: MemoryStore, prefix: str, where: dict[str, str]) -> list[str]:
        return await store.list_paths.aio(prefix, where=where or None)

    async def _path_of_id(self, store: MemoryStore, item_id: str) -> str | None:
        paths = await self._listed(store, ROOT, {"orbiter_id": item_id})
        return paths[0] if paths else None

    async def _ranked(self, store: MemoryStore, prefix: str, where: dict[str, str]) -> list[str]:
        """Candidate paths in result order: newest ``created_at`` first (read from the labels, no content)."""
        listed = await self._listed(store, prefix, where)
        if not listed:
            return []
        metas = {p: await store.get_meta.aio(p) for p in listed}
        return newest_first({p: str(m.metadata.get("created_at", "")) if m else "" for p, m in metas.items()})
