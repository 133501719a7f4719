"""The LangGraph adapter (`flyteplugins_memory.adapters.langgraph`): LangGraph's `BaseStore` on local disk and
moto S3, checked through fresh handles and the backend's own object listing: put/get/delete, search with
filters and ranking, list_namespaces, ttl, batches, the async twins, history and audit of the writes, bad
input, and a real compiled graph whose node keeps its memory in the store across two invocations."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from flyteplugins_memory import BlockingCallOnLoop, MemoryStore
from flyteplugins_memory.adapters.langgraph import LOOP, FlyteStore, InvalidNamespace, InvalidStoreInput
from flyteplugins_memory.adapters.langgraph.layout import labels_of, path_of


def files_in_storage(backend, key: str) -> dict[str, object]:
    """The adapter's item files as the backend itself lists them, decoded."""
    return {n: json.loads(d) for n, d in backend.objects(key).items() if n.startswith("langgraph/")}


async def fresh(key: str) -> FlyteStore:
    return FlyteStore(await MemoryStore.get_or_create.aio(key=key))


async def test_put_get_delete_round_trip_through_storage(durable_backend, key):
    store = FlyteStore(key)
    await store.aput(("users", "alice"), "prefs", {"food": "pizza", "n": 3})
    await store.aput(("users", "Bob/x"), "../a key/with: anything", {"food": "sushi"})

    reader = await fresh(key)
    got = await reader.aget(("users", "alice"), "prefs")
    assert type(got) is Item and got.value == {"food": "pizza", "n": 3}
    assert got.namespace == ("users", "alice") and got.key == "prefs"
    odd = await reader.aget(("users", "Bob/x"), "../a key/with: anything")
    assert odd is not None and odd.value == {"food": "sushi"}
    assert await reader.aget(("users", "alice"), "missing") is None

    stored = files_in_storage(durable_backend, key)  # one JSON file per item, the value as it is
    assert stored[path_of(("users", "alice"), "prefs")] == {"food": "pizza", "n": 3}
    assert set(stored) == {path_of(("users", "alice"), "prefs"), path_of(("users", "Bob/x"), "../a key/with: anything")}
    assert all(p.count("/") == 3 for p in stored)  # an id with '/' or '..' stays one segment

    meta = await (await MemoryStore.get_or_create.aio(key=key)).get_meta.aio(path_of(("users", "alice"), "prefs"))
    assert meta is not None and meta.updated_by == "langgraph"
    assert meta.metadata["lg_namespace"] == '["users", "alice"]' and meta.metadata["lg_key"] == "prefs"

    await reader.adelete(("users", "alice"), "prefs")
    assert await (await fresh(key)).aget(("users", "alice"), "prefs") is None
    assert path_of(("users", "alice"), "prefs") not in files_in_storage(durable_backend, key)


async def test_an_update_keeps_created_at_and_history_and_audit_show_every_write(durable_backend, key):
    store = FlyteStore(key, actor="planner")
    await store.aput(("docs",), "plan", {"step": 1})
    first = await store.aget(("docs",), "plan")
    await store.aput(("docs",), "plan", {"step": 2})
    second = await (await fresh(key)).aget(("docs",), "plan")
    assert first is not None and second is not None
    assert second.value == {"step": 2} and second.created_at == first.created_at
    assert second.updated_at > first.updated_at

    handle = await MemoryStore.get_or_create.aio(key=key)
    path = path_of(("docs",), "plan")
    versions = await handle.history.aio(path)
    assert [json.loads(await handle.read_version.aio(path, v.version_id)) for v in versions[-2:]] in (
        [{"step": 1}, {"step": 2}],
        [{"step": 2}, {"step": 1}],
    )
    commits = await handle.log.aio(limit=5, path=path)
    assert len(commits) == 2 and all(c.actor == "planner" for c in commits)
    assert "langgraph batch: 1 put" in commits[0].reason
    events = [e for e in await handle.audit_tail.aio(0) if e.get("path") == path]
    assert len(events) == 2 and {e.get("actor") for e in events} == {"planner"}


