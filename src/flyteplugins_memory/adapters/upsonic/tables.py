"""Upsonic's tables as one JSON file per row in a flyteplugins-memory store (the I/O half of the adapter).

A table is a directory; a row is ``<table>/<segment of its id>.json`` (``{"format": 1, "row": {...}}``)
with metadata labels of the row's string filter fields (user_id, agent_id, ...), so a filtered listing
reads no content. Every mutating call of the adapter is one `commit`: refresh to the newest state, apply,
save; a save that conflicts with a concurrent one (the same row changed elsewhere) drops ours and applies
it again to the newer state. Rows of different ids are different files, so tasks writing different
sessions or users to one key merge instead of conflicting.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from datetime import UTC
from typing import Any, ParamSpec, TypeVar

from ... import ConcurrencyError, InvalidArgument, MemoryStore, UnsavedChanges
from .._context import storage_context
from .._segments import encode_id

FORMAT = 1
_SAVE_ATTEMPTS = 8
_READ_BATCH = 64  # rows fetched at once
_WAIT_SECONDS = 0.002  # between tries of a busy section
#: labels longer than this are left out (a filter on that field then reads the rows instead)
_LABEL_MAX = 512
T = TypeVar("T")
P = ParamSpec("P")


def segment(value: str) -> str:
    """An Upsonic id (a non-empty string) as one path segment (`encode_id`)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"ids are non-empty strings, got {value!r}")
    return encode_id(value)


def labels_of(row: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, str]:
    """The row's string filter fields that fit a label (the rest are filtered by reading the row)."""
    return {f: row[f] for f in fields if isinstance(row.get(f), str) and len(row[f]) <= _LABEL_MAX}


