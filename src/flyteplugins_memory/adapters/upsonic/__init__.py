"""Upsonic storage backends (``upsonic.storage.base.Storage`` and ``AsyncStorage``) kept in a
flyteplugins-memory store.

Upsonic's ``Memory`` persists everything through a storage backend: sessions (chat history, summary,
metadata and every run, including the incomplete ones, paused, error or cancelled, that another process
resumes with ``agent.continue_run(run_id=...)``), user memories (profiles), cultural knowledge, knowledge
base registry rows, generic models and usage entries. `FlyteStorage` (sync) and `AsyncFlyteStorage`
(async) store them in one key, one JSON file per row (see `tables`)::

    <prefix>/sessions/<session_id>/session.json        the session without its runs
    <prefix>/sessions/<session_id>/runs/<run_id>.json   one per run
    <prefix>/users/<user_id>.json                       a user memory
    <prefix>/culture/<id>.json   <prefix>/knowledge/<id>.json
    <prefix>/models/<collection>/<key>.json   <prefix>/usage/<entry_id>.json

A table named in the constructor (``session_table=...``, as every Upsonic ``Storage`` takes) lives in a
directory of its kind and name instead (``<prefix>/sessions.<session_table>/<session_id>/session.json``);
Upsonic's default names (``upsonic_sessions``, ...) are the directories above, as no name is.

Ids are path segments (encoded when not plain). Runs are rows of their own, so two tasks running
different runs of one session both keep theirs; an upsert writes only the runs that differ from the
stored ones and never deletes runs (``delete_session`` does). A completed run is final: a stale copy of
it in another status (read before another task resumed and finished it) leaves it completed, so it is
never resumed twice; otherwise the last upsert of a run wins, as does the session row itself (messages,
summary, metadata), as in Upsonic's database backends. A session belongs to the user it was created with
(None included): an upsert under another ``user_id`` raises `SessionOfAnotherUser`, and reads filtered by
``user_id`` never return another user's rows.

Upsonic is imported when this module is (not by the package): with it installed the classes subclass
Upsonic's ``Storage`` / ``AsyncStorage`` and return Upsonic's objects; without it (Upsonic pins protobuf<6,
which flyte cannot install beside) they still serve the contract over dicts, and ``deserialize=True``
returns the stored dicts. Bad input raises the package's `InvalidArgument`, a ``ValueError`` as
Upsonic's contract names.
"""

from __future__ import annotations

import abc
from typing import Any

from ... import InvalidArgument, MemoryStore
from . import rows
from .calls import TableCalls, where
from .sessions import SessionOfAnotherUser, SessionRows
from .sync_loop import LOOP, sync_call
from .tables import DEFAULT_TABLE_NAMES, Tables, exclusive, labels_of, matches, page, sort_rows, table_dirs, table_names

#: the adapter's tables -> the attribute Upsonic's base keeps each one's name in
TABLE_ATTRIBUTES = {
    "sessions": "session_table_name",
    "users": "user_memory_table_name",
    "culture": "cultural_knowledge_table_name",
    "knowledge": "knowledge_table_name",
    "usage": "usage_entry_table_name",
}
__all__ = [
    "DEFAULT_TABLE_NAMES",
    "SYNC_CALLS",
    "TABLE_ATTRIBUTES",
    "AsyncFlyteStorage",
    "FlyteStorage",
    "SessionOfAnotherUser",
]

try:  # the framework's base classes when it is installed; plain objects otherwise (see the docstring)
    from upsonic.storage.base import AsyncStorage as _AsyncBase  # pyright: ignore[reportMissingImports]
    from upsonic.storage.base import Storage as _SyncBase  # pyright: ignore[reportMissingImports]
except ImportError:  # pragma: no cover - exercised where Upsonic is absent
    _AsyncBase = _SyncBase = object