async def test_search_filters_with_langgraph_operators(durable_backend, key):
    store = FlyteStore(key)
    rows = {"a": {"n": 1, "kind": "x", "meta": {"lang": "en"}}, "b": {"n": 5, "kind": "y"}, "c": {"n": 9, "kind": "x"}}
    for k, v in rows.items():
        await store.aput(("items",), k, v)
    reader = await fresh(key)

    async def keys(flt):
        return sorted(i.key for i in await reader.asearch(("items",), filter=flt))

    assert await keys({"kind": "x"}) == ["a", "c"]
    assert await keys({"kind": {"$eq": "y"}}) == ["b"]
    assert await keys({"kind": {"$ne": "x"}}) == ["b"]
    assert await keys({"n": {"$gt": 1}}) == ["b", "c"]
    assert await keys({"n": {"$gte": 5, "$lt": 9}}) == ["b"]
    assert await keys({"n": {"$lte": 5}, "kind": "x"}) == ["a"]
    assert await keys({"meta": {"lang": "en"}}) == ["a"]
    assert await keys({"meta.lang": "en"}) == ["a"]  # a dotted field is a nested path, as LangGraph's SQL stores
    assert await keys({"missing": 1}) == []
    with pytest.raises(InvalidStoreInput, match="unsupported operator"):
        await reader.asearch(("items",), filter={"n": {"$in": [1]}})
    with pytest.raises(InvalidStoreInput, match="needs a number"):
        await reader.asearch(("items",), filter={"n": {"$gt": "1"}})


async def test_search_ranks_by_query_through_our_index_and_keeps_the_rest_unscored(durable_backend, key):
    store = FlyteStore(key)
    await store.aput(("mem", "alice"), "1", {"text": "Alice prefers window seats on long flights"})
    await store.aput(("mem", "alice"), "2", {"text": "Alice is allergic to peanuts"})
    await store.aput(("mem", "bob"), "3", {"text": "Bob prefers aisle seats"})
    reader = await fresh(key)

    hits = await reader.asearch(("mem", "alice"), query="window seats")
    assert [h.key for h in hits] == ["1", "2"] and isinstance(hits[0], SearchItem)
    assert hits[0].score is not None and hits[0].score > 0 and hits[1].score is None
    assert [h.key for h in await reader.asearch(("mem",), query="seats", limit=2)] in (["1", "3"], ["3", "1"])
    assert [h.key for h in await reader.asearch(("mem",), query="peanuts", limit=1, offset=0)] == ["2"]
    page = await reader.asearch(("mem",), limit=2, offset=1)  # newest updated_at first
    assert [h.key for h in page] == ["2", "1"]
    assert await reader.asearch(("me",)) == []  # a prefix is whole labels, never part of one


async def test_search_with_an_index_re_ranks_through_embed(durable_backend, key):
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [[1.0, 0.0] if "cat" in t or "kitten" in t else [0.0, 1.0] for t in texts]

    store = FlyteStore(key, index={"dims": 2, "embed": embed})
    await store.aput(("pets",), "dog", {"text": "a loyal dog"})
    await store.aput(("pets",), "cat", {"text": "a sleepy cat"})
    hits = await store.asearch(("pets",), query="kitten")  # no word in common: meaning decides
    assert [h.key for h in hits] == ["cat", "dog"] and calls and store.embeddings is not None
    await store.aput(("pets",), "kitten", {"text": "a kitten"}, index=False)  # found, never ranked
    hits = await store.asearch(("pets",), query="kitten")
    assert hits[-1].key == "kitten" and hits[-1].score is None
    assert (await MemoryStore.get_or_create.aio(key=key)).get_meta(path_of(("pets",), "kitten")).metadata[
        "lg_indexed"
    ] is False


