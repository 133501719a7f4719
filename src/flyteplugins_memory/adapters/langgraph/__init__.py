"""LangGraph's store API (``langgraph.store.base.BaseStore``) over a flyteplugins-memory store.

``FlyteStore(store_or_key)`` is a `BaseStore`: `put`, `get`, `search`, `delete`, `list_namespaces`, `batch`
and their async twins, so a LangGraph agent's long-term memory (``graph.compile(store=...)``, langmem,
``InjectedStore`` tools) lives in a keyed store in the task's bucket, with its history, audit trail and
concurrency. Needs ``langgraph-checkpoint`` (``pip install 'flyteplugins-memory[langgraph]'``).

- **Items are files.** ``(namespace, key)`` is ``langgraph/<label>/.../<key>.json`` holding the value as
  JSON, labelled with the exact namespace, key, times and ttl (`layout`). Namespaces are directories, so a
  search or listing under a prefix reads only that directory.
- **Every write commits.** A batch's puts and deletes (the last op per item wins, as in LangGraph's
  `InMemoryStore`) are one save; one that meets a concurrent change of the same item refreshes and
  re-applies (last writer wins, as a database store's upsert). Reads in a batch see the state before its
  writes. Batches that arrive while another runs are grouped: their reads, then their writes, one save.
  Reads see this handle's state: `refresh()` picks up what other tasks saved since.
- **search** ranks by our BM25 index (``store.search``) when given a ``query`` (re-ranked with the
  ``index`` embeddings through ``search(embed=...)`` when configured); the items it does not rank follow,
  unscored (``score=None``), newest first, so a query narrows the order, never the set, as in LangGraph.
  Without a query, newest ``updated_at`` first. ``filter`` takes LangGraph's operators (``$eq``, ``$ne``,
  ``$gt``, ``$gte``, ``$lt``, ``$lte``) and plain equality, nested fields compared as `InMemoryStore` does.
- **ttl** (minutes) is our file ttl (``write_text(..., ttl=)``): an expired item reads as missing on
  every handle and leaves storage with ``gc``. With ``TTLConfig(refresh_on_read=True)``, a read with
  ``refresh_ttl`` rewrites the item with a fresh expiry (one save per batch, audited as
  ``langgraph ttl refresh``); without it, as in LangGraph's SQL stores, reads never write.
- **Bad input** raises `InvalidStoreInput` (a ``ValueError``), before anything is written: a bad namespace,
  from any method, `InvalidNamespace`, which is LangGraph's `InvalidNamespaceError` too; a value, key or
  namespace that is not valid Unicode (a lone surrogate) is refused, as the store refuses it everywhere.
- **Values keep their key order**, as put (`InMemoryStore` returns the dict it was given).
- **Cancelling** an ``abatch`` (its caller cancelled) drops the batch while it waits its turn; once its
  group is saving it lands whole. Either way it lands whole or not at all, and the caller gets
  ``CancelledError``.
- **The location** of a store given as a key is resolved in the context the adapter is made in, when that
  context names the task's storage (a Flyte task, a bound raw-data path): later calls from any thread go
  there. Made where none is named (a module's top level), it is resolved at first use, as a key is.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
)

from flyteplugins_memory import (
    BlockingCallOnLoop,
    ConcurrencyError,
    InvalidArgument,
    InvalidContent,
    InvalidPath,
    MemoryStore,
)

from .._context import storage_context
from .._loop import AdapterLoop
from .batches import Pending, forget, settle, to_the_end
from .checks import checked_ops, converting_namespace_errors
from .layout import (
    ROOT,
    InvalidNamespace,
    InvalidStoreInput,
    Labels,
    check_filter,
    check_ttl,
    check_value,
    directory_of,
    labels_of,
    matches_filter,
    matches_namespace,
    path_of,
)

__all__ = ["FlyteStore", "InvalidNamespace", "InvalidStoreInput"]

_ATTEMPTS = 20
#: seconds: the most a retry waits, times its attempt number (jitter, so two racing writers stop colliding)
_BACKOFF = 0.02
#: the store's refusals of input (a path or labels over a limit, a query too long): `InvalidStoreInput`
_REFUSED = (InvalidArgument, InvalidContent, InvalidPath)
Entries = dict[str, Labels]
#: where every op of every `FlyteStore` runs (`adapters._loop`): the sync API works inside a running loop too
LOOP = AdapterLoop("flyteplugins-memory-langgraph")


class FlyteStore(BaseStore):
    """A LangGraph `BaseStore` over one store key.

    `store` is an open `MemoryStore` handle, or a key opened with ``MemoryStore.get_or_create`` on first
    use. `index` is LangGraph's `IndexConfig` (``embed``: an `Embeddings`, a function or a provider string;
    ``dims`` and ``fields`` are accepted, the whole value is what is ranked). `ttl` is LangGraph's
    `TTLConfig` (``default_ttl``, ``refresh_on_read``, off unless set; expired items are never returned, and ``gc``
    removes them, so ``sweep_interval_minutes`` is not needed). `actor` names the writer in history and audit.
    """

    supports_ttl = True
    __slots__ = (
        "_actor",
        "_context",
        "_embeddings",
        "_key",
        "_lock",
        "_queue",
        "_store",
        "index_config",
        "ttl_config",
    )

    def __init__(
        self,
        store: MemoryStore | str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        actor: str = "langgraph",
    ) -> None:
        if not isinstance(store, MemoryStore | str) or not isinstance(actor, str):
            raise InvalidStoreInput("FlyteStore needs a MemoryStore or a key, and actor a str")
        self._store = store if isinstance(store, MemoryStore) else None
        self._key = store if isinstance(store, str) else ""
        # a key's location (storage root, org, project, domain) comes from the Flyte context: the one this
        # adapter is made in when it names the task's storage, so calls from any thread go there
        self._context = storage_context() if self._store is None else None
        self._actor = actor
        self._lock: asyncio.Lock | None = None  # made on the adapter's loop, where every op runs
        self._queue: list[Pending] = []  # batches waiting for the lock (see `_batch`)
        self.index_config = dict(index) if index else None
        self._embeddings = ensure_embeddings(index.get("embed")) if index else None
        self.ttl_config = ttl

    # -- LangGraph's two entry points: every other method of BaseStore calls one of them --------------
    # (those methods check namespaces first, with LangGraph's error: `converting_namespace_errors` raises
    # ours, which is both)

    get = converting_namespace_errors("get")
    aget = converting_namespace_errors("aget")
    search = converting_namespace_errors("search")
    asearch = converting_namespace_errors("asearch")
    put = converting_namespace_errors("put")
    aput = converting_namespace_errors("aput")
    delete = converting_namespace_errors("delete")
    adelete = converting_namespace_errors("adelete")
    list_namespaces = converting_namespace_errors("list_namespaces")
    alist_namespaces = converting_namespace_errors("alist_namespaces")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` (gets, searches and listings against the state before the batch's puts, which are
        one save) and return one result per op, in order."""
        if LOOP.on_loop():
            raise BlockingCallOnLoop("FlyteStore.batch was called from inside one of its own ops: use abatch")
        return LOOP.run(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch`, awaited. Cancelled, the batch lands whole or not at all: dropped while it waits for
        the batch before it, saved whole once its group is saving."""
        return await asyncio.wrap_future(LOOP.submit(self._batch(list(ops))))

    # -- beyond BaseStore --------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Pick up what other tasks saved to the key since this handle loaded."""
        LOOP.run(self._refresh())

    async def arefresh(self) -> None:
        """`refresh`, awaited."""
        await asyncio.wrap_future(LOOP.submit(self._refresh()))

    @property
    def embeddings(self) -> Any:
        """The `Embeddings` that `index` configured (None without one), as LangGraph's stores name it."""
        return self._embeddings

    async def handle(self) -> MemoryStore:
        """The underlying `MemoryStore` (opened on first use when given a key)."""
        if self._store is None:
            opening = MemoryStore.get_or_create.aio(key=self._key)
            if self._context is not None:  # where the adapter was made, whatever thread calls now
                opening = asyncio.get_running_loop().create_task(opening, context=self._context.copy())
            self._store = await opening
        return self._store

    # -- the batch -----------------------------------------------------------------------------------------

    async def _refresh(self) -> None:
        async with self._locked():
            await to_the_end(self._refresh_handle())  # cancelled, a refresh is not cut off halfway

    async def _refresh_handle(self) -> None:
        await (await self.handle()).refresh.aio()

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _batch(self, ops: list[Op]) -> list[Result]:
        """Group commit: batches that arrive while another holds the lock wait, and the next holder runs
        them all, reads first and then their writes as one save (concurrent batches have no order of
        their own, so all reads before all writes is one they could have run in)."""
        pending = Pending(ops, checked_ops(ops), asyncio.get_running_loop().create_future())
        self._queue.append(pending)
        try:
            async with self._locked():
                if not pending.done.done():
                    group, self._queue = self._queue, []
                    try:
                        await to_the_end(self._run(group))
                    finally:  # failed midway: the group's other callers must not wait forever
                        for waiting in group:
                            if not waiting.done.done():
                                waiting.done.cancel()
        except asyncio.CancelledError:
            # the caller was cancelled: waiting for its turn, the batch is dropped (`_run` skips it if a
            # group holds it already); running, `to_the_end` finished its group's save first
            if pending in self._queue:
                self._queue.remove(pending)
            forget(pending.done)
            raise
        return pending.done.result()

    async def _run(self, group: list[Pending]) -> None:
        store = await self.handle()
        stale: dict[str, Labels] = {}  # items read with refresh_ttl whose expiry moves
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        done: list[tuple[Pending, list[Result]]] = []
        for pending in group:
            if pending.done.done():  # its caller was cancelled before it ran: dropped
                continue
            try:
                results: list[Result] = [await self._read(store, op, stale) for op in pending.ops]
            except Exception as exc:  # this batch fails alone: its puts are not written
                settle(pending.done, error=exc)
                continue
            puts.update(pending.puts)
            done.append((pending, results))
        try:
            if puts or stale:
                await self._commit(store, puts, {p: lb for p, lb in stale.items() if _item_of(lb) not in puts})
        except Exception as exc:  # the save failed: every batch of the group with it, nothing staged
            for pending, _ in done:
                settle(pending.done, error=exc)
            return
        for pending, results in done:
            settle(pending.done, results)

    def _refreshes(self, op: GetOp | SearchOp) -> bool:
        """Whether a read moves the expiry of what it returns: when asked (`refresh_ttl`, True unless the
        caller says otherwise) and the store's `TTLConfig` says ``refresh_on_read``, as LangGraph's SQL
        stores decide (a store without it never writes on a read)."""
        return bool(op.refresh_ttl and self.ttl_config and self.ttl_config.get("refresh_on_read", False))

    async def _read(self, store: MemoryStore, op: Op, stale: dict[str, Labels]) -> Result:
        if isinstance(op, GetOp):
            return await self._get(store, op, stale)
        if isinstance(op, SearchOp):
            return await self._search(store, op, stale)
        if isinstance(op, ListNamespacesOp):
            return await self._namespaces(store, op)
        return None  # a PutOp: written after the reads

    async def _get(self, store: MemoryStore, op: GetOp, stale: dict[str, Labels]) -> Item | None:
        path = path_of(op.namespace, op.key)
        labels = Labels(await store.get_meta.aio(path))
        if not labels.is_item or labels.namespace != tuple(op.namespace) or labels.key != op.key:
            return None
        if self._refreshes(op) and labels.ttl is not None:
            stale[path] = labels
        found = _item(labels, await store.read_json.aio(path))
        return Item(
            value=found.value,
            key=found.key,
            namespace=found.namespace,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    async def _search(self, store: MemoryStore, op: SearchOp, stale: dict[str, Labels]) -> list[SearchItem]:
        entries = await _entries(store, op.namespace_prefix)
        if not entries:
            return []
        ranked = await self._scores(store, op, len(entries)) if op.query else {}
        scores = {p: score for p, score in ranked.items() if p in entries and entries[p].indexed}
        newest = sorted(entries, key=lambda p: (entries[p].updated_at, p), reverse=True)
        order = [p for p in scores if p in entries] + [p for p in newest if p not in scores]
        found: list[SearchItem] = []
        wanted, skip = check_filter(op.filter), op.offset
        for path in order:
            if len(found) == op.limit:
                break
            value = await store.read_json.aio(path) if wanted or skip == 0 else None
            if value is not None and not matches_filter(value, wanted):
                continue
            if skip:
                skip -= 1
                continue
            if self._refreshes(op) and entries[path].ttl is not None:
                stale[path] = entries[path]
            found.append(_item(entries[path], value, score=scores.get(path)))
        return found

    async def _scores(self, store: MemoryStore, op: SearchOp, count: int) -> dict[str, float]:
        embed = self._embed if self._embeddings is not None else None
        try:
            hits = await store.search.aio(
                str(op.query), prefix=directory_of(op.namespace_prefix), limit=count, embed=embed
            )
        except _REFUSED as exc:
            raise InvalidStoreInput(f"search cannot take this query: {exc}") from exc
        return {hit.path: hit.score for hit in hits}

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self._embeddings is not None
        return await self._embeddings.aembed_documents(texts)

    async def _namespaces(self, store: MemoryStore, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = {lb.namespace for lb in (await _entries(store, ())).values() if lb.namespace}
        for condition in op.match_conditions or ():
            namespaces = {ns for ns in namespaces if matches_namespace(condition, ns)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # -- writes: one save per batch ---------------------------------------------------------------------

    async def _commit(self, store: MemoryStore, puts: dict[tuple[tuple[str, ...], str], PutOp], stale: Entries) -> None:
        """Stage the puts and ttl refreshes and save; on a conflict, refresh and re-apply to the newest
        state. What an attempt staged is reverted when it fails, so no later save commits it."""
        deletes = [path_of(op.namespace, op.key) for op in puts.values() if op.value is None]
        if deletes and not all([await store.exists.aio(path) for path in deletes]):
            # a delete stages nothing for an item this handle has not seen (another task put it): see it first
            await store.refresh.aio()
        for attempt in range(_ATTEMPTS):
            touched: list[str] = []
            try:
                for op in puts.values():
                    await self._put(store, op, touched)
                for path, labels in stale.items():
                    await self._touch(store, path, labels, touched)
                await store.save.aio(actor=self._actor, reason=_reason(puts, stale))
                return
            except ConcurrencyError:
                await store.revert.aio(touched)
                if attempt == _ATTEMPTS - 1:
                    raise
                await asyncio.sleep(random.uniform(0, _BACKOFF * (attempt + 1)))  # writers racing take turns
                await store.refresh.aio()
            except BaseException:
                await store.revert.aio(touched)
                raise

    async def _put(self, store: MemoryStore, op: PutOp, touched: list[str]) -> None:
        path = path_of(op.namespace, op.key)
        touched.append(path)
        if op.value is None:
            await store.delete.aio(path, actor=self._actor, reason="langgraph delete")
            return
        old = Labels(await store.get_meta.aio(path))
        now = datetime.now(UTC)
        same = old.is_item and old.namespace == tuple(op.namespace) and old.key == op.key
        created = old.created_at if same and old.created_at else now
        ttl = check_ttl(op.ttl)
        labels = labels_of(tuple(op.namespace), op.key, created, now, ttl, indexed=op.index is not False)
        await self._write(store, path, check_value(op.value), labels, ttl, "langgraph put")

    async def _touch(self, store: MemoryStore, path: str, labels: Labels, touched: list[str]) -> None:
        """Rewrite an item read with `refresh_ttl` as it is, its expiry moved `ttl` minutes from now."""
        current = Labels(await store.get_meta.aio(path))
        if not current.is_item or current.ttl is None:  # deleted or rewritten meanwhile: nothing to refresh
            return
        touched.append(path)
        assert current.namespace is not None and current.key is not None
        assert current.created_at is not None and current.updated_at is not None
        lb = labels_of(
            current.namespace,
            current.key,
            current.created_at,
            current.updated_at,
            current.ttl,
            indexed=current.indexed,
        )
        await self._write(store, path, await store.read_json.aio(path), lb, current.ttl, "langgraph ttl refresh")

    async def _write(
        self, store: MemoryStore, path: str, value: Any, labels: dict[str, Any], ttl: float | None, reason: str
    ) -> None:
        try:  # `write_json` as it writes, but keys in the value's order (`write_json` sorts them)
            await store.write_text.aio(
                path,
                json.dumps(value, indent=2),
                actor=self._actor,
                reason=reason,
                metadata=labels,
                ttl=None if ttl is None else timedelta(minutes=ttl),
            )
        except _REFUSED as exc:
            raise InvalidStoreInput(f"item {labels['lg_key']!r} cannot be stored: {exc}") from exc


# -- helpers ---------------------------------------------------------------------------------------------


async def _entries(store: MemoryStore, prefix: tuple[str, ...]) -> Entries:
    """The items under namespace `prefix`, by path, with their labels."""
    out: Entries = {}
    for path in await store.list_paths.aio(directory_of(prefix) if prefix else ROOT):
        labels = Labels(await store.get_meta.aio(path))
        if labels.is_item and labels.namespace is not None and labels.namespace[: len(prefix)] == tuple(prefix):
            out[path] = labels
    return out


def _item(labels: Labels, value: Any, *, score: float | None = None) -> SearchItem:
    assert labels.namespace is not None and labels.key is not None
    assert labels.created_at is not None and labels.updated_at is not None
    return SearchItem(labels.namespace, labels.key, value, labels.created_at, labels.updated_at, score)


def _item_of(labels: Labels) -> tuple[tuple[str, ...], str]:
    assert labels.namespace is not None and labels.key is not None
    return labels.namespace, labels.key


def _reason(puts: dict[tuple[tuple[str, ...], str], PutOp], stale: Entries) -> str:
    written = sum(op.value is not None for op in puts.values())
    return f"langgraph batch: {written} put, {len(puts) - written} deleted, {len(stale)} ttl refreshed"
