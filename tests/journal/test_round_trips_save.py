"""Sequential round trips ("waves") and requests of saves, counted by `Faults.measure` (counts, never times), on
local disk and moto S3: a save is its content, then its commit record, then the projection with the head
(docs/decisions/0144); a bulk first save fans out twice (content, sidecars) plus the commit and a
checkpoint; the old bytes of an in-place file are copied where they lie on local disk (0143) and read, then
written, on object storage (0160); bulk calls back off when the backend throttles (0145).
"""

from __future__ import annotations

import asyncio

import pytest

from flyteplugins_memory import MemoryStore, RetryPolicy, set_retry_policy
from flyteplugins_memory._rules.layout import HEAD_NAME
from flyteplugins_memory.storage import _adaptive
from flyteplugins_memory.storage._adaptive import AdaptiveLimit

#: Files of the bulk save (1,000 in the benchmark; the counts do not depend on it, only the time).
FILES = 150


def _text(i: int) -> str:
    return f"content {i} " * 80


def _names(calls) -> list[str]:
    return [call.path.rsplit("/", 1)[-1] for call in calls]


def test_saves_are_their_dependency_chain(durable_backend, key, round_trips):
    store = MemoryStore.create(key=key)
    for i in range(FILES):
        store.write_text(f"files/{i:05d}.txt", _text(i))
    with round_trips.measure() as bulk:
        store.save()
    # content and search segment | commit | sidecars, checkpoint parts, audit | checkpoint, audit log |
    # the purge probe | the head, gc()'s look at the log
    assert bulk.waves <= 6, bulk.describe()
    assert bulk.requests <= 2 * FILES + 12, bulk.requests
    assert len(bulk.in_wave(1)) >= FILES and len(bulk.in_wave(3)) >= FILES  # each fan-out in one round trip

    old = durable_backend.upstream_view(key)["files/00007.txt"]
    fresh = MemoryStore.get_or_create(key=key)  # has not read the file: its save fetches the old bytes
    fresh.write_text("files/00007.txt", "changed")
    with round_trips.measure() as one:
        fresh.save()
    # local disk copies the old bytes where they lie, in one call (0143); object storage reads them beside
    # the blob and the segment, then writes their blob before the commit (0160)
    copy = 1 if durable_backend.name == "local" else 2
    assert one.waves <= 2 + copy and one.requests <= 5 + copy, one.describe()
    assert len(one.in_wave(1)) == 3, one.describe()  # the copy (or its read), the new blob, the segment
    assert _names(one.in_wave(1 + copy)) == ["00000000000000000003.json"], one.describe()  # the commit record
    assert set(_names(one.in_wave(2 + copy))) == {"00007.txt", "files%2F00007.txt.json"}, one.describe()
    assert old in durable_backend.journal(key).values()  # older states still read the replaced bytes
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("files/00007.txt") == "changed"
    assert reopened.at(2).read_text("files/00007.txt") == old.decode()

    fresh.append({"role": "user", "content": "hi"})
    with round_trips.measure() as transcript:
        fresh.save()
    # the record | messages.json and the head | the probe past the record (the newest transcript last)
    assert transcript.waves <= 3 and transcript.requests <= 4, transcript.describe()
    assert {"head.json", "messages.json"} <= set(_names(transcript.in_wave(2))), transcript.describe()
    assert HEAD_NAME.endswith("/head.json")

    fresh.write_text("files/00008.txt", "changed too")
    fresh.append({"role": "assistant", "content": "done"})
    with round_trips.measure() as both:
        fresh.save()
    assert both.waves <= 3 + copy and both.requests <= 7 + copy, both.describe()

    versioned = MemoryStore.get_or_create(key=key, keep_versions=True)
    versioned.write_text("files/00009.txt", "versioned")
    with round_trips.measure() as kept:
        versioned.save()
    assert kept.waves <= 2 + copy, kept.describe()  # the version snapshot goes with the projection
    assert "/versions/" in " ".join(c.path for c in kept.in_wave(2 + copy)), kept.describe()
    assert MemoryStore.get_or_create(key=key).messages[-1]["content"] == "done"

    reader = MemoryStore.get_or_create(key=key)  # read the file first: its save writes the bytes it holds
    before = reader.log(limit=1)[0]
    old = reader.read_bytes("files/00010.txt")
    reader.write_text("files/00010.txt", "changed after a read")
    with round_trips.measure() as held:
        reader.save()
    # content | commit record | projection (with the head, which two saves left behind)
    assert held.waves <= 3 and held.requests <= 7, held.describe()
    assert old in durable_backend.journal(key).values()
    assert MemoryStore.get_or_create(key=key).at(before).read_bytes("files/00010.txt") == old