async def test_list_namespaces_prefix_suffix_depth_and_pages(durable_backend, key):
    store = FlyteStore(key)
    spaces = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "c", "f"), ("b", "a", "f"), ("users", "123")]
    await store.abatch([PutOp(ns, "k", {"v": i}) for i, ns in enumerate(spaces)])
    reader = await fresh(key)
    assert await reader.alist_namespaces() == sorted(spaces)
    assert await reader.alist_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert await reader.alist_namespaces(suffix=("f",)) == [("a", "c", "f"), ("b", "a", "f")]
    assert await reader.alist_namespaces(prefix=("a", "*", "f")) == [("a", "c", "f")]
    assert await reader.alist_namespaces(max_depth=2) == [("a", "b"), ("a", "c"), ("b", "a"), ("users", "123")]
    assert await reader.alist_namespaces(limit=2, offset=1) == sorted(spaces)[1:3]
    await reader.adelete(("users", "123"), "k")  # a namespace is its items: the last one gone, it is gone
    assert ("users", "123") not in await (await fresh(key)).alist_namespaces()


async def test_ttl_is_our_file_ttl_and_expired_items_read_as_missing(durable_backend, key, monkeypatch):
    store = FlyteStore(key, ttl={"default_ttl": 5, "refresh_on_read": False})
    await store.aput(("t",), "default", {"v": 1})
    await store.aput(("t",), "long", {"v": 2}, ttl=60)
    await store.aput(("t",), "forever", {"v": 3}, ttl=None)
    handle = await MemoryStore.get_or_create.aio(key=key)
    labels = {k: (await handle.get_meta.aio(path_of(("t",), k))).metadata.get("lg_ttl") for k in ("default", "long")}
    assert labels == {"default": 5.0, "long": 60.0}

    from flyteplugins_memory._journal import gc as _gc

    real = _gc.clock
    monkeypatch.setattr(_gc, "clock", lambda: real() + timedelta(minutes=10).total_seconds())
    reader = await fresh(key)
    assert await reader.aget(("t",), "default") is None
    assert sorted(i.key for i in await reader.asearch(("t",))) == ["forever", "long"]


async def test_a_read_with_refresh_on_read_rewrites_the_expiry(durable_backend, key):
    plain = FlyteStore(key)  # no TTLConfig: reads never write, as LangGraph's SQL stores
    await plain.aput(("t",), "k", {"v": 1}, ttl=30)
    handle = await MemoryStore.get_or_create.aio(key=key)
    before = len(await handle.log.aio(limit=10))
    assert (await plain.aget(("t",), "k")) is not None and await plain.asearch(("t",))
    store = FlyteStore(await MemoryStore.get_or_create.aio(key=key), ttl={"refresh_on_read": True})
    assert (await store.aget(("t",), "k", refresh_ttl=False)) is not None
    assert len(await (await MemoryStore.get_or_create.aio(key=key)).log.aio(limit=10)) == before
    assert (await store.aget(("t",), "k")) is not None  # refresh_ttl defaults to True
    commits = await (await MemoryStore.get_or_create.aio(key=key)).log.aio(limit=10)
    assert len(commits) == before + 1 and "1 ttl refreshed" in commits[0].reason


async def test_batch_reads_see_the_state_before_its_puts_and_puts_are_one_save(durable_backend, key):
    store = FlyteStore(key)
    await store.aput(("test", "foo"), "key1", {"data": "value1"})
    handle = await MemoryStore.get_or_create.aio(key=key)
    before = len(await handle.log.aio(limit=20))
    results = await store.abatch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "value2"}),
            PutOp(("test", "bar"), "key3", {"data": "value3"}),
            PutOp(("test", "foo"), "key1", None),
            SearchOp(("test",), filter={"data": "value1"}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("test",)),)),
            GetOp(("test", "bar"), "key2"),
        ]
    )
    assert results[0] is not None and results[0].value == {"data": "value1"}
    assert results[1:4] == [None, None, None] and [i.key for i in results[4]] == ["key1"]
    assert results[5] == [("test", "foo")] and results[6] is None
    commits = await (await MemoryStore.get_or_create.aio(key=key)).log.aio(limit=20)
    assert len(commits) == before + 1 and commits[0].reason == "langgraph batch: 2 put, 1 deleted, 0 ttl refreshed"
    written = {path_of(("test", "bar"), "key2"), path_of(("test", "bar"), "key3")}
    assert set(files_in_storage(durable_backend, key)) == written


