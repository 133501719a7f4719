"""Upsonic's other tables (cultural knowledge, the knowledge base registry, generic models, usage entries),
and the row helpers every table of `AsyncFlyteStorage` uses: a mixin over the adapter's `Tables`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import InvalidArgument
from . import rows
from .tables import Tables, exclusive, labels_of, matches, page, segment, sort_rows

#: the tables ``clear_all`` empties: the kinds Upsonic's own storages clear (sessions, user memories, knowledge)
CLEARED_TABLES = ("sessions", "users", "knowledge")


def where(wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The filters a caller set (None means no filter, as in Upsonic's stores)."""
    return {name: value for name, value in wanted.items() if value is not None}


class TableCalls:
    """Upsonic's calls on the tables that are one row per id, and the row helpers (needs ``tables``)."""

    _tables: Tables

    # -- cultural knowledge ---------------------------------------------------------------------------

    @exclusive
    async def aupsert_cultural_knowledge(self, cultural_knowledge: Any, deserialize: bool = True) -> Any:
        row = rows.culture_row(cultural_knowledge, rows.now_seconds())
        await self._put(self._tables.path("culture", row["id"]), row, rows.CULTURE_LABELS, "upsert_cultural_knowledge")
        return rows.culture_out(row, deserialize)

    @exclusive
    async def aget_cultural_knowledge(self, id: str, deserialize: bool = True) -> Any:
        row = await self._get(self._tables.path("culture", id))
        return None if row is None else rows.culture_out(row, deserialize)

    @exclusive
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

    @exclusive
    async def adelete_cultural_knowledge(self, id: str) -> None:
        await self._delete_rows([self._tables.path("culture", id)], "culture")

    # -- knowledge base registry ----------------------------------------------------------------------

    @exclusive
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

    @exclusive
    async def aget_knowledge_content(self, id: str) -> Any:
        row = await self._get(self._tables.path("knowledge", id))
        return None if row is None else rows.knowledge_out(row)

    @exclusive
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

    @exclusive
    async def adelete_knowledge_content(self, id: str) -> bool:
        return await self._delete_rows([self._tables.path("knowledge", id)], "knowledge") == 1

    @exclusive
    async def adelete_knowledge_contents(self, ids: list[str]) -> int:
        paths = [self._tables.path("knowledge", i) for i in dict.fromkeys(ids)]
        return await self._delete_rows(paths, "knowledge") if paths else 0

    # -- generic models and usage entries -------------------------------------------------------------

    @exclusive
    async def aupsert_model(self, key: str, model: Any, collection: str = "generic_models") -> None:
        data = rows.plain(
            model.model_dump(mode="json") if hasattr(model, "model_dump") else rows.fields_of(model, "model")
        )
        row = {"key": key, "collection": collection, "model_data": data}
        await self._put(self._tables.path("models", collection, key), row, ("key", "collection"), "upsert_model")

    @exclusive
    async def aget_model(self, key: str, model_type: Any, collection: str = "generic_models") -> Any:
        row = await self._get(self._tables.path("models", collection, key))
        return None if row is None else model_type(**row["model_data"])

    @exclusive
    async def adelete_model(self, key: str, collection: str = "generic_models") -> bool:
        return await self._delete_rows([self._tables.path("models", collection, key)], "models") == 1

    @exclusive
    async def alist_models(self, model_type: Any, collection: str = "generic_models") -> list[Any]:
        found = await self._rows("models", {}, (), below=(collection,))
        return [model_type(**r["model_data"]) for r in sort_rows(found, "key", "asc", "key")]

    @exclusive
    async def aupsert_usage_entry(self, entry: dict[str, Any]) -> None:
        row = rows.plain(dict(entry))
        rows.required_id(row, "entry_id", "usage entry")
        await self._put(self._tables.path("usage", row["entry_id"]), row, rows.USAGE_LABELS, "upsert_usage_entry")

    @exclusive
    async def aquery_usage_entries(self, *, limit: int | None = None, **filters: Any) -> list[dict[str, Any]]:
        found = await self._rows("usage", _usage_filters(filters), rows.USAGE_LABELS)
        # oldest first, as Upsonic's stores return their rows (entry ids are random)
        return page(sort_rows(found, "timestamp", "asc", "entry_id"), limit, None)

    @exclusive
    async def adelete_usage_entries(self, **filters: Any) -> int:
        wanted = _usage_filters(filters)
        found = await self._rows("usage", wanted, rows.USAGE_LABELS)
        return await self._delete_rows([self._tables.path("usage", r["entry_id"]) for r in found], "usage")

    @exclusive
    async def aclear_all(self) -> None:
        """Delete every row of this storage's own session, user memory and knowledge tables (one commit), the
        kinds Upsonic's own storages (JSON, in-memory, SQLite) clear. Cultural knowledge, generic models (one
        directory per key: Upsonic gives them no table name) and usage entries stay, as there; so do other
        storages' tables on the same key (named otherwise)."""

        async def remove() -> None:
            store = await self._tables.store()
            for directory in sorted({self._tables.dirs[table] for table in CLEARED_TABLES}):
                for path in await store.list_paths.aio(f"{self._tables.prefix}/{directory}"):
                    await self._tables.delete(path)

        await self._tables.commit(remove, "clear_all")

    # -- row helpers --------------------------------------------------------------------------------

    async def _rows(
        self, table: str, wanted: Mapping[str, Any], labelled: tuple[str, ...], below: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """The rows of `table` (of its sub-directory of the ids `below`) holding `wanted`."""
        await self._tables.fresh()
        wanted = where(wanted)
        labels = labels_of(wanted, tuple(n for n in wanted if n in labelled))
        found = await self._tables.find("/".join([self._tables.dirs[table], *map(segment, below)]), labels)
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


def _usage_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(rows.USAGE_LABELS)
    if unknown:
        raise InvalidArgument(f"unknown usage filters: {sorted(unknown)}")
    return where(filters)


def _page_numbered(found: list[dict[str, Any]], limit: int | None, number: int | None) -> list[dict[str, Any]]:
    """Pages numbered from 1, as Upsonic's knowledge tables take them."""
    if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 1):
        raise InvalidArgument(f"page is an int >= 1 or None, got {number!r}")
    return page(found, limit, None if limit is None or number is None else (number - 1) * limit)