class AsyncFlyteStorage(TableCalls, _AsyncBase):  # pyright: ignore[reportUntypedBaseClass, reportGeneralTypeIssues]
    """Upsonic's ``AsyncStorage`` over one flyteplugins-memory store.

    Args:
        store: An open `MemoryStore` handle, or the key of one (opened with ``get_or_create`` on first use).
        prefix: The store directory the tables live under.
        actor: Recorded as the actor of every commit.
        id: Upsonic's storage id (a new uuid by default).
        session_table, user_memory_table, cultural_knowledge_table, knowledge_table, usage_entry_table:
            The tables' names, as every Upsonic ``Storage`` takes them (kept as ``session_table_name`` and
            so on, as Upsonic's base does: None or ``""`` is the default name, ``upsonic_sessions`` and so
            on). A table not named, or named its default name, keeps the adapter's own directory
            (``sessions``, ``users``, ``culture``, ``knowledge``, ``usage``); any other name is the
            directory ``<kind's directory>.<name>`` under `prefix` (the name encoded as one path segment
            when not plain), so two storages with different names over one prefix keep apart and a
            directory never holds another kind's rows. Two tables of one name: `InvalidArgument`.

    Every mutating call is one commit (a task that dies loses nothing it was told was stored); every read
    first moves the handle to the newest commit, so rows other tasks saved are seen.

    Given your own handle (`store` a `MemoryStore`), the storage never drops or commits your work: while
    the handle you gave holds unsaved changes, the adapter reads it without refreshing (a refresh would
    drop the conflicting ones), and a mutating call raises `UnsavedChanges` before it stages anything
    (its commit would save them under its actor): ``save()`` or ``revert()`` them first, or give the
    adapter its own handle, the key. ``close()`` saves only a handle the storage opened itself. The limit:
    the check is made when a call starts, so a change made to that handle from another thread or coroutine
    while a storage call is in flight is not detected, and a write commits it with its own (decision 0140).

    Given a key, the storage keeps the Flyte context it is made in when that names the task's storage (a
    task context or a bound raw-data path), and its first call opens the key there from any thread (as
    Upsonic's ``run_awaitable_sync`` worker, which has no Flyte context); made where none is named, the
    first call's context decides (decision 0137 item 4, as LangGraph's ``FlyteStore``).
    """

    def __init__(
        self,
        store: MemoryStore | str,
        *,
        prefix: str = "upsonic",
        actor: str = "upsonic",
        id: str | None = None,
        session_table: str | None = None,
        user_memory_table: str | None = None,
        cultural_knowledge_table: str | None = None,
        knowledge_table: str | None = None,
        usage_entry_table: str | None = None,
    ):
        named = {
            "sessions": session_table,
            "users": user_memory_table,
            "culture": cultural_knowledge_table,
            "knowledge": knowledge_table,
            "usage": usage_entry_table,
        }
        effective = table_names(named)  # refused before anything else is set up
        if _AsyncBase is not object:
            base_init: Any = super().__init__  # Upsonic's AsyncStorage.__init__ (object's to pyright)
            base_init(
                session_table=session_table,
                user_memory_table=user_memory_table,
                cultural_knowledge_table=cultural_knowledge_table,
                knowledge_table=knowledge_table,
                usage_entry_table=usage_entry_table,
                id=id,
            )
        else:
            import uuid

            self.id = id or str(uuid.uuid4())
            for table, attribute in TABLE_ATTRIBUTES.items():
                setattr(self, attribute, effective[table])
        self._tables = Tables(store, prefix, actor, table_dirs(effective))
        self._sessions = SessionRows(self._tables)

    @property
    def store(self) -> MemoryStore | None:
        """The store handle (None until a key is opened by the first call)."""
        return self._tables._store  # pyright: ignore[reportPrivateUsage]

    async def table_exists(self, table_name: str) -> bool:
        """Whether `table_name` is one of this storage's tables (its ``*_table_name`` attributes). Those
        exist from the start: a table is a directory that every read serves (empty until its first row)
        and every write makes, as in Upsonic's JSON and in-memory storages; any other name does not."""
        return table_name in self.table_names()

    def table_names(self) -> dict[str, str]:
        """This storage's tables, Upsonic's name of each (``session_table_name``, ...) -> its directory."""
        return {getattr(self, a): self._tables.dirs[t] for t, a in TABLE_ATTRIBUTES.items()}

    @exclusive
    async def _create_all_tables(self) -> None:
        await self._tables.store()

    @exclusive
    async def close(self) -> None:
        """Save anything unsaved of a handle the storage opened (every mutating call already committed);
        a handle the caller gave is left as it is: its unsaved changes are the caller's."""
        store = self.store
        if store is not None and not self._tables.given and store.has_unsaved_changes():
            await store.save.aio(actor=self._tables.actor)

    # -- sessions -------------------------------------------------------------------------------------

    @exclusive
    async def aupsert_session(self, session: Any, deserialize: bool = True) -> Any:
        """Upsert one session; None is no session (nothing written, None returned), as Upsonic's stores."""
        stored = await self.aupsert_sessions([session], deserialize)
        return stored[0] if stored else None

    @exclusive
    async def aupsert_sessions(self, sessions: list[Any], deserialize: bool = True) -> list[Any]:
        now = rows.now_seconds()
        # None entries are skipped, as every Upsonic storage skips them; any other bad input is refused
        # before a write
        prepared = [rows.session_row(s, now) for s in sessions if s is not None]

        async def write() -> list[dict[str, Any]]:
            return [await self._sessions.put(row, runs) for row, runs in prepared]

        stored = await self._tables.commit(write, "upsert_sessions") if prepared else []
        return [rows.session_out(row, deserialize) for row in stored]

    @exclusive
    async def aget_session(
        self,
        session_id: str | None = None,
        session_type: Any = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        deserialize: bool = True,
    ) -> Any:
        await self._tables.fresh()
        wanted = where({"user_id": user_id, "agent_id": agent_id})
        if session_type is not None:
            wanted["session_type"] = rows.session_type_of(session_type)
        if session_id is not None:
            body = await self._tables.read(self._sessions.path(session_id))
            found = [body["row"]] if body is not None and matches(body["row"], wanted) else []
        else:
            found = sort_rows(await self._sessions.find(wanted), "created_at", "desc", "session_id")[:1]
        if not found:
            return None
        full = await self._sessions.with_runs(found)
        return rows.session_out(full[0], deserialize, session_type)

    @exclusive
    async def aget_sessions(
        self,
        session_ids: list[str] | None = None,
        session_type: Any = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
        deserialize: bool = True,
    ) -> Any:
        await self._tables.fresh()
        wanted = where({"user_id": user_id, "agent_id": agent_id})
        if session_type is not None:
            wanted["session_type"] = rows.session_type_of(session_type)
        found = await self._sessions.find(wanted)
        if session_ids is not None:
            chosen = set(session_ids)
            found = [r for r in found if r.get("session_id") in chosen]
        ordered = sort_rows(found, sort_by or "created_at", sort_order, "session_id")
        paged = await self._sessions.with_runs(page(ordered, limit, offset))
        if not deserialize:
            return paged, len(found)
        return [rows.session_out(r, True, session_type) for r in paged]

    @exclusive
    async def adelete_session(self, session_id: str) -> bool:
        if not session_id:
            raise InvalidArgument("session_id is required for delete")
        return await self.adelete_sessions([session_id]) == 1

    @exclusive
    async def adelete_sessions(self, session_ids: list[str]) -> int:
        if not session_ids:
            raise InvalidArgument("session_ids is required and cannot be empty")
        sessions = self._sessions

        async def remove() -> int:
            return await sessions.delete(session_ids)

        return await self._tables.commit(remove, "delete_sessions")

    # -- user memories --------------------------------------------------------------------------------

    @exclusive
    async def aupsert_user_memory(self, user_memory: Any, deserialize: bool = True) -> Any:
        return (await self.aupsert_user_memories([user_memory], deserialize))[0]

    @exclusive
    async def aupsert_user_memories(self, user_memories: list[Any], deserialize: bool = True) -> list[Any]:
        now = rows.now_seconds()
        prepared = [rows.user_memory_row(m, now) for m in user_memories]

        async def write() -> list[dict[str, Any]]:
            for row in prepared:
                path = self._tables.path("users", row["user_id"])
                stored = await self._tables.read(path)
                if stored is not None:  # the first write's created_at stays
                    row["created_at"] = stored["row"].get("created_at", row["created_at"])
                await self._tables.write(path, {"row": row}, labels_of(row, rows.USER_LABELS))
            return prepared

        stored = await self._tables.commit(write, "upsert_user_memories") if prepared else []
        return [rows.user_memory_out(r, deserialize) for r in stored]

    @exclusive
    async def aget_user_memory(
        self,
        user_id: str | None = None,
        agent_id: str | None = None,
        team_id: str | None = None,
        deserialize: bool = True,
    ) -> Any:
        found = await self._user_rows(None if user_id is None else [user_id], agent_id, team_id)
        return rows.user_memory_out(found[0], deserialize) if found else None

    @exclusive
    async def aget_user_memories(
        self,
        user_ids: list[str] | None = None,
        agent_id: str | None = None,
        team_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        deserialize: bool = True,
    ) -> Any:
        found = await self._user_rows(user_ids, agent_id, team_id)
        paged = page(found, limit, offset)
        return (paged, len(found)) if not deserialize else [rows.user_memory_out(r, True) for r in paged]

    @exclusive
    async def adelete_user_memory(self, user_id: str) -> bool:
        if not user_id:
            raise InvalidArgument("user_id is required for delete")
        return await self.adelete_user_memories([user_id]) == 1

    @exclusive
    async def adelete_user_memories(self, user_ids: list[str]) -> int:
        if not user_ids:
            raise InvalidArgument("user_ids is required and cannot be empty")
        return await self._delete_rows([self._tables.path("users", u) for u in dict.fromkeys(user_ids)], "users")

    # -- internals ------------------------------------------------------------------------------------

    async def _user_rows(
        self, user_ids: list[str] | None, agent_id: str | None, team_id: str | None
    ) -> list[dict[str, Any]]:
        if user_ids is not None and len(user_ids) == 0:
            return []
        found = await self._rows("users", {"agent_id": agent_id, "team_id": team_id}, rows.USER_LABELS)
        if user_ids is not None:
            chosen = set(user_ids)
            found = [r for r in found if r.get("user_id") in chosen]
        return sort_rows(found, "updated_at", "desc", "user_id")