def test_the_sync_api_works_inside_a_running_loop_too(durable_backend, key):
    store = FlyteStore(key)
    store.put(("s",), "k", {"v": 1})
    assert store.get(("s",), "k").value == {"v": 1}
    assert [i.key for i in store.search(("s",))] == ["k"] and store.list_namespaces() == [("s",)]

    async def inside() -> object:  # a sync node of an async graph calls the sync API on a running loop
        return store.get(("s",), "k")

    assert asyncio.run(inside()).value == {"v": 1}
    with pytest.raises(BlockingCallOnLoop):  # but not from inside one of its own ops (it would wait on itself)
        LOOP.submit(inside()).result()
    store.delete(("s",), "k")
    assert store.get(("s",), "k") is None and files_in_storage(durable_backend, key) == {}


async def test_bad_input_is_a_typed_error_and_writes_nothing(durable_backend, key):
    store = FlyteStore(key)
    await store.aput(("ok",), "k", {"v": 1})
    for namespace in [(), ("a.b",), ("",), ("x", 1)]:
        with pytest.raises(InvalidNamespace) as err:  # batch ops skip BaseStore's own check: ours holds
            await store.abatch([PutOp(namespace, "k", {"v": 1})])
        assert isinstance(err.value, InvalidNamespaceError) and isinstance(err.value, ValueError)
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("langgraph",), "k", {"v": 1})  # LangGraph's own rules, before the batch
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("a.b",), "k", {"v": 1})
    bad_puts = [
        PutOp(("ok",), "k2", ["not", "a", "dict"]),  # type: ignore[arg-type]
        PutOp(("ok",), "k2", {"x": float("nan")}),
        PutOp(("ok",), "k2", {"x": object()}),
        PutOp(("ok",), "k2", {"v": 1}, ttl=-1),
        PutOp(("ok",), "", {"v": 1}),
        PutOp(("ok",), "k2", {"v": 1}, ttl="soon"),  # type: ignore[arg-type]
    ]
    for op in bad_puts:
        with pytest.raises(InvalidStoreInput):
            await store.abatch([PutOp(("ok",), "k3", {"v": 3}), op])  # the good put in its batch is not written
    with pytest.raises(InvalidStoreInput, match="limit"):
        await store.asearch(("ok",), limit=-1)
    with pytest.raises(InvalidStoreInput, match="match_type"):
        await store.abatch([ListNamespacesOp(match_conditions=(MatchCondition("middle", ("a",)),))])  # type: ignore[arg-type]
    with pytest.raises(InvalidStoreInput, match="cannot be stored"):  # over the labels' 4 KiB
        await store.aput(("ok",), "k" * 5000, {"v": 1})
    with pytest.raises(InvalidStoreInput, match="unknown op"):
        await store.abatch(["not an op"])  # type: ignore[list-item]
    assert set(files_in_storage(durable_backend, key)) == {path_of(("ok",), "k")}
    assert await (await fresh(key)).aget(("ok",), "k3") is None


async def test_two_adapters_on_one_key_merge_their_puts(durable_backend, key):
    one, two = await fresh(key), await fresh(key)
    await asyncio.gather(*(s.aput(("shared",), f"k{i}", {"by": i}) for i, s in enumerate([one, two, one, two])))
    await one.aput(("shared",), "same", {"by": "one"})
    await two.aput(("shared",), "same", {"by": "two"})  # a conflict on one item: refreshed, last writer wins
    reader = await fresh(key)
    assert sorted(i.key for i in await reader.asearch(("shared",))) == ["k0", "k1", "k2", "k3", "same"]
    assert (await reader.aget(("shared",), "same")).value == {"by": "two"}


async def test_a_compiled_graph_keeps_its_memory_in_the_store_across_invocations(durable_backend, key):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    class State(TypedDict):
        user: str
        said: str
        known: list[str]

    def remember(state: State, *, store: BaseStore) -> dict:
        namespace = ("memories", state["user"])
        if state["said"]:
            store.put(namespace, f"fact-{len(store.search(namespace))}", {"text": state["said"]})
        return {"known": [i.value["text"] for i in store.search(namespace, query=state["said"] or "name")]}

    def graph(store: FlyteStore):
        builder = StateGraph(State)
        builder.add_node("remember", remember)
        builder.add_edge(START, "remember")
        builder.add_edge("remember", END)
        return builder.compile(store=store)

    await graph(FlyteStore(key)).ainvoke({"user": "ada", "said": "my name is Ada", "known": []})
    out = await graph(await fresh(key)).ainvoke({"user": "ada", "said": "", "known": []})  # a new run
    assert out["known"] == ["my name is Ada"]
    assert list(files_in_storage(durable_backend, key).values()) == [{"text": "my name is Ada"}]


