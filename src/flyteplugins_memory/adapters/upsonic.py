"""Upsonic storage backends (``upsonic.storage.base.Storage`` and ``AsyncStorage``) kept in a
flyteplugins-memory store.

Upsonic's ``Memory`` persists everything through a storage backend: sessions (chat history, summary,
metadata and every run, including the incomplete ones, paused, error or cancelled, that another process
resumes with ``agent.continue_run(run_id=...)``), user memories (profiles), cultural knowledge, knowledge
base registry rows, generic models and usage entries. `FlyteStorage` (sync) and `AsyncFlyteStorage`
(async) store them in one key, one JSON file per row (see `_upsonic_tables`)::

    <prefix>/sessions/<session_id>/session.json        the session without its runs
    <prefix>/sessions/<session_id>/runs/<run_id>.json   one per run
    <prefix>/users/<user_id>.json                       a user memory
    <prefix>/culture/<id>.json   <prefix>/knowledge/<id>.json
    <prefix>/models/<collection>/<key>.json   <prefix>/usage/<entry_id>.json

Ids are path segments (encoded when not plain, see `segment`). Runs are rows of their own, so two tasks
running different runs of one session both keep theirs; an upsert writes only the runs that changed since
this adapter last read or wrote them (a stale copy never overwrites a newer run saved elsewhere), and never
deletes runs (``delete_session`` does). The session row itself (messages, summary, metadata) is last
writer wins, as in Upsonic's database backends. A session belongs to the user it was created with: an
upsert under another ``user_id`` raises `SessionOfAnotherUser`, and reads filtered by ``user_id`` never
return another user's rows.

Upsonic is imported when this module is (not by the package): with it installed the classes subclass
Upsonic's ``Storage`` / ``AsyncStorage`` and return Upsonic's objects; without it (Upsonic pins protobuf<6,
which flyte cannot install beside) they still serve the contract over dicts, and ``deserialize=True``
returns the stored dicts. Bad input raises the package's `InvalidArgument`, a ``ValueError`` as
Upsonic's contract names.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import contextvars
import functools
import os
import threading
import time
from collections.abc import Coroutine, Mapping
from typing import Any

from .. import InvalidArgument, MemoryStore
from . import _upsonic_rows as rows
from ._upsonic_tables import Tables, labels_of, matches, page, segment, sort_rows

__all__ = ["AsyncFlyteStorage", "FlyteStorage", "SessionOfAnotherUser", "segment"]

try:  # the framework's base classes when it is installed; plain objects otherwise (see the docstring)
    from upsonic.storage.base import AsyncStorage as _AsyncBase  # pyright: ignore[reportMissingImports]
    from upsonic.storage.base import Storage as _SyncBase  # pyright: ignore[reportMissingImports]
except ImportError:  # pragma: no cover - exercised where Upsonic is absent
    _AsyncBase = _SyncBase = object


class SessionOfAnotherUser(InvalidArgument):
    """An upsert of a session id that is stored under another user_id (sessions never change owner)."""


def _where(wanted: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in wanted.items() if value is not None}


class AsyncFlyteStorage(_AsyncBase):  # pyright: ignore[reportUntypedBaseClass, reportGeneralTypeIssues]
    """Upsonic's ``AsyncStorage`` over one flyteplugins-memory store.

    Args:
        store: An open `MemoryStore` handle, or the key of one (opened with ``get_or_create`` on first use).
        prefix: The store directory the tables live under.
        actor: Recorded as the actor of every commit.
        id: Upsonic's storage id (a new uuid by default).

    Every mutating call is one commit (a task that dies loses nothing it was told was stored); every read
    first moves the handle to the newest commit, so rows other tasks saved are seen.
    """

    def __init__(
        self, store: MemoryStore | str, *, prefix: str = "upsonic", actor: str = "upsonic", id: str | None = None
    ):
        if _AsyncBase is not object:
            super().__init__(id=id)  # pyright: ignore[reportCallIssue]
        else:
            import uuid

            self.id = id or str(uuid.uuid4())
        self._tables = Tables(store, prefix, actor)
        self._seen_runs: dict[str, Any] = {}
        self._last_ns = 0

    @property
    def store(self) -> MemoryStore | None:
        """The store handle (None until a key is opened by the first call)."""
        return self._tables._store  # pyright: ignore[reportPrivateUsage]

    async def table_exists(self, table_name: str) -> bool:
        return True  # tables are directories, made by their first row

    async def _create_all_tables(self) -> None:
        await self._tables.store()

    async def close(self) -> None:
        """Save anything unsaved (every mutating call already committed)."""
        store = self.store
        if store is not None and store.has_unsaved_changes():
            await store.save.aio(actor=self._tables.actor)

    # -- sessions -------------------------------------------------------------------------------------

    async def aupsert_session(self, session: Any, deserialize: bool = True) -> Any:
        return (await self.aupsert_sessions([session], deserialize))[0]

    async def aupsert_sessions(self, sessions: list[Any], deserialize: bool = True) -> list[Any]:
        now = rows.now_seconds()
        prepared = [rows.session_row(s, now) for s in sessions]  # every bad input refused before a write

        async def write() -> list[dict[str, Any]]:
            return [await self._put_session(row, runs) for row, runs in prepared]

        stored = await self._tables.commit(write, "upsert_sessions") if prepared else []
        return [rows.session_out(row, deserialize) for row in stored]

    async def aget_session(
        self,
        session_id: str | None = None,
        session_type: Any = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        deserialize: bool = True,
    ) -> Any:
        await self._tables.fresh()
        wanted = _where({"user_id": user_id, "agent_id": agent_id})
        if session_type is not None:
            wanted["session_type"] = rows.session_type_of(session_type)
        if session_id is not None:
            body = await self._tables.read(self._session_path(session_id))
            found = [body["row"]] if body is not None and matches(body["row"], wanted) else []
        else:
            found = sort_rows(await self._session_rows(wanted), "created_at", "desc", "session_id")[:1]
        if not found:
            return None
        full = await self._with_runs(found)
        return rows.session_out(full[0], deserialize, session_type)

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
        wanted = _where({"user_id": user_id, "agent_id": agent_id})
        if session_type is not None:
            wanted["session_type"] = rows.session_type_of(session_type)
        found = await self._session_rows(wanted)
        if session_ids is not None:
            chosen = set(session_ids)
            found = [r for r in found if r.get("session_id") in chosen]
        ordered = sort_rows(found, sort_by or "created_at", sort_order, "session_id")
        paged = await self._with_runs(page(ordered, limit, offset))
        if not deserialize:
            return paged, len(found)
        return [rows.session_out(r, True, session_type) for r in paged]

    async def adelete_session(self, session_id: str) -> bool:
        if not session_id:
            raise InvalidArgument("session_id is required for delete")
        return await self.adelete_sessions([session_id]) == 1

    async def adelete_sessions(self, session_ids: list[str]) -> int:
        if not session_ids:
            raise InvalidArgument("session_ids is required and cannot be empty")
        unique = list(dict.fromkeys(session_ids))

        async def remove() -> int:
            deleted = 0
            for session_id in unique:
                for run_path in await self._tables.find(f"sessions/{segment(session_id)}/runs"):
                    await self._tables.delete(run_path)
                deleted += await self._tables.delete(self._session_path(session_id))
            return deleted

        return await self._tables.commit(remove, "delete_sessions")

    # -- user memories --------------------------------------------------------------------------------

    async def aupsert_user_memory(self, user_memory: Any, deserialize: bool = True) -> Any:
        return (await self.aupsert_user_memories([user_memory], deserialize))[0]

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

    async def aget_user_memory(
        self,
        user_id: str | None = None,
        agent_id: str | None = None,
        team_id: str | None = None,
        deserialize: bool = True,
    ) -> Any:
        found = await self._user_rows(None if user_id is None else [user_id], agent_id, team_id)
        return rows.user_memory_out(found[0], deserialize) if found else None

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

    async def adelete_user_memory(self, user_id: str) -> bool:
        if not user_id:
            raise InvalidArgument("user_id is required for delete")
        return await self.adelete_user_memories([user_id]) == 1

    async def adelete_user_memories(self, user_ids: list[str]) -> int:
        if not user_ids:
            raise InvalidArgument("user_ids is required and cannot be empty")
        return await self._delete_rows([self._tables.path("users", u) for u in dict.fromkeys(user_ids)], "users")

    # -- cultural knowledge ---------------------------------------------------------------------------

    async def aupsert_cultural_knowledge(self, cultural_knowledge: Any, deserialize: bool = True) -> Any:
        row = rows.culture_row(cultural_knowledge, rows.now_seconds())
        await self._put(self._tables.path("culture", row["id"]), row, rows.CULTURE_LABELS, "upsert_cultural_knowledge")
        return rows.culture_out(row, deserialize)

    async def aget_cultural_knowledge(self, id: str, deserialize: bool = True) -> Any:
        row = await self._get(self._tables.path("culture", id))
        return None if row is None else rows.culture_out(row, deserialize)

    async def aget_all_cultural_knowledge(
        self,
        name: str | None = None,
        limit: int | None = None,
        page: int | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
        agent_id: str | None = None,
        team_id: str | None = None,
        deserialize: bool = True,
    ) -> Any:
        found = await self._rows(
            "culture", {"name": name, "agent_id": agent_id, "team_id": team_id}, rows.CULTURE_LABELS
        )
        chosen = _page_numbered(sort_rows(found, sort_by or "created_at", sort_order, "id"), limit, page)
        return (chosen, len(found)) if not deserialize else [rows.culture_out(r, True) for r in chosen]

    async def adelete_cultural_knowledge(self, id: str) -> None:
        await self._delete_rows([self._tables.path("culture", id)], "culture")

    # -- knowledge base registry ----------------------------------------------------------------------

    async def aupsert_knowledge_content(self, knowledge_row: Any) -> Any:
        row = rows.knowledge_row(knowledge_row, rows.now_seconds())

        async def write() -> dict[str, Any]:
            path = self._tables.path("knowledge", row["id"])
            stored = await self._tables.read(path)
            if stored is not None:
                row["created_at"] = stored["row"].get("created_at", row["created_at"])
            await self._tables.write(path, {"row": row}, labels_of(row, rows.KNOWLEDGE_LABELS))
            return row

        return rows.knowledge_out(await self._tables.commit(write, "upsert_knowledge_content"))

    async def aget_knowledge_content(self, id: str) -> Any:
        row = await self._get(self._tables.path("knowledge", id))
        return None if row is None else rows.knowledge_out(row)

    async def aget_knowledge_contents(
        self,
        knowledge_base_id: str | None = None,
        limit: int | None = None,
        page: int | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
    ) -> tuple[list[Any], int]:
        found = await self._rows("knowledge", {"knowledge_base_id": knowledge_base_id}, rows.KNOWLEDGE_LABELS)
        chosen = _page_numbered(sort_rows(found, sort_by or "created_at", sort_order, "id"), limit, page)
        return [rows.knowledge_out(r) for r in chosen], len(found)

    async def adelete_knowledge_content(self, id: str) -> bool:
        return await self._delete_rows([self._tables.path("knowledge", id)], "knowledge") == 1

    async def adelete_knowledge_contents(self, ids: list[str]) -> int:
        paths = [self._tables.path("knowledge", i) for i in dict.fromkeys(ids)]
        return await self._delete_rows(paths, "knowledge") if paths else 0

    # -- generic models and usage entries -------------------------------------------------------------

    async def aupsert_model(self, key: str, model: Any, collection: str = "generic_models") -> None:
        data = rows.plain(
            model.model_dump(mode="json") if hasattr(model, "model_dump") else rows.fields_of(model, "model")
        )
        row = {"key": key, "collection": collection, "model_data": data}
        await self._put(self._tables.path("models", collection, key), row, ("key", "collection"), "upsert_model")

    async def aget_model(self, key: str, model_type: Any, collection: str = "generic_models") -> Any:
        row = await self._get(self._tables.path("models", collection, key))
        return None if row is None else model_type(**row["model_data"])

    async def adelete_model(self, key: str, collection: str = "generic_models") -> bool:
        return await self._delete_rows([self._tables.path("models", collection, key)], "models") == 1

    async def alist_models(self, model_type: Any, collection: str = "generic_models") -> list[Any]:
        found = await self._rows(f"models/{segment(collection)}", {}, ())
        return [model_type(**r["model_data"]) for r in sort_rows(found, "key", "asc", "key")]

    async def aupsert_usage_entry(self, entry: dict[str, Any]) -> None:
        row = rows.plain(dict(entry))
        rows.required_id(row, "entry_id", "usage entry")
        await self._put(self._tables.path("usage", row["entry_id"]), row, rows.USAGE_LABELS, "upsert_usage_entry")

    async def aquery_usage_entries(self, *, limit: int | None = None, **filters: Any) -> list[dict[str, Any]]:
        found = await self._rows("usage", _usage_filters(filters), rows.USAGE_LABELS)
        return page(sort_rows(found, "entry_id", "asc", "entry_id"), limit, None)

    async def adelete_usage_entries(self, **filters: Any) -> int:
        wanted = _usage_filters(filters)
        found = await self._rows("usage", wanted, rows.USAGE_LABELS)
        return await self._delete_rows([self._tables.path("usage", r["entry_id"]) for r in found], "usage")

    async def aclear_all(self) -> None:
        """Delete every row of every table (one commit)."""

        async def remove() -> None:
            store = await self._tables.store()
            for path in await store.list_paths.aio(self._tables.prefix):
                await self._tables.delete(path)

        await self._tables.commit(remove, "clear_all")

    # -- internals ------------------------------------------------------------------------------------

    def _session_path(self, session_id: str) -> str:
        return self._tables.path("sessions", session_id, "session")

    async def _put_session(self, row: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
        path = self._session_path(row["session_id"])
        stored = await self._tables.read(path)
        if stored is not None:
            owner = stored["row"].get("user_id")
            if owner is not None and owner != row.get("user_id"):
                raise SessionOfAnotherUser(f"session {row['session_id']!r} belongs to another user")
            row["created_at"] = stored["row"].get("created_at", row["created_at"])
        await self._tables.write(path, {"row": row}, {"kind": "session", **labels_of(row, rows.SESSION_LABELS)})
        for run_id, run in runs.items():
            run_path = self._tables.path("sessions", row["session_id"], "runs", run_id)
            kept = await self._tables.read(run_path)
            unchanged_here = self._seen_runs.get(run_path) == run
            if kept is not None and (kept["row"] == run or unchanged_here):
                continue  # equal, or a copy this adapter has not changed: a newer run saved elsewhere stays
            added_ns = kept["added_ns"] if kept is not None else self._next_ns()
            labels = {"kind": "run", **labels_of({"session_id": row["session_id"]}, ("session_id",))}
            await self._tables.write(run_path, {"row": run, "run_id": run_id, "added_ns": added_ns}, labels)
            self._seen_runs[run_path] = run
        return (await self._with_runs([row]))[0]

    async def _session_rows(self, wanted: Mapping[str, Any]) -> list[dict[str, Any]]:
        where = {"kind": "session", **labels_of(wanted, tuple(wanted))}
        found = await self._tables.find("sessions", where)
        return [b["row"] for b in found.values() if matches(b["row"], wanted)]

    async def _with_runs(self, session_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The sessions with their runs, in the order they were first stored."""
        if not session_rows:
            return []
        under = f"sessions/{segment(session_rows[0]['session_id'])}/runs" if len(session_rows) == 1 else "sessions"
        found = await self._tables.find(under, {"kind": "run"})
        by_session: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
        for path, body in found.items():
            session_dir = path.split("/runs/", 1)[0]
            by_session.setdefault(session_dir, []).append((body.get("added_ns", 0), body["run_id"], body["row"]))
            self._seen_runs[path] = body["row"]
        result = []
        for row in session_rows:
            session_dir = self._session_path(row["session_id"]).removesuffix("/session.json")
            runs = sorted(by_session.get(session_dir, []), key=lambda t: (t[0], t[1]))
            result.append({**row, "runs": {run_id: run for _, run_id, run in runs}})
        return result

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

    async def _rows(self, table: str, wanted: Mapping[str, Any], labelled: tuple[str, ...]) -> list[dict[str, Any]]:
        await self._tables.fresh()
        wanted = _where(wanted)
        where = labels_of(wanted, tuple(n for n in wanted if n in labelled))
        found = await self._tables.find(table, where)
        return [b["row"] for b in found.values() if matches(b["row"], wanted)]

    async def _get(self, path: str) -> dict[str, Any] | None:
        await self._tables.fresh()
        body = await self._tables.read(path)
        return None if body is None else body["row"]

    async def _put(self, path: str, row: dict[str, Any], labelled: tuple[str, ...], reason: str) -> None:
        async def write() -> None:
            await self._tables.write(path, {"row": row}, labels_of(row, labelled))

        await self._tables.commit(write, reason)

    async def _delete_rows(self, paths: list[str], table: str) -> int:
        async def remove() -> int:
            return sum([await self._tables.delete(p) for p in paths])

        return await self._tables.commit(remove, f"delete {table}") if paths else 0

    def _next_ns(self) -> int:
        """Insertion order of runs within this process, even when the clock does not move between them."""
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return self._last_ns