class FlyteStorage(_SyncBase):  # pyright: ignore[reportUntypedBaseClass, reportGeneralTypeIssues]
    """Upsonic's sync ``Storage`` over one flyteplugins-memory store: `AsyncFlyteStorage`'s methods, each
    without its ``a`` prefix, run to completion (arguments and behaviour as there)."""

    def __init__(
        self,
        store: MemoryStore | str,
        *,
        prefix: str = "upsonic",
        actor: str = "upsonic",
        id: str | None = None,
        session_table: str | None = None,
        user_memory_table: str | None = None,
        cultural_knowledge_table: str | None = None,
        knowledge_table: str | None = None,
        usage_entry_table: str | None = None,
    ):
        names = {
            "session_table": session_table,
            "user_memory_table": user_memory_table,
            "cultural_knowledge_table": cultural_knowledge_table,
            "knowledge_table": knowledge_table,
            "usage_entry_table": usage_entry_table,
        }
        self._async = AsyncFlyteStorage(store, prefix=prefix, actor=actor, id=id, **names)
        if _SyncBase is not object:
            base_init: Any = super().__init__  # Upsonic's Storage.__init__ (object's to pyright)
            base_init(id=self._async.id, **names)
        self.id = self._async.id
        for attribute in TABLE_ATTRIBUTES.values():
            setattr(self, attribute, getattr(self._async, attribute))

    @property
    def store(self) -> MemoryStore | None:
        return self._async.store

    def table_exists(self, table_name: str) -> bool:
        """As `AsyncFlyteStorage.table_exists`: whether `table_name` is one of this storage's tables."""
        return table_name in self.table_names()

    def table_names(self) -> dict[str, str]:
        """As `AsyncFlyteStorage.table_names`."""
        return self._async.table_names()

    def _create_all_tables(self) -> None:
        LOOP.run(self._async._create_all_tables())  # pyright: ignore[reportPrivateUsage]

    def close(self) -> None:
        LOOP.run(self._async.close())


#: the calls `FlyteStorage` serves by running `AsyncFlyteStorage`'s ``a``-prefixed coroutine
SYNC_CALLS = (
    "upsert_session",
    "upsert_sessions",
    "get_session",
    "get_sessions",
    "delete_session",
    "delete_sessions",
    "upsert_user_memory",
    "upsert_user_memories",
    "get_user_memory",
    "get_user_memories",
    "delete_user_memory",
    "delete_user_memories",
    "upsert_cultural_knowledge",
    "get_cultural_knowledge",
    "get_all_cultural_knowledge",
    "delete_cultural_knowledge",
    "upsert_knowledge_content",
    "get_knowledge_content",
    "get_knowledge_contents",
    "delete_knowledge_content",
    "delete_knowledge_contents",
    "upsert_model",
    "get_model",
    "delete_model",
    "list_models",
    "upsert_usage_entry",
    "query_usage_entries",
    "delete_usage_entries",
    "clear_all",
)


for _name in SYNC_CALLS:
    setattr(FlyteStorage, _name, sync_call(AsyncFlyteStorage, _name))
abc.update_abstractmethods(FlyteStorage)  # Upsonic's abstract methods are now defined