async def test_concurrent_batches_share_one_save_and_a_bad_one_fails_alone(durable_backend, key):
    store = FlyteStore(key)
    await store.aput(("warm",), "k", {"v": 0})  # the handle is open: the next calls queue behind each other
    handle = await MemoryStore.get_or_create.aio(key=key)
    before = len(await handle.log.aio(limit=100))
    calls = [store.aput(("many",), f"k{i}", {"i": i}) for i in range(20)]
    calls.append(store.abatch([PutOp(("many",), "bad", {"x": float("nan")})]))
    calls.append(store.abatch([SearchOp(("warm",), query="x" * 5000), PutOp(("many",), "lost", {"i": -1})]))
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(o is None for o in outcomes[:20])
    assert isinstance(outcomes[20], InvalidStoreInput)  # refused before it queued
    assert isinstance(outcomes[21], InvalidStoreInput)  # its read failed in the group: its put is not written
    reader = await fresh(key)
    assert sorted(i.value["i"] for i in await reader.asearch(("many",), limit=50)) == list(range(20))
    commits = await (await MemoryStore.get_or_create.aio(key=key)).log.aio(limit=100)
    assert 1 <= len(commits) - before < 20  # grouped: the calls that queued together saved together


def test_a_delete_from_a_handle_that_has_not_seen_the_item_deletes_it(durable_backend, key):
    """Found by review: the delete staged nothing (the item was not in that handle's state), reported success,
    and every reader still saw the item; the deleting handle saw it again after a refresh."""
    a, b = FlyteStore(key), FlyteStore(key)
    a.put(("x",), "seed", {"v": 0})
    b.refresh()
    a.put(("ns",), "z", {"v": 1})  # b has not seen it
    b.delete(("ns",), "z")
    assert FlyteStore(key).get(("ns",), "z") is None
    b.refresh()
    assert b.get(("ns",), "z") is None
    assert not [p for p in MemoryStore.open(key=key).list_paths() if p.endswith("z.json")]


def _values_in(backend, key: str, folder: str) -> dict[str, object]:
    return {p: v for p, v in files_in_storage(backend, key).items() if p.startswith(f"langgraph/{folder}/")}


async def test_every_bad_namespace_is_our_invalid_namespace_and_langgraphs(durable_backend, key):
    """Found by review: the docs said a bad namespace raises `InvalidStoreInput`, but LangGraph's own checks
    (in `put`, `get`, ... before the batch) raised its plain `InvalidNamespaceError`. Both catch it now."""
    store = FlyteStore(key)
    await store.aput(("ok",), "k", {"v": 1})
    calls = [
        lambda: store.aput(("langgraph",), "k", {"v": 1}),  # LangGraph's root rule
        lambda: store.aput(("a.b",), "k", {"v": 1}),
        lambda: store.aput((), "k", {"v": 1}),
        lambda: store.aget(("a.b",), "k"),
        lambda: store.asearch(("a.b",)),
        lambda: store.adelete(("x", ""), "k"),
        lambda: store.alist_namespaces(prefix=("a.b",)),
        lambda: store.alist_namespaces(suffix=("a\x00",)),
        lambda: asyncio.to_thread(store.put, ("a.b",), "k", {"v": 1}),
        lambda: asyncio.to_thread(store.get, ("a.b",), "k"),
        lambda: asyncio.to_thread(store.search, ("a.b",)),
        lambda: asyncio.to_thread(store.delete, ("a.b",), "k"),
        lambda: asyncio.to_thread(store.list_namespaces, prefix=("a.b",)),
    ]
    for call in calls:
        with pytest.raises(InvalidStoreInput) as err:
            await call()
        assert isinstance(err.value, InvalidNamespace) and isinstance(err.value, InvalidNamespaceError)
    with pytest.raises(InvalidNamespace) as err:
        await store.aput(("langgraph",), "k", {"v": 1})
    assert type(err.value.__cause__) is InvalidNamespaceError  # LangGraph's own refusal, kept as the cause
    assert set(files_in_storage(durable_backend, key)) == {path_of(("ok",), "k")}