def test_a_throttled_bulk_save_backs_off_and_lands_whole(durable_backend, key, round_trips, monkeypatch):
    """The backend answers a burst of the save's uploads with "slow down" (what s3fs raises once its own
    retries of S3's SlowDown are spent): the width in flight halves, the throttled uploads are retried,
    and every file lands."""
    previous = set_retry_policy(RetryPolicy(attempts=6, initial_delay=0.0, max_delay=0.0, jitter=False))
    try:
        monkeypatch.setattr(_adaptive, "_ceiling", 64)  # a small ceiling: the cut shows at 120 files
        store = MemoryStore.create(key=key)
        for i in range(120):
            store.write_text(f"files/{i:05d}.txt", _text(i))
        round_trips.arm(lambda n, op, path: "throttle" if 3 <= n <= 30 and op == "write" else None)
        store.save()
        round_trips.clear()
    finally:
        set_retry_policy(previous)
    assert round_trips.totals["throttle"] == 28
    limits = [limit for loops in list(_adaptive._LIMITS.values()) for limit in loops.values() if limit.cuts]
    assert limits and min(limit.lowest for limit in limits) <= 32, [(x.cuts, x.lowest) for x in limits]
    view = durable_backend.upstream_view(key)
    assert all(view[f"files/{i:05d}.txt"] == _text(i).encode() for i in range(120))
    assert len(MemoryStore.get_or_create(key=key).list_paths()) == 120


def test_the_adaptive_limit_halves_once_per_round_and_grows_back_by_one_per_window():
    async def run() -> AdaptiveLimit:
        limit = AdaptiveLimit(8)
        rounds = [await limit.acquire() for _ in range(8)]
        assert limit.in_flight == 8
        waiting = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)
        assert not waiting.done()  # the ninth waits for a slot
        for started in rounds[:3]:  # three replies of one round say "slow down": one halving
            limit.release(started, throttled=True)
        assert (limit.limit, limit.cuts) == (4, 1)
        await asyncio.sleep(0)
        assert not waiting.done()  # 5 still in flight, 4 allowed
        for started in rounds[3:]:
            limit.release(started, throttled=False)
        await asyncio.sleep(0)
        assert waiting.done() and limit.in_flight == 1
        limit.release(await waiting, throttled=True)  # a reply of the new round halves again
        assert (limit.limit, limit.cuts, limit.lowest) == (2, 2, 2)
        for _ in range(2 + 3):  # 2 answers grow it to 3, 3 more to 4
            limit.release(await limit.acquire(), throttled=False)
        assert limit.limit == 4
        return limit

    assert asyncio.run(run()).ceiling == 8


def test_the_ceiling_is_a_process_setting():
    previous = _adaptive.set_max_in_flight(100)
    try:
        assert _adaptive.get_max_in_flight() == 100
        with pytest.raises(ValueError):
            _adaptive.set_max_in_flight(0)
    finally:
        _adaptive.set_max_in_flight(previous)


def test_a_waiter_cancelled_as_a_slot_frees_is_cancelled_and_leaks_no_slot():
    async def run() -> None:
        limit = AdaptiveLimit(1)
        started = await limit.acquire()
        waiting = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)
        waiting.cancel()  # cancels its grant at once; its own step runs later
        limit.release(started, throttled=False)  # meanwhile a reply frees the slot: `_grant` pops that grant
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert limit.in_flight == 0 and not limit._waiting
        limit.release(await asyncio.wait_for(limit.acquire(), 1), throttled=False)  # still usable

    asyncio.run(run())


def test_an_error_naming_an_object_called_slowdown_is_not_throttling():
    missing = FileNotFoundError(2, "No such file or directory", "bucket/agents/notes/SlowDown.md")
    forbidden = PermissionError("Access Denied: bucket/agents/reduce your request rate.txt")
    assert not _adaptive.is_throttling(missing) and not _adaptive.is_throttling(forbidden)


def test_no_projection_write_of_a_save_lands_after_it_returned(local_backend, key, storage_faults, monkeypatch):
    import threading

    from flyteplugins_memory._journal.journal_storage import JournalStorage

    files = {f"f{i}.txt": "first" for i in range(5)}  # five files: not a small save, it writes the head hint
    store = MemoryStore.create(key=key)
    for path, text in files.items():
        store.write_text(path, text)
    store.save()
    for path in files:
        store.write_text(path, "second")
    landed = threading.Event()
    write_many = JournalStorage.write_many

    async def slow_projection(self, objects):  # the upload of f0.txt is slower than the failing hint
        if objects.get("f0.txt") != b"second":
            return await write_many(self, objects)
        await asyncio.sleep(0.2)
        try:
            return await write_many(self, objects)
        finally:
            landed.set()

    monkeypatch.setattr(JournalStorage, "write_many", slow_projection)
    storage_faults.arm(lambda n, op, path: "permanent" if op == "write" and path.endswith("/head.json") else None)
    store.save()  # committed; its head hint failed (logged)
    storage_faults.clear()
    assert landed.is_set()  # the save returned only once its upload of f0.txt had ended
    other = MemoryStore.open(key=key)
    other.write_text("f0.txt", "third")
    other.save()
    assert MemoryStore.open(key=key).read_text("f0.txt") == "third"
    assert local_backend.upstream_view(key)["f0.txt"] == b"third"