def _usage_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(rows.USAGE_LABELS)
    if unknown:
        raise InvalidArgument(f"unknown usage filters: {sorted(unknown)}")
    return _where(filters)


def _page_numbered(found: list[dict[str, Any]], limit: int | None, number: int | None) -> list[dict[str, Any]]:
    """Pages numbered from 1, as Upsonic's knowledge tables take them."""
    if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 1):
        raise InvalidArgument(f"page is an int >= 1 or None, got {number!r}")
    return page(found, limit, None if limit is None or number is None else (number - 1) * limit)


class _AdapterLoop:
    """The event loop `FlyteStorage` runs its calls on: Upsonic calls a sync storage from inside its own
    running loop too, where a call cannot start a loop of its own. Context variables (flyte's task
    context, which names the storage root of a key) travel with each call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        loop = self._started()
        context = contextvars.copy_context()
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def finish(task: asyncio.Task[Any]) -> None:
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        loop.call_soon_threadsafe(lambda: loop.create_task(coro, context=context).add_done_callback(finish))
        return done.result()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # after a fork the thread is gone
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                name = "flyteplugins-memory-upsonic"
                threading.Thread(target=self._loop.run_forever, name=name, daemon=True).start()
            return self._loop


_LOOP = _AdapterLoop()


class FlyteStorage(_SyncBase):  # pyright: ignore[reportUntypedBaseClass, reportGeneralTypeIssues]
    """Upsonic's sync ``Storage`` over one flyteplugins-memory store: `AsyncFlyteStorage`'s methods, each
    without its ``a`` prefix, run to completion (arguments and behaviour as there)."""

    def __init__(
        self, store: MemoryStore | str, *, prefix: str = "upsonic", actor: str = "upsonic", id: str | None = None
    ):
        self._async = AsyncFlyteStorage(store, prefix=prefix, actor=actor, id=id)
        if _SyncBase is not object:
            super().__init__(id=self._async.id)  # pyright: ignore[reportCallIssue]
        self.id = self._async.id

    @property
    def store(self) -> MemoryStore | None:
        return self._async.store

    def table_exists(self, table_name: str) -> bool:
        return True

    def _create_all_tables(self) -> None:
        _LOOP.run(self._async._create_all_tables())  # pyright: ignore[reportPrivateUsage]

    def close(self) -> None:
        _LOOP.run(self._async.close())


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


def _sync_call(name: str) -> Any:
    coroutine_function = getattr(AsyncFlyteStorage, "a" + name)

    @functools.wraps(coroutine_function)
    def call(self: FlyteStorage, *args: Any, **kwargs: Any) -> Any:
        return _LOOP.run(getattr(self._async, "a" + name)(*args, **kwargs))  # pyright: ignore[reportPrivateUsage]

    call.__name__, call.__qualname__ = name, f"FlyteStorage.{name}"
    return call


for _name in SYNC_CALLS:
    setattr(FlyteStorage, _name, _sync_call(_name))
abc.update_abstractmethods(FlyteStorage)  # Upsonic's abstract methods are now defined