def matches(row: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(row.get(name) == value for name, value in wanted.items())


def epoch_seconds(value: Any, name: str) -> int | None:
    """A timestamp as Upsonic stores it (whole epoch seconds): int, float or ISO 8601 text; None stays."""
    if value is None:
        return None
    if isinstance(value, str):
        from datetime import datetime

        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidArgument(f"{name} is not a timestamp: {value!r}") from None
        parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        seconds = int(parsed.timestamp())
        if seconds < 0:
            raise InvalidArgument(f"{name} is before 1970: {value!r}")
        return seconds
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidArgument(f"{name} is epoch seconds (a finite number >= 0) or ISO text, got {value!r}")
    if value > 253402300799:  # year 9999: beyond it no datetime can show the row
        raise InvalidArgument(f"{name} is past the year 9999: {value!r}")
    return int(value)


def sort_rows(rows: list[dict[str, Any]], by: str | None, order: str | None, id_field: str) -> list[dict[str, Any]]:
    """Sorted by `by` (``updated_at`` falls back to ``created_at``), rows without it last, ties by id;
    descending unless `order` is ``"asc"`` (Upsonic's default order)."""
    if by is None:
        return rows
    descending = order != "asc"

    def value(row: dict[str, Any]) -> Any:
        found = row.get(by)
        return row.get("created_at") if found is None and by == "updated_at" else found

    present = [r for r in rows if value(r) is not None]
    absent = sorted((r for r in rows if value(r) is None), key=lambda r: str(r.get(id_field)))
    try:
        present.sort(key=lambda r: (value(r), str(r.get(id_field))), reverse=descending)
    except TypeError:  # mixed types in a caller's field: order as text rather than fail the read
        present.sort(key=lambda r: (str(value(r)), str(r.get(id_field))), reverse=descending)
    return present + absent


def page(rows: list[T], limit: int | None, offset: int | None) -> list[T]:
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidArgument(f"{name} is an int >= 0 or None, got {value!r}")
    start = offset or 0
    return rows[start:] if limit is None else rows[start : start + limit]


#: the adapter's tables and their directories when the caller names none, or names Upsonic's default name
#: (the layout before table names were honoured, so stores written then read the same); "models" has no
#: table name in Upsonic's base
DEFAULT_DIRS = {
    "sessions": "sessions",
    "users": "users",
    "culture": "culture",
    "knowledge": "knowledge",
    "usage": "usage",
    "models": "models",
}
#: the names Upsonic's base gives the tables it was given no name for (``name or default``)
DEFAULT_TABLE_NAMES = {
    "sessions": "upsonic_sessions",
    "users": "upsonic_user_memories",
    "culture": "upsonic_cultural_knowledge",
    "knowledge": "upsonic_knowledge",
    "usage": "upsonic_usage_entries",
}


def table_names(names: Mapping[str, str | None]) -> dict[str, str]:
    """Each table's name as Upsonic's base keeps it: the caller's, or the default for None or ``""``
    (the base's ``name or default``). A name that is not a str, or two tables of one name (Upsonic's own
    storages would keep two kinds of rows in one table): `InvalidArgument`."""
    effective: dict[str, str] = {}
    for table, name in names.items():
        if name is not None and not isinstance(name, str):
            raise InvalidArgument(f"a table name is a str or None, got {name!r}")
        effective[table] = name or DEFAULT_TABLE_NAMES[table]
    shared = sorted({n for n in effective.values() if list(effective.values()).count(n) > 1})
    if shared:
        raise InvalidArgument(f"two tables are named {shared[0]!r}: give them distinct names")
    return effective


def table_dirs(names: Mapping[str, str]) -> dict[str, str]:
    """Each table's directory, from its name (`table_names`): its kind's directory for Upsonic's default
    name, else ``<kind's directory>.<the name as one segment>`` (`segment`). A directory is one kind's
    whatever the names (a segment never holds a dot), so two storages over one prefix never read each
    other's rows as their own kind, whatever names each was given."""
    dirs = dict(DEFAULT_DIRS)
    for table, name in names.items():
        if name != DEFAULT_TABLE_NAMES[table]:
            dirs[table] = f"{DEFAULT_DIRS[table]}.{segment(name)}"
    return dirs


class Tables:
    """The rows of every table under `prefix` of one store, with the commit loop every write goes through.
    `dirs` maps the adapter's tables (`DEFAULT_DIRS`' keys) to their directories under the prefix."""

    def __init__(
        self, store: MemoryStore | str, prefix: str, actor: str, dirs: Mapping[str, str] | None = None
    ) -> None:
        if not isinstance(store, MemoryStore | str):
            raise InvalidArgument("store is a MemoryStore or a key")
        self._store = store if isinstance(store, MemoryStore) else None
        self._key = store if isinstance(store, str) else None
        # a key's location (storage root, org, project, domain) comes from the Flyte context: the one this
        # storage is made in when it names the task's storage, so the first call opens the key there from
        # any thread (Upsonic's run_awaitable_sync worker has no Flyte context); decision 0137 item 4
        self._context = storage_context() if self._store is None else None
        #: the caller's own handle (not one this adapter opened): its unsaved changes are the caller's
        self.given = self._store is not None
        self.prefix = checked_prefix(prefix)
        self.dirs = dict(dirs) if dirs is not None else dict(DEFAULT_DIRS)
        self.actor = actor
        self._section = _Section() if self._store is None else _section_of(self._store)
        self._touched: list[str] = []  # the paths the commit under way wrote or deleted

    async def store(self) -> MemoryStore:
        if self._store is None:
            assert self._key is not None
            opening = MemoryStore.get_or_create.aio(key=self._key)
            if self._context is not None:  # where the storage was made, whatever thread calls now
                opening = asyncio.get_running_loop().create_task(opening, context=self._context.copy())
            self._store = await opening
        return self._store

    def path(self, table: str, *ids: str) -> str:
        return "/".join([self.prefix, self.dirs[table], *(segment(i) for i in ids)]) + ".json"

    async def fresh(self) -> MemoryStore:
        """The store at its newest committed state (rows other tasks saved are seen), for a read. While the
        handle holds unsaved changes it is read as it is, without a refresh: a refresh would drop the
        conflicting ones (a caller's work in progress on a handle it gave the adapter)."""
        store = await self.store()
        if not store.has_unsaved_changes():
            await store.refresh.aio()
        return store

    def check_no_callers_changes(self, store: MemoryStore) -> None:
        """Before this adapter stages a write: the caller's handle holding unsaved changes (the adapter's
        own are always saved or reverted by the call that made them) raises `UnsavedChanges`, since the
        commit would carry them under the adapter's actor and reason."""
        if self.given and store.has_unsaved_changes():
            raise UnsavedChanges(
                f"the MemoryStore handle of key {store.key!r} given to the Upsonic storage holds unsaved "
                "changes the storage did not make, which its commit would save under its own name: save() "
                f"or revert() them first, or give the adapter its own handle: the key ({store.key!r})"
            )

    async def read(self, path: str) -> dict[str, Any] | None:
        body = await (await self.store()).read_json.aio(path)
        return body if isinstance(body, dict) else None

    async def write(self, path: str, body: dict[str, Any], labels: Mapping[str, str]) -> None:
        self._touched.append(path)
        await (await self.store()).write_json.aio(path, {"format": FORMAT, **body}, actor=self.actor, metadata=labels)

    async def delete(self, path: str) -> bool:
        self._touched.append(path)
        return await (await self.store()).delete.aio(path, actor=self.actor)

    async def find(self, under: str, where: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
        """Every row body under `under` (a directory under the prefix: a table's `dirs` entry, or below it)
        whose labels hold `where`, by path: the listing reads no content, then only the rows it chose are
        fetched, in parallel batches."""
        store = await self.store()
        paths = await store.list_paths.aio(f"{self.prefix}/{under}", where=dict(where) if where else None)
        return await self.read_all([p for p in paths if p.endswith(".json")])

    async def read_all(self, paths: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(paths), _READ_BATCH):
            batch = paths[start : start + _READ_BATCH]
            bodies = await asyncio.gather(*(self.read(p) for p in batch))
            found.update({p: b for p, b in zip(batch, bodies, strict=True) if b is not None})
        return found

    async def commit(self, change: Callable[[], Awaitable[T]], reason: str) -> T:
        """Apply `change` to the newest state and save it as one commit, again on a conflicting save. A
        change that raises, or whose save conflicts, leaves nothing staged: what it wrote is reverted, so
        neither a later commit nor the retry (which may decide differently) carries it. Unsaved changes
        of the caller's handle: `UnsavedChanges` before anything is staged (`check_no_callers_changes`)."""
        async with self.exclusive():
            for attempt in range(_SAVE_ATTEMPTS):
                store = await self.store()
                self.check_no_callers_changes(store)
                await store.refresh.aio()
                self._touched = []
                try:
                    result = await change()
                    await store.save.aio(actor=self.actor, reason=f"upsonic {reason}")
                    return result
                except ConcurrencyError:
                    await store.revert.aio(self._touched)
                    if attempt == _SAVE_ATTEMPTS - 1:
                        raise
                except BaseException:
                    await store.revert.aio(self._touched)
                    raise
            raise AssertionError("unreachable")

    def exclusive(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._section.hold()


class _Section:
    """One call at a time over one store handle, reads included: a read's refresh in the middle of a
    commit could drop what the commit has staged (a conflicting change), and the commit would then save
    without it. Shared by every Upsonic adapter over the same handle; reentrant within one task (a call
    that commits holds it already). A thread lock, taken without blocking the event loop, because Upsonic
    runs an `AsyncStorage` from several loops (``asyncio.run`` per sync call, in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: asyncio.Task[Any] | None = None

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        me = asyncio.current_task()
        if me is not None and self._holder is me:
            yield
            return
        # no asyncio.Event: waiters may be on different event loops (threads)
        while not self._lock.acquire(blocking=False):  # noqa: ASYNC110
            await asyncio.sleep(_WAIT_SECONDS)
        self._holder = me
        try:
            yield
        finally:
            self._holder = None
            self._lock.release()


_SECTIONS: weakref.WeakKeyDictionary[MemoryStore, _Section] = weakref.WeakKeyDictionary()
_SECTIONS_LOCK = threading.Lock()


def _section_of(store: MemoryStore) -> _Section:
    with _SECTIONS_LOCK:
        return _SECTIONS.setdefault(store, _Section())


def checked_prefix(prefix: str) -> str:
    """The directory the tables live under: plain segments, no empty, ``.`` or ``..`` one (leading and
    trailing slashes dropped)."""
    if not isinstance(prefix, str):
        raise InvalidArgument(f"prefix is a str, got {type(prefix).__name__}")
    parts = prefix.strip("/").split("/")
    if any(part in ("", ".", "..") or not part.isprintable() for part in parts):
        raise InvalidArgument(f"prefix must be a relative directory of plain segments, got {prefix!r}")
    return "/".join(parts)


def exclusive(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Run an adapter call inside its `Tables.exclusive` section (``self._tables``)."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        async with args[0]._tables.exclusive():  # pyright: ignore[reportAttributeAccessIssue]
            return await method(*args, **kwargs)

    return call
