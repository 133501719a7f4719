"""Sequential round trips ("waves") and requests of saves (`Faults.measure`: counts, never times)."""

from __future__ import annotations

from flyteplugins_memory import MemoryStore


def bulk_saved(key: str, count: int) -> MemoryStore:
    store = MemoryStore.create(key=key)
    for i in range(count):
        store.write_text(f"files/{i:05d}.txt", f"content {i} " * 80)
    store.save()
    return store


def test_probe(durable_backend, key, round_trips):
    bulk_saved(key, 1000)
    fresh = MemoryStore.get_or_create(key=key)
    fresh.write_text("files/00007.txt", "changed")
    with round_trips.measure() as m:
        fresh.save()
    print("ONE", m.requests, m.waves, "\n" + m.describe())
    fresh.append({"role": "user", "content": "hi"})
    with round_trips.measure() as m:
        fresh.save()
    print("MSG", m.requests, m.waves, "\n" + m.describe())
    fresh.write_text("files/00008.txt", "changed")
    fresh.append({"role": "user", "content": "hi"})
    with round_trips.measure() as m:
        fresh.save()
    print("BOTH", m.requests, m.waves, "\n" + m.describe())


def test_probe_bulk(durable_backend, key, round_trips):
    store = MemoryStore.create(key=key)
    for i in range(1000):
        store.write_text(f"files/{i:05d}.txt", f"content {i} " * 80)
    with round_trips.measure() as m:
        store.save()
    from collections import Counter

    print("BULK", m.requests, m.waves, round_trips.peak)
    for w in range(1, m.waves + 1):
        calls = m.in_wave(w)
        print(w, len(calls), Counter(c.op for c in calls), calls[0].path[-60:])
