"""The Orbiter adapter (`flyteplugins_memory.adapters.orbiter`): Orbiter's memory protocol on local disk and
moto S3, checked through fresh handles and the backend's own object listing: round trips of every subtype,
filters, ranking, scoping, clear, the status machine, bad input, and processes adding to one key at once."""

from __future__ import annotations

import asyncio
import json
import sys
import types
import urllib.parse
from typing import Any

import pydantic
import pytest

from flyteplugins_memory import (
    ConcurrencyError,
    InvalidArgument,
    MemoryStore,
    ReadOnlyPath,
    StorageError,
    StoreDeleted,
    UnsavedChanges,
)
from flyteplugins_memory.adapters.orbiter import (
    AIMemory,
    HumanMemory,
    InvalidMemoryInput,
    InvalidStatusTransition,
    ItemNotFound,
    MemoryError,
    MemoryItem,
    MemoryMetadata,
    MemoryStatus,
    OrbiterMemoryStore,
    SystemMemory,
    ToolMemory,
)
from flyteplugins_memory.adapters.orbiter.layout import path_of
from flyteplugins_memory.adapters.orbiter.types import item_classes
from helpers import RaceBefore, caller_with_a_conflicting_edit, race_children, scan
from repo import SUPPORT

TESTS = str(SUPPORT)
ALICE = MemoryMetadata(user_id="alice", session_id="s1")
BOB = MemoryMetadata(user_id="bob", session_id="s1")


def items_in_storage(backend, key: str) -> dict[str, dict]:
    """The adapter's objects as the backend itself lists them, decoded."""
    return {n: json.loads(d) for n, d in backend.objects(key).items() if n.startswith("orbiter/")}


def claims_in_storage(backend, key: str) -> dict[str, dict]:
    """The ids' claims (``orbiter-ids/``) that a commit holds (their sidecar is written after the commit
    point; a conflicting save leaves the new files it created in place, unreferenced and without one)."""
    objects = backend.objects(key)
    return {
        n: json.loads(d)
        for n, d in objects.items()
        if n.startswith("orbiter-ids/") and f"meta/{urllib.parse.quote(n, safe='')}.json" in objects
    }


async def fresh(key: str) -> OrbiterMemoryStore:
    return OrbiterMemoryStore(await MemoryStore.get_or_create.aio(key=key))


async def test_every_subtype_round_trips_through_storage(durable_backend, key):
    memory = OrbiterMemoryStore(key)
    items = [
        SystemMemory(content="You are a helpful bot.", metadata=ALICE),
        HumanMemory(content="What is Python?", metadata=ALICE),
        AIMemory(content="A language.", metadata=ALICE, tool_calls=[{"id": "c1", "name": "search", "n": 2}]),
        ToolMemory(content="no results", metadata=ALICE, tool_call_id="c1", tool_name="search", is_error=True),
        HumanMemory(content="draft", status=MemoryStatus.DRAFT, metadata=MemoryMetadata(extra={"k": [1, "x"]})),
    ]
    for item in items:
        await memory.add(item)

    reader = await fresh(key)
    for item in items:
        back = await reader.get(item.id)
        assert type(back) is type(item) and back == item
    stored = items_in_storage(durable_backend, key)
    assert set(stored) == {path_of(i.model_dump(mode="json")) for i in items}  # one object per item
    assert stored[f"orbiter/alice/s1/_/_/{items[3].id}.json"]["tool_name"] == "search"
    assert await reader.get("0123456789abcdef") is None


async def test_search_filters_limit_and_order(durable_backend, key):
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="h1", content="I like green tea", metadata=ALICE, created_at="2026-01-01"))
    await memory.add(AIMemory(id="a1", content="green tea is nice, tea tea", metadata=ALICE, created_at="2026-01-02"))
    await memory.add(HumanMemory(id="h2", content="coffee please", metadata=ALICE, created_at="2026-01-03"))
    await memory.add(HumanMemory(id="d1", content="tea?", status="draft", metadata=ALICE, created_at="2026-01-04"))
    await memory.add(
        HumanMemory(id="x1", content="tea", metadata=MemoryMetadata(user_id="alice", extra={"topic": "x"}))
    )

    reader = await fresh(key)
    ids = lambda found: [i.id for i in found]  # noqa: E731
    assert ids(await reader.search(metadata=ALICE)) == ["d1", "h2", "a1", "h1"]  # newest first
    assert ids(await reader.search(metadata=ALICE, limit=2)) == ["d1", "h2"]
    assert ids(await reader.search(metadata=ALICE, memory_type="ai")) == ["a1"]
    assert ids(await reader.search(metadata=ALICE, status=MemoryStatus.DRAFT)) == ["d1"]
    assert ids(await reader.search(query="tea", metadata=ALICE)) == ["d1", "a1", "h1"]  # newest first
    assert ids(await reader.search(query="tea", metadata=ALICE, limit=1)) == ["d1"]
    assert ids(await reader.search(query="coffee")) == ["h2"]
    assert ids(await reader.search(metadata=MemoryMetadata(extra={"topic": "x"}))) == ["x1"]
    assert ids(await reader.search(query="tea", metadata=MemoryMetadata(extra={"topic": "x"}))) == ["x1"]
    assert await reader.search(query="zeppelin") == []