async def test_a_cancelled_batch_lands_whole_or_not_at_all_and_logs_nothing(durable_backend, key, caplog):
    """Found by review: cancelling an `abatch` logged `InvalidStateError` from the loop's callback. Now a batch
    cancelled while it waits its turn is dropped, one whose save is in flight lands whole, and nothing is
    logged."""
    entered, release = threading.Event(), threading.Event()

    class Gated(FlyteStore):
        async def _commit(self, *args, **kwargs):
            entered.set()
            await asyncio.to_thread(release.wait, 30)
            await super()._commit(*args, **kwargs)

    caplog.set_level(logging.WARNING)
    store = Gated(key)
    first = asyncio.create_task(store.abatch([PutOp(("inflight",), f"k{j}", {"j": j}) for j in range(3)]))
    assert await asyncio.to_thread(entered.wait, 30)
    second = asyncio.create_task(store.abatch([PutOp(("queued",), f"k{j}", {"j": j}) for j in range(3)]))
    await asyncio.sleep(0.05)  # the second waits for the first's lock on the adapter's loop
    first.cancel()
    second.cancel()
    await asyncio.sleep(0.05)
    release.set()
    for task in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await task
    await store.aget(("inflight",), "k0")  # queued behind the save in flight: it has settled
    assert len(_values_in(durable_backend, key, "inflight")) == 3
    assert _values_in(durable_backend, key, "queued") == {}
    assert sorted(i.key for i in await (await fresh(key)).asearch(("inflight",))) == ["k0", "k1", "k2"]

    for i, delay in enumerate([0, 0.001, 0.003, 0.01, 0.03, 0.1]):  # cancelled anywhere: all or nothing
        task = asyncio.create_task(store.abatch([PutOp(("swept", str(i)), f"k{j}", {"j": j}) for j in range(4)]))
        await asyncio.sleep(delay)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await store.aget(("inflight",), "k0")
    swept = _values_in(durable_backend, key, "swept")
    assert all(sum(p.startswith(f"langgraph/swept/{i}/") for p in swept) in (0, 4) for i in range(6))
    await store.aput(("after",), "k", {"v": 1})  # the store works on after cancellations
    assert (await (await fresh(key)).aget(("after",), "k")).value == {"v": 1}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_values_keep_their_key_order(durable_backend, key):
    """Found by review: values came back with sorted keys; LangGraph's `InMemoryStore` returns them as put."""
    value = {"z": 1, "a": {"y": 2, "b": [{"d": 1, "c": 2}]}, "m": "x"}
    store = FlyteStore(key, ttl={"refresh_on_read": True})
    await store.aput(("o",), "k", value, ttl=30)
    same = json.dumps(value)
    assert json.dumps((await store.aget(("o",), "k")).value) == same  # also rewrites it (ttl refresh)
    reader = await fresh(key)
    assert json.dumps((await reader.aget(("o",), "k")).value) == same
    assert json.dumps((await reader.asearch(("o",)))[0].value) == same
    assert json.dumps((await reader.asearch(("o",), query="x"))[0].value) == same
    assert json.dumps(files_in_storage(durable_backend, key)[path_of(("o",), "k")]) == same

    # an item written before (`write_json`, keys sorted) reads as it is stored, and an update keeps the new order
    handle = await MemoryStore.get_or_create.aio(key=key)
    now = datetime.now(UTC)
    labels = labels_of(("o",), "old", now, now, None)
    await handle.write_json.aio(path_of(("o",), "old"), {"b": 1, "a": 2}, metadata=labels)
    await handle.save.aio()
    assert list((await (await fresh(key)).aget(("o",), "old")).value) == ["a", "b"]
    await store.arefresh()
    await store.aput(("o",), "old", {"b": 1, "a": 2})
    assert list((await (await fresh(key)).aget(("o",), "old")).value) == ["b", "a"]