async def test_no_query_search_orders_by_time_not_by_text(durable_backend, key):
    """created_at was compared as text: an offset other than UTC, a "Z" or a naive stamp sorted wrongly."""
    memory = OrbiterMemoryStore(key)
    stamps = {
        "a": "2026-01-01T10:00:00+05:00",  # 05:00 UTC: first by text, fourth by time
        "b": "2026-01-01T06:00:00+00:00",
        "c": "2026-01-01T07:00:00Z",
        "d": "2026-01-01T05:30:00",  # no offset: UTC
        "e": "not a time",  # after every real time, though first by text
    }
    for item_id, stamp in stamps.items():
        await memory.add(HumanMemory(id=item_id, content=item_id, metadata=ALICE, created_at=stamp))
    assert sorted(stamps, key=stamps.__getitem__, reverse=True) == ["e", "a", "c", "b", "d"]  # text order

    reader = await fresh(key)
    assert [i.id for i in await reader.search(metadata=ALICE)] == ["c", "b", "d", "a", "e"]
    assert [i.id for i in await reader.search(metadata=ALICE, limit=2)] == ["c", "b"]
    stored = {d["id"]: d["created_at"] for d in items_in_storage(durable_backend, key).values()}
    assert stored == stamps  # kept as given: only the order reads them as times


async def test_users_and_sessions_never_mix(durable_backend, key):
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="a", content="alice secret", metadata=ALICE))
    await memory.add(HumanMemory(id="b", content="bob secret", metadata=BOB))
    alice_s2 = MemoryMetadata(user_id="alice", session_id="s2")
    await memory.add(HumanMemory(id="a2", content="alice other", metadata=alice_s2))
    odd = MemoryMetadata(user_id="carol@example.com/../x", session_id="s1")  # not a path segment: hashed
    await memory.add(HumanMemory(id="c", content="carol secret", metadata=odd))

    reader = await fresh(key)
    assert [i.id for i in await reader.search(query="secret", metadata=ALICE)] == ["a"]
    assert [i.id for i in await reader.search(metadata=BOB)] == ["b"]
    assert {i.id for i in await reader.search(metadata=MemoryMetadata(user_id="alice"))} == {"a", "a2"}
    assert {i.id for i in await reader.search(metadata=MemoryMetadata(session_id="s1"))} == {"a", "b", "c"}
    assert [i.id for i in await reader.search(metadata=odd)] == ["c"]
    assert (await reader.get("c")).metadata == odd
    names = set(items_in_storage(durable_backend, key))
    assert {n.split("/")[1] for n in names} == {"alice", "bob", next(n.split("/")[1] for n in names if "~" in n)}
    assert all(".." not in n and "@" not in n for n in names)


async def test_clear_with_and_without_metadata(durable_backend, key):
    memory = OrbiterMemoryStore(key)
    for i, meta in enumerate([ALICE, ALICE, BOB, MemoryMetadata()]):
        await memory.add(HumanMemory(id=f"m{i}", content=f"note {i}", metadata=meta))
    store = MemoryStore.get_or_create(key=key)
    store.write_text("other/keep.md", "not the adapter's")
    store.save()

    assert await (await fresh(key)).clear(metadata=ALICE) == 2
    assert {n.split("/")[-1] for n in items_in_storage(durable_backend, key)} == {"m2.json", "m3.json"}
    assert await (await fresh(key)).clear(metadata=ALICE) == 0
    assert await memory.clear() == 2  # a stale handle refreshes first: counts what is really there
    assert items_in_storage(durable_backend, key) == {}
    assert await (await fresh(key)).search() == []
    assert MemoryStore.get_or_create(key=key).read_text("other/keep.md") == "not the adapter's"
    assert claims_in_storage(durable_backend, key) == {}  # cleared with their items


async def test_status_machine_is_enforced_and_persisted(durable_backend, key):
    memory = OrbiterMemoryStore(key)
    item = HumanMemory(content="maybe", status=MemoryStatus.DRAFT, metadata=ALICE)
    await memory.add(item)

    other = await fresh(key)
    accepted = await other.transition(item.id, MemoryStatus.ACCEPTED)
    assert accepted.status == MemoryStatus.ACCEPTED and accepted.updated_at >= item.updated_at
    with pytest.raises(InvalidStatusTransition):
        await memory.transition(item.id, "draft")  # the stale handle checks the committed status
    assert (await (await fresh(key)).get(item.id)).status == "accepted"
    await memory.transition(item.id, "discard")
    with pytest.raises(InvalidStatusTransition) as err:
        await memory.transition(item.id, MemoryStatus.ACCEPTED)
    assert isinstance(err.value, MemoryError)
    stored = items_in_storage(durable_backend, key)[path_of(item.model_dump(mode="json"))]
    assert stored["status"] == "discard"
    assert [i.id for i in await (await fresh(key)).search(status=MemoryStatus.DISCARD)] == [item.id]
    with pytest.raises(ItemNotFound):
        await memory.transition("nosuchid", "accepted")
    with pytest.raises(InvalidMemoryInput):
        await memory.transition(item.id, "archived")


def test_item_transition_and_metadata_rules():
    item = HumanMemory(content="x", status=MemoryStatus.DRAFT)
    item.transition(MemoryStatus.DISCARD)
    with pytest.raises(MemoryError):
        item.transition(MemoryStatus.ACCEPTED)
    with pytest.raises(pydantic.ValidationError):  # frozen
        ALICE.user_id = "mallory"  # type: ignore[misc]
    assert MemoryItem(content="x", memory_type="custom").status == "accepted"
    assert len({HumanMemory(content="x").id for _ in range(3)}) == 3


class ForeignHuman(pydantic.BaseModel):
    """An item of Orbiter's shape from another class hierarchy (as Orbiter's own classes would be)."""

    id: str
    content: str
    memory_type: str = "human"
    status: Any = "accepted"
    metadata: Any = {}
    created_at: str = "2026-01-01T00:00:00+00:00"
    updated_at: str = "2026-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    "bad",
    [
        HumanMemory(id="../etc", content="x"),
        HumanMemory(id="a/b", content="x"),
        HumanMemory(id="", content="x"),
        HumanMemory(content="x", metadata=MemoryMetadata(user_id="")),
        HumanMemory(content="x", metadata=MemoryMetadata(extra={"f": object()})),
        HumanMemory.model_construct(content=3, memory_type="human", id="n", status="accepted"),
        HumanMemory.model_construct(content="x", memory_type="human", id="n", status="archived"),
        HumanMemory,
        MemoryItem(content="x", memory_type="t" * 65),
        MemoryItem(content="x", memory_type="\ud800"),  # a lone surrogate: no UTF-8, so no label
        HumanMemory(content="x", metadata=MemoryMetadata(user_id="\ud800")),  # nor a path segment
        ForeignHuman(id="f", content="x", metadata="alice"),
        ForeignHuman(id="f", content="x", status=["accepted"]),
        {"content": "a dict"},
        "text",
    ],
)
async def test_bad_input_is_a_typed_error_and_writes_nothing(local_backend, key, bad):
    memory = OrbiterMemoryStore(key)
    with pytest.raises(InvalidMemoryInput):
        await memory.add(bad)
    assert items_in_storage(local_backend, key) == {}


async def test_bad_arguments_are_typed_errors(local_backend, key):
    memory = OrbiterMemoryStore(key)
    for call in (
        memory.get("../x"),
        memory.get(3),  # type: ignore[arg-type]
        memory.search(limit=0),
        memory.search(limit=True),  # type: ignore[arg-type]
        memory.search(query=None),  # type: ignore[arg-type]
        memory.search(status="archived"),
        memory.search(memory_type=""),
        memory.search(metadata=MemoryMetadata(user_id="")),
        memory.search(metadata=MemoryMetadata(user_id="\ud800")),  # was UnicodeEncodeError
        memory.search(memory_type="\ud800"),
    ):
        with pytest.raises(InvalidMemoryInput):
            await call
    with pytest.raises(InvalidMemoryInput):
        OrbiterMemoryStore(3)  # type: ignore[arg-type]


HUGE = "\N{GRINNING FACE}" * 256  # 256 characters, 12 bytes each in the labels' JSON
HUGE_SCOPES = MemoryMetadata(user_id=HUGE, session_id=HUGE, agent_id=HUGE, task_id=HUGE)


async def test_inputs_over_the_stores_limits_are_the_adapters_typed_error(durable_backend, key):
    """Input over the store's limits raised the store's InvalidArgument, not InvalidMemoryInput."""
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="t", content="tea", metadata=ALICE))
    before = durable_backend.stored(key)
    refused = {
        "memory_type": memory.search(memory_type="t" * 100_000),
        "search scopes": memory.search(metadata=HUGE_SCOPES),
        "clear scopes": memory.clear(metadata=HUGE_SCOPES),
        "add scopes": memory.add(HumanMemory(id="u", content="x", metadata=HUGE_SCOPES)),
    }
    for what, call in refused.items():
        with pytest.raises(InvalidMemoryInput) as err:
            await call
        assert isinstance(err.value.__cause__, InvalidArgument), what  # the store's reason, kept
    assert durable_backend.stored(key) == before  # nothing written, nothing committed
    assert [i.id for i in await (await fresh(key)).search(query="tea")] == ["t"]
    assert await memory.search(query="tea " * 25_000) == []  # a substring match has no length limit


async def test_autosave_off_keeps_adds_until_flush(local_backend, key):
    memory = OrbiterMemoryStore(await MemoryStore.get_or_create.aio(key=key), autosave=False)
    await memory.add(HumanMemory(id="one", content="later"))
    assert await memory.get("one") is not None and items_in_storage(local_backend, key) == {}
    await memory.flush()
    assert (await (await fresh(key)).get("one")).content == "later"


async def test_re_adding_an_id_under_another_scope_moves_it(local_backend, key):
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="m", content="v1", metadata=ALICE))
    await memory.add(HumanMemory(id="m", content="v2", metadata=BOB))
    assert list(items_in_storage(local_backend, key)) == ["orbiter/bob/s1/_/_/m.json"]
    assert (await (await fresh(key)).get("m")).content == "v2"