async def test_a_lone_surrogate_is_refused_before_anything_lands(durable_backend, key, caplog):
    """Found by review: a value holding a lone surrogate was stored while its commit skipped the search index
    (a logged warning). Now it is refused up front, as the store refuses invalid Unicode everywhere; a valid
    character beyond the BMP is stored and found."""
    caplog.set_level(logging.WARNING)
    store = FlyteStore(key)
    await store.aput(("ok",), "k", {"v": 1})
    bad = [
        PutOp(("ok",), "k2", {"text": "a \ud800 b"}),
        PutOp(("ok",), "k2", {"\udc80": 1}),
        PutOp(("ok",), "k2", {"n": ["a", {"x": "b\udfff"}]}),
        PutOp(("ok",), "\ud800", {"v": 1}),
        PutOp(("\ud800",), "k2", {"v": 1}),
    ]
    for op in bad:
        with pytest.raises(InvalidStoreInput, match="Unicode"):
            await store.abatch([PutOp(("ok",), "k3", {"v": 3}), op])
    with pytest.raises(InvalidStoreInput, match="Unicode"):
        await store.aget(("ok",), "\ud800")
    assert set(files_in_storage(durable_backend, key)) == {path_of(("ok",), "k")}
    await store.aput(("ok",), "emoji", {"text": "rocket \U0001f680 launch"})
    hits = await (await fresh(key)).asearch(("ok",), query="launch")
    assert hits[0].key == "emoji" and hits[0].value == {"text": "rocket \U0001f680 launch"}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_store_made_in_a_task_writes_there_when_used_from_any_thread(durable_backend, key):
    """Found by review: the location was resolved at first use, so a store made where the task's storage is
    bound but first used from a plain thread (no Flyte context) wrote to the default root."""
    store = FlyteStore(key)  # made here, where the backend's raw-data path is bound; not used yet
    errors: list[BaseException] = []

    def work() -> None:
        try:
            store.put(("t",), "k", {"v": 1})
            store.put(("t",), "k2", {"v": 2})
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
    assert set(files_in_storage(durable_backend, key)) == {path_of(("t",), "k"), path_of(("t",), "k2")}
    assert FlyteStore(key).get(("t",), "k2").value == {"v": 2}

    # made where no storage is bound (a module's top level): its first use decides, as before
    later = contextvars.Context().run(FlyteStore, key)
    later.put(("t",), "k3", {"v": 3})
    assert path_of(("t",), "k3") in files_in_storage(durable_backend, key)


def test_one_adapter_loop_module_serves_langgraph_and_upsonic(caplog):
    """Found by review: LangGraph's and Upsonic's loop threads were two copies of one module. One
    `adapters._loop.AdapterLoop` now: each adapter its own thread, the caller's context travels, a sync call
    from the loop itself is refused, and cancelling a submitted call cancels it on the loop, quietly."""
    from flyteplugins_memory.adapters._loop import AdapterLoop
    from flyteplugins_memory.adapters.upsonic.sync_loop import LOOP as UPSONIC

    caplog.set_level(logging.WARNING)
    assert isinstance(LOOP, AdapterLoop) and isinstance(UPSONIC, AdapterLoop) and LOOP is not UPSONIC
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("the caller's")

    async def read() -> tuple[str, str]:
        return var.get(), threading.current_thread().name

    assert UPSONIC.run(read()) == ("the caller's", "flyteplugins-memory-upsonic")
    assert LOOP.run(read()) == ("the caller's", "flyteplugins-memory-langgraph")

    async def nested() -> object:
        return UPSONIC.run(read())

    with pytest.raises(BlockingCallOnLoop):
        UPSONIC.run(nested())

    started, stopped = threading.Event(), threading.Event()

    async def waits() -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            stopped.set()

    future = LOOP.submit(waits())
    assert started.wait(10)
    future.cancel()
    assert stopped.wait(10) and future.cancelled()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