async def test_racing_adds_of_one_id_under_two_users_leave_one_item(durable_backend, key, monkeypatch):
    """Two handles adding one id under different users wrote two paths, which the journal merged into two
    items; a bare get then returned either user's. The claim makes the second add conflict and re-apply:
    the id moves to its scope, as a later add of it would, and one item remains."""
    alice_side, bob_side = await fresh(key), await fresh(key)
    race = lambda: alice_side.add(HumanMemory(id="x", content="alice's", metadata=ALICE))  # noqa: E731
    monkeypatch.setattr(await bob_side.handle(), "save", RaceBefore(await bob_side.handle(), race))
    await bob_side.add(HumanMemory(id="x", content="bob's", metadata=BOB))

    assert list(items_in_storage(durable_backend, key)) == ["orbiter/bob/s1/_/_/x.json"]
    assert claims_in_storage(durable_backend, key) == {
        "orbiter-ids/x.json": {"id": "x", "path": "orbiter/bob/s1/_/_/x.json"}
    }
    reader = await fresh(key)
    assert (await reader.get("x")).content == "bob's"
    assert await reader.search(metadata=ALICE) == []  # alice's scope holds nothing of bob's, nor a stale copy
    assert [i.content for i in await reader.search(metadata=BOB)] == ["bob's"]


async def test_a_conflicting_add_is_reapplied_and_a_stale_get_refreshes(local_backend, key):
    first, second = await fresh(key), await fresh(key)  # both loaded before either writes
    await first.add(HumanMemory(id="same", content="from first"))
    assert (await second.get("same")).content == "from first"  # unknown to its handle: it refreshed
    third = await fresh(key)
    await first.add(HumanMemory(id="same", content="first again"))
    await third.add(HumanMemory(id="same", content="from third"))  # conflicts, refreshes, re-applies
    assert (await (await fresh(key)).get("same")).content == "from third"

    lazy_a = OrbiterMemoryStore(await MemoryStore.get_or_create.aio(key=key), autosave=False)
    lazy_b = OrbiterMemoryStore(await MemoryStore.get_or_create.aio(key=key), autosave=False)
    await lazy_a.add(HumanMemory(id="same", content="lazy a"))
    await lazy_b.add(HumanMemory(id="same", content="lazy b"))
    await lazy_a.flush()
    with pytest.raises(ConcurrencyError):
        await lazy_b.flush()  # never silently dropped
    assert (await (await fresh(key)).get("same")).content == "lazy a"


async def test_any_object_of_the_shape_is_accepted_and_orbiter_classes_are_used(local_backend, key, monkeypatch):
    memory = OrbiterMemoryStore(key)
    await memory.add(ForeignHuman(id="f1", content="duck typed", metadata={"user_id": "alice"}))
    back = await memory.get("f1")
    assert type(back) is HumanMemory and back.metadata.user_id == "alice" and back.content == "duck typed"

    fake = types.ModuleType("orbiter.memory.base")
    for name, cls in [("MemoryItem", MemoryItem), ("SystemMemory", SystemMemory), ("AIMemory", AIMemory)]:
        setattr(fake, name, cls)
    fake.HumanMemory = type("OrbiterHuman", (HumanMemory,), {})  # type: ignore[attr-defined]
    fake.ToolMemory = ToolMemory  # type: ignore[attr-defined]
    for name in ("orbiter", "orbiter.memory"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "orbiter.memory.base", fake)
    item_classes.cache_clear()
    try:
        assert type(await memory.get("f1")).__name__ == "OrbiterHuman"
    finally:
        item_classes.cache_clear()


CHILD = """
import asyncio, json, os, sys, time
sys.path.insert(0, {tests!r})
from workers import setup
config = json.loads(sys.argv[1])
setup(config)
from flyteplugins_memory.adapters.orbiter import HumanMemory, MemoryMetadata, OrbiterMemoryStore

async def main():
    memory = OrbiterMemoryStore(config["key"])
    meta = MemoryMetadata(user_id=f"u{{config['worker']}}", session_id="s")
    for i in range(config["rounds"]):
        await memory.add(HumanMemory(id=f"w{{config['worker']}}-{{i}}", content=f"item {{i}}", metadata=meta))

while not os.path.exists(config["go"]):
    time.sleep(0.01)
asyncio.run(main())
"""


def test_two_processes_adding_to_one_key_lose_nothing(durable_backend_and_endpoint, key, tmp_path):
    backend, endpoint = durable_backend_and_endpoint
    MemoryStore.create(key=key)
    go = tmp_path / "go"
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "rounds": 4, "go": str(go)}
    code = CHILD.format(tests=TESTS)
    race_children(code, config, timeout=120)

    expected = {f"w{w}-{i}" for w in range(2) for i in range(4)}
    stored = items_in_storage(backend, key)
    assert {d["id"] for d in stored.values()} == expected
    reader = OrbiterMemoryStore(key)
    assert {i.id for i in asyncio_run(reader.search(limit=100))} == expected
    assert [i.id for i in asyncio_run(reader.search(metadata=MemoryMetadata(user_id="u1"), limit=100))] == [
        f"w1-{i}" for i in (3, 2, 1, 0)
    ]


def test_two_processes_adding_the_same_ids_under_their_own_users(durable_backend_and_endpoint, key, tmp_path):
    """Each id ends up as one item, in one user's scope; a bare get returns that item and a user's search
    never returns the other user's."""
    backend, endpoint = durable_backend_and_endpoint
    MemoryStore.create(key=key)
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "rounds": 4, "go": str(tmp_path / "go")}
    race_children(CHILD.replace("w{{config['worker']}}-{{i}}", "same-{{i}}").format(tests=TESTS), config)

    stored = items_in_storage(backend, key)
    ids = [d["id"] for d in stored.values()]
    assert sorted(ids) == [f"same-{i}" for i in range(4)]  # one item per id
    claims = claims_in_storage(backend, key)
    assert {c["path"] for c in claims.values()} == set(stored) and len(claims) == 4
    reader = OrbiterMemoryStore(key)
    for data in stored.values():
        assert asyncio_run(reader.get(data["id"])).metadata.user_id == data["metadata"]["user_id"]
    by_user = [{i.id for i in asyncio_run(reader.search(metadata=MemoryMetadata(user_id=f"u{w}")))} for w in range(2)]
    assert not by_user[0] & by_user[1] and by_user[0] | by_user[1] == set(ids)


def asyncio_run(coro):
    import asyncio

    return asyncio.run(coro)


async def test_an_add_the_store_refuses_leaves_the_existing_item(local_backend, key):
    """Re-adding an id under scope ids whose labels together pass the store's 4 KiB of metadata used to
    queue the old copy's delete before the write failed: the item was gone after the next save."""
    memory = await fresh(key)
    await memory.add(HumanMemory(id="x", content="keep me", metadata=MemoryMetadata(user_id="alice")))
    huge = "\N{GRINNING FACE}" * 256
    scopes = MemoryMetadata(user_id=huge, session_id=huge, agent_id=huge, task_id=huge)
    with pytest.raises(InvalidMemoryInput):
        await memory.add(HumanMemory(id="x", content="moved", metadata=scopes))
    await memory.add(HumanMemory(id="y", content="another", metadata=MemoryMetadata(user_id="bob")))
    kept = await (await fresh(key)).get("x")
    assert kept is not None and kept.content == "keep me" and kept.metadata.user_id == "alice"


async def test_gets_and_searches_interleaved_with_adds_on_one_adapter_lose_nothing(durable_backend, key):
    memory = await fresh(key)

    async def one(i: int) -> None:
        await memory.add(HumanMemory(id=f"h{i}", content=f"note {i}", metadata=ALICE))
        assert (await memory.get(f"h{i}")).content == f"note {i}"
        await memory.get("never-added")  # refreshes: never in the middle of another add's commit
        await memory.search(metadata=ALICE)

    await asyncio.gather(*(one(i) for i in range(8)))
    assert sorted(d["id"] for d in items_in_storage(durable_backend, key).values()) == sorted(f"h{i}" for i in range(8))


async def test_a_call_whose_save_fails_leaves_nothing_behind(local_backend, key, storage_faults):
    memory = await fresh(key)
    await memory.add(HumanMemory(id="m1", content="hello", status=MemoryStatus.DRAFT, metadata=ALICE))
    storage_faults.arm(lambda n, op, path: "permanent" if op == "write" else None)
    with pytest.raises(StorageError):
        await memory.transition("m1", "accepted")
    with pytest.raises(StorageError):
        await memory.add(HumanMemory(id="ghost", content="failed add", metadata=ALICE))
    storage_faults.clear()
    assert (await memory.get("m1")).status == "draft" and await memory.get("ghost") is None
    assert (await memory.transition("m1", "accepted")).status == "accepted"  # the retry is not refused
    await memory.add(HumanMemory(id="other", content="unrelated", metadata=ALICE))
    stored = {d["id"]: d["status"] for d in items_in_storage(local_backend, key).values()}
    assert stored == {"m1": "accepted", "other": "accepted"}


async def test_clear_counts_every_item_it_deleted_after_a_conflict(local_backend, key):
    writer, clearer = await fresh(key), await fresh(key)
    for i in range(3):
        await writer.add(HumanMemory(id=f"m{i}", content=f"c{i}", metadata=ALICE))
    await clearer.refresh()
    store = await clearer.handle()
    edit = HumanMemory(id="m0", content="edited meanwhile", metadata=ALICE)
    store.save = RaceBefore(store, lambda: writer.add(edit))  # pyright: ignore[reportAttributeAccessIssue]
    assert await clearer.clear(metadata=ALICE) == 3
    assert items_in_storage(local_backend, key) == {} and claims_in_storage(local_backend, key) == {}


async def test_a_filter_that_is_not_memory_metadata_is_refused(local_backend, key):
    memory = await fresh(key)
    await memory.add(HumanMemory(id="a", content="alice's", metadata=ALICE))
    await memory.add(HumanMemory(id="b", content="bob's", metadata=BOB))
    for call in (memory.clear, memory.search):
        with pytest.raises(InvalidMemoryInput):  # a dict would read as "no scope": every user's items
            await call(metadata={"user_id": "alice"})
    assert len(items_in_storage(local_backend, key)) == 2


async def test_search_query_is_a_case_insensitive_substring_of_the_content(durable_backend, key):
    """As Orbiter's ShortTermMemory (``query.lower() in content.lower()``) and its SQLite backend (``content
    LIKE %query%``): a substring of the content, any case; never a word of another field, never a stem."""
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="p1", content="I keep Pythons at home", metadata=ALICE, created_at="2026-01-01"))
    await memory.add(AIMemory(id="p2", content="python 3.12 is out", metadata=ALICE, created_at="2026-01-02"))
    await memory.add(HumanMemory(id="p3", content="50% off_sale", metadata=ALICE, created_at="2026-01-03"))
    await memory.add(HumanMemory(id="h9", content="no snakes here", metadata=BOB, created_at="2026-01-04"))

    reader = await fresh(key)
    ids = lambda found: [i.id for i in found]  # noqa: E731
    assert ids(await reader.search(query="python")) == ["p2", "p1"]  # "Pythons" holds "python"; newest first
    assert ids(await reader.search(query="PYTHON")) == ["p2", "p1"]
    assert ids(await reader.search(query="pythons")) == ["p1"]  # "python 3.12" does not hold "pythons"
    assert ids(await reader.search(query="thon 3")) == ["p2"]  # a substring, spaces and all
    assert ids(await reader.search(query="human")) == []  # a field's value, not the content
    assert ids(await reader.search(query="50%")) == ["p3"] and ids(await reader.search(query="%")) == ["p3"]
    assert ids(await reader.search(query="f_s")) == ["p3"] and ids(await reader.search(query="o_f")) == []
    assert ids(await reader.search(query="snake", metadata=ALICE)) == []  # filters still hold
    assert ids(await reader.search(query="snake")) == ["h9"]
    assert ids(await reader.search(query="python", memory_type="ai")) == ["p2"]
    stored = {d["id"]: d["content"] for d in items_in_storage(durable_backend, key).values()}
    assert stored["p1"] == "I keep Pythons at home"  # kept as given


@pytest.mark.parametrize(
    ("stored", "forged"),
    [("discard", "accepted"), ("discard", "draft"), ("accepted", "draft")],
)
async def test_a_forged_add_never_moves_a_status_backwards(durable_backend, key, stored, forged):
    """An `add` of a stored id under a status the lifecycle forbids is refused as `transition` refuses it
    (Orbiter's MemoryError), checked against the committed status, and nothing is stored."""
    memory = OrbiterMemoryStore(key)
    item = HumanMemory(id="rev1", content="reviewed", status=stored, metadata=ALICE)
    await memory.add(item)
    before = items_in_storage(durable_backend, key)
    commits = len(MemoryStore.open(key=key).log(limit=100))

    forger = await fresh(key)
    with pytest.raises(InvalidStatusTransition) as err:
        await forger.add(item.model_copy(update={"status": forged, "content": "forged"}))
    assert isinstance(err.value, MemoryError)
    with pytest.raises(InvalidStatusTransition):  # under another scope too (an add would move it)
        await forger.add(item.model_copy(update={"status": forged, "metadata": BOB}))
    assert items_in_storage(durable_backend, key) == before
    assert len(MemoryStore.open(key=key).log(limit=100)) == commits
    assert (await (await fresh(key)).get("rev1")).status == stored


async def test_an_add_may_follow_the_lifecycle_and_a_stale_forger_is_refused(durable_backend, key):
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="r", content="v1", status="draft", metadata=ALICE))
    stale = await fresh(key)
    await stale.get("r")  # the stale handle has seen the draft
    await memory.add(HumanMemory(id="r", content="v2", status="draft", metadata=ALICE))  # same status: replaced
    await memory.add(HumanMemory(id="r", content="v3", status="accepted", metadata=ALICE))  # draft -> accepted
    await memory.transition("r", "discard")
    with pytest.raises(InvalidStatusTransition):  # its draft is stale: the committed discard decides
        await stale.add(HumanMemory(id="r", content="forged", status="accepted", metadata=ALICE))
    stored = [d for d in items_in_storage(durable_backend, key).values() if d["id"] == "r"]
    assert [(d["status"], d["content"]) for d in stored] == [("discard", "v3")]


async def test_empty_content_is_stored_as_orbiter_allows_it(durable_backend, key):
    """Orbiter's ``content: str`` takes "" (an AI turn that only calls tools) and blanks: stored, found back."""
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="blank", content="   ", metadata=BOB))
    await memory.add(AIMemory(id="call", content="", metadata=ALICE, created_at="2026-01-01"))
    assert (await (await fresh(key)).get("call")).content == ""
    assert [i.id for i in await (await fresh(key)).search(metadata=ALICE)] == ["call"]
    assert await memory.search(query="x") == []
    assert sorted(d["content"] for d in items_in_storage(durable_backend, key).values()) == ["", "   "]


# -- a handle the caller gave (docs/decisions/0138), refused adds, reads that refresh, purge --------------------


@pytest.mark.parametrize("read", ["get", "search", "refresh"])
async def test_a_read_over_a_callers_handle_keeps_its_unsaved_edit(durable_backend, key, read):
    """Found by review (d2.py): the adapter's refresh before a read dropped the caller's conflicting edit,
    and the caller's save then succeeded with nothing instead of raising ConcurrencyError."""
    caller = await caller_with_a_conflicting_edit(key)
    memory = OrbiterMemoryStore(caller)
    if read == "get":
        assert await memory.get("m1") is None
    elif read == "search":
        assert await memory.search() == []
    else:
        await memory.refresh()
    assert caller.has_unsaved_changes()
    assert await caller.read_text.aio("notes/plan.md") == "caller's unsaved v2"
    with pytest.raises(ConcurrencyError):
        await caller.save.aio()  # as without the adapter
    assert durable_backend.objects(key)["notes/plan.md"] == b"other's v2"


ORBITER_WRITES = {
    "add": lambda m: m.add(HumanMemory(id="m1", content="adapter's item")),
    "add, autosave off": lambda m: m.add(HumanMemory(id="m1", content="adapter's item")),
    "transition": lambda m: m.transition("d1", "accepted"),
    "clear": lambda m: m.clear(),
    "purge": lambda m: m.purge("d1"),
}


@pytest.mark.parametrize("write", list(ORBITER_WRITES))
async def test_a_write_over_a_callers_handle_with_unsaved_changes_is_refused(durable_backend, key, write):
    """Found by review (cd1.py): the adapter's save committed the caller's unrelated unsaved edit under the
    adapter's name. Now `UnsavedChanges` before anything is staged; the caller's change stays theirs."""
    await OrbiterMemoryStore(key).add(HumanMemory(id="d1", content="seed", status=MemoryStatus.DRAFT))
    caller = await MemoryStore.get_or_create.aio(key=key)
    await caller.write_text.aio("mine/draft.md", "half-done", actor="alice")
    objects, journal = durable_backend.objects(key), durable_backend.journal(key)
    memory = OrbiterMemoryStore(caller, autosave=write != "add, autosave off")

    with pytest.raises(UnsavedChanges, match=r"save\(\) or revert\(\) them first.*the key"):
        await ORBITER_WRITES[write](memory)
    await memory.flush()  # nothing of the adapter's is pending: the caller's change is not flushed either
    assert durable_backend.objects(key) == objects and durable_backend.journal(key) == journal
    assert caller.has_unsaved_changes() and await caller.read_text.aio("mine/draft.md") == "half-done"
    assert await caller.exists.aio("orbiter/_/_/_/_/d1.json") and not await caller.exists.aio("orbiter-ids/m1.json")
    await caller.save.aio(actor="alice")
    newest = (await (await MemoryStore.open.aio(key=key)).log.aio(limit=1))[0]
    assert newest.actor == "alice" and list(newest.wrote) == ["mine/draft.md"]


async def test_autosave_off_adds_of_its_own_are_not_the_callers_changes(durable_backend, key):
    """With adds of its own pending, the adapter keeps adding and flushes them (the limit: it cannot tell a
    caller's change made meanwhile apart, docs/decisions/0138)."""
    handle = await MemoryStore.get_or_create.aio(key=key)
    memory = OrbiterMemoryStore(handle, autosave=False)
    await memory.add(HumanMemory(id="a", content="first"))
    await memory.add(HumanMemory(id="b", content="second"))
    assert [i.id for i in await memory.search()] != []  # read as it is: the pending adds are not dropped
    await memory.flush()
    assert set(items_in_storage(durable_backend, key)) == {"orbiter/_/_/_/_/a.json", "orbiter/_/_/_/_/b.json"}
    await handle.write_text.aio("mine/draft.md", "caller's", actor="alice")  # after the flush: the caller's
    with pytest.raises(UnsavedChanges):
        await memory.add(HumanMemory(id="c", content="third"))


async def test_a_refused_add_with_autosave_off_leaves_nothing_for_flush(durable_backend, key):
    """Found by review (o3.py): an add refused on its id's claim (a read-only prefix) left the item staged,
    and the next flush committed it without its claim."""
    handle = await MemoryStore.create.aio(key=key, read_only_prefixes=("orbiter-ids/",))
    memory = OrbiterMemoryStore(handle, autosave=False)
    with pytest.raises(ReadOnlyPath):
        await memory.add(HumanMemory(id="m1", content="refused item"))
    assert not handle.has_unsaved_changes()
    await memory.flush()
    assert items_in_storage(durable_backend, key) == {} and await (await fresh(key)).get("m1") is None
    assert [c.kind for c in await (await MemoryStore.open.aio(key=key)).log.aio()] == ["create"]


async def test_a_refused_add_with_autosave_off_keeps_the_adds_before_it(local_backend, key):
    memory = OrbiterMemoryStore(await MemoryStore.get_or_create.aio(key=key), autosave=False)
    await memory.add(HumanMemory(id="keep", content="pending"))
    huge = "\N{GRINNING FACE}" * 256  # the labels pass the store's 4 KiB: the item write is refused
    scopes = MemoryMetadata(user_id=huge, session_id=huge, agent_id=huge, task_id=huge)
    with pytest.raises(InvalidMemoryInput):
        await memory.add(HumanMemory(id="x", content="refused", metadata=scopes))
    await memory.flush()
    assert list(items_in_storage(local_backend, key)) == ["orbiter/_/_/_/_/keep.json"]
    assert list(claims_in_storage(local_backend, key)) == ["orbiter-ids/keep.json"]


async def test_reads_see_a_purge_and_a_delete_store_by_another_handle(durable_backend, key):
    """Found by review (o4.py): a long-lived adapter kept serving an item purged by another handle, and the
    items of a deleted store, from its handle's old state."""
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="p1", content="my password is Zebra42"))
    await memory.add(HumanMemory(id="p2", content="harmless"))
    assert (await memory.get("p1")).content == "my password is Zebra42"
    security = await MemoryStore.get_or_create.aio(key=key)
    path = (await security.list_paths.aio("orbiter", where={"orbiter_id": "p1"}))[0]
    await security.purge.aio(path, actor="security", reason="leak")

    assert await memory.get("p1") is None
    assert await memory.search(query="zebra") == [] and [i.id for i in await memory.search()] == ["p2"]
    await MemoryStore.delete_store.aio(key=key, actor="admin", reason="offboarding")
    with pytest.raises(StoreDeleted):
        await memory.search()
    with pytest.raises(StoreDeleted):
        await memory.get("p2")


async def test_purge_forgets_an_item_and_its_claim(durable_backend, key):
    """Found by review (pc1.py): ``store.purge(path)`` of an item left its id's claim, which names the id
    and the item's path (user, session). `purge(item_id)` purges both; also a claim left over that way."""
    memory = OrbiterMemoryStore(key)
    carol = MemoryMetadata(user_id="carol", session_id="oncology")
    await memory.add(HumanMemory(id="carol-dx", content="secret-dx-4711", status=MemoryStatus.DRAFT, metadata=carol))
    await memory.transition("carol-dx", "accepted")  # two versions of the file, two of the claim
    dave = MemoryMetadata(user_id="dave", session_id="cardiology")
    await memory.add(HumanMemory(id="dave-dx", content="secret-dx-0815", metadata=dave))
    await memory.add(HumanMemory(id="keep", content="unrelated"))
    handle = await MemoryStore.get_or_create.aio(key=key)
    await handle.purge.aio("orbiter/dave/cardiology/_/_/dave-dx.json", actor="sec")  # the item alone
    assert "orbiter-ids/dave-dx.json" in durable_backend.objects(key)  # its claim stays (documented)

    purged = await memory.purge("carol-dx", actor="sec", reason="erase carol")
    assert [r.path for r in purged] == ["orbiter/carol/oncology/_/_/carol-dx.json", "orbiter-ids/carol-dx.json"]
    assert [r.path for r in await memory.purge("dave-dx", actor="sec")] == [
        "orbiter/dave/cardiology/_/_/dave-dx.json",
        "orbiter-ids/dave-dx.json",
    ]
    secrets = [b"secret-dx-4711", b"carol-dx", b"carol", b"oncology", b"secret-dx-0815", b"dave-dx", b"cardiology"]
    assert scan(durable_backend, key, secrets) == {}
    journal = durable_backend.journal(key)
    assert not [n for n, d in journal.items() if b"secret-dx-4711" in d or b"secret-dx-0815" in d]
    reader = await fresh(key)
    assert await reader.get("carol-dx") is None and await reader.get("dave-dx") is None
    assert [i.id for i in await reader.search()] == ["keep"]
    assert await memory.purge("carol-dx") == []  # nothing left to forget
    audit = [c for c in await (await MemoryStore.open.aio(key=key)).log.aio(limit=4) if c.reason == "erase carol"]
    assert len(audit) == 2 and {c.actor for c in audit} == {"sec"}


async def test_a_store_level_restore_is_beneath_the_lifecycle(local_backend, key):
    """Documented (o2.py): restoring an item file's older version through the store handle is beneath the
    adapter, so it can move a DISCARD item back to ACCEPTED; the adapter's own writes still hold the
    lifecycle from there."""
    memory = OrbiterMemoryStore(key)
    await memory.add(HumanMemory(id="d1", content="claim", status=MemoryStatus.DRAFT))
    await memory.transition("d1", "accepted")
    await memory.transition("d1", "discard")
    handle = await MemoryStore.get_or_create.aio(key=key)
    path = "orbiter/_/_/_/_/d1.json"
    accepted = next(v for v in await handle.history.aio(path) if "draft -> accepted" in (v.reason or ""))
    await handle.restore.aio(path, accepted.version_id, actor="x")
    await handle.save.aio()
    assert (await memory.get("d1")).status == MemoryStatus.ACCEPTED
    await memory.transition("d1", "discard")
    with pytest.raises(InvalidStatusTransition):
        await memory.add(HumanMemory(id="d1", content="claim", status=MemoryStatus.ACCEPTED))


async def test_clear_with_autosave_off_and_adds_pending_clears_what_others_saved(durable_backend, key):
    memory = OrbiterMemoryStore(await MemoryStore.get_or_create.aio(key=key), autosave=False)
    await memory.add(HumanMemory(id="mine", content="pending"))
    await OrbiterMemoryStore(key).add(HumanMemory(id="theirs", content="saved elsewhere"))
    assert await memory.clear() == 2  # the newest state, with the pending add
    assert items_in_storage(durable_backend, key) == {} and claims_in_storage(durable_backend, key) == {}


async def test_pending_adds_the_callers_own_save_committed_are_no_longer_the_adapters(durable_backend, key):
    handle = await MemoryStore.get_or_create.aio(key=key)
    await handle.write_text.aio("notes.md", "v1")
    await handle.save.aio()
    memory = OrbiterMemoryStore(handle, autosave=False)
    await memory.add(HumanMemory(id="a1", content="pending add"))
    await handle.save.aio(actor="alice")  # commits the adapter's pending add too
    await handle.write_text.aio("mine/draft.md", "alice's unsaved draft")
    commits = len(await handle.log.aio(limit=50))
    await memory.flush()  # nothing of its own is pending: it commits nothing (never alice's draft)
    assert len(await handle.log.aio(limit=50)) == commits
    with pytest.raises(UnsavedChanges):
        await memory.transition("a1", MemoryStatus.DISCARD)
    assert "mine/draft.md" not in durable_backend.objects(key) and handle.unsaved_paths() == ["mine/draft.md"]

    await handle.write_text.aio("notes.md", "alice's v2")  # conflicts with another task's commit
    other = await MemoryStore.get_or_create.aio(key=key)
    await other.write_text.aio("notes.md", "other's v2")
    await other.save.aio()
    await memory.refresh()  # leaves alice's changes alone
    assert await handle.read_text.aio("notes.md") == "alice's v2"
    with pytest.raises(ConcurrencyError):
        await handle.save.aio(actor="alice")
    assert durable_backend.objects(key)["notes.md"] == b"other's v2"
