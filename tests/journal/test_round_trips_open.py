"""Round trips of an open, a listing, a transcript read and a first search (issue 26; decisions 0147, 0148).

Counted with the `round_trips` fixture (every storage call of local disk and moto S3, its wave: the longest
chain of calls each started after the one before it ended), never timed. The head hint names what an open
reads next, and the open reads all of it in its second round trip: the two log slots past the hint, the
hinted record, its checkpoint and, for an index of at most one part's worth, the parts. So an open, a full
listing and the transcript of a 1,000-file store take 2 round trips; an index too large to name costs one
more (its parts, all at once); a cold search reads its segments with the index parts the hits need.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._rules.layout import HEAD_NAME, checkpoint_name, log_name, part_name

HELLO = {"role": "user", "content": "hello"}
#: the tests that need one backend only (what they check is the journal's, not the backend's) run on local disk
local_only = pytest.mark.parametrize("durable_backend", ["local_backend"], indirect=True)


@contextlib.contextmanager
def quick(round_trips):
    """Set-up without the fixture's latency (counted calls of set-up are not asserted)."""
    latency, round_trips.latency = round_trips.latency, 0.0
    try:
        yield
    finally:
        round_trips.latency = latency


def bulk_saved(round_trips, key: str, count: int, compact: bool = False) -> MemoryStore:
    """`count` files and one message, saved at once (commit 2; folded into checkpoint 2 when the record
    passes 32 KiB, as it does at 1,000 files, or when `compact`)."""
    with quick(round_trips):
        store = MemoryStore.create(key=key)
        for i in range(count):
            store.write_text(f"files/{i:05d}.txt", f"note {i}: lantern tag{i % 97} " + "words " * 20)
        store.append(HELLO)
        store.save()
        if compact:
            store.compact()
    return store


def head_of(backend, key: str) -> dict:
    backend.fs.invalidate_cache()
    return json.loads(backend.journal(key)[HEAD_NAME])


def opened_and_listed(round_trips, key: str, files: int):
    """Open `key`, list every path and read the transcript, measured."""
    with round_trips.measure() as m:
        store = MemoryStore.get_or_create(key=key)
        assert len(store.list_paths()) == files
        assert store.messages[:1] == [HELLO]
    return store, m


def test_open_list_and_transcript_of_1000_files_take_2_round_trips(durable_backend, key, round_trips):
    store = bulk_saved(round_trips, key, 1000)
    head = head_of(durable_backend, key)
    assert head["seq"] == head["checkpoint"] == 2 and len(head["ext"]["open"]["parts"]) == 1

    _, m = opened_and_listed(round_trips, key, 1000)
    assert m.waves == 2 and m.requests == 5, m.describe()  # head; two probes, checkpoint, its one part
    assert [c.path.rsplit("/", 1)[-1] for c in m.in_wave(1)] == ["head.json"]

    store.write_text("notes/one.txt", "one")
    store.save()  # commit 3, a small save: the hint stays one commit behind, naming checkpoint 2
    assert head_of(durable_backend, key)["seq"] == 2
    fresh, m = opened_and_listed(round_trips, key, 1001)
    assert m.waves == 2, m.describe()  # the first probe is the newest record, read with the rest
    assert fresh.read_text("notes/one.txt") == "one"

    store.write_text("notes/two.txt", "two")
    store.save()  # commit 4 moves the hint; it names a record now, read with its checkpoint
    assert head_of(durable_backend, key)["seq"] == 4
    _, m = opened_and_listed(round_trips, key, 1002)
    assert m.waves == 2, m.describe()


@local_only
def test_a_head_several_commits_behind_still_opens_the_newest_state(durable_backend, key, round_trips):
    store = bulk_saved(round_trips, key, 300)
    stale = durable_backend.journal(key)[HEAD_NAME]
    with quick(round_trips):
        for i in range(4):
            store.write_text(f"notes/{i}.txt", str(i))
            store.save()
    assert json.loads(stale)["seq"] == 2 and head_of(durable_backend, key)["seq"] == 6
    durable_backend.put(key, HEAD_NAME, stale)  # as a writer that died before moving the hint leaves it

    fresh, m = opened_and_listed(round_trips, key, 304)
    assert fresh.read_text("notes/3.txt") == "3"
    # slots 3 and 4 come with the second round trip; 5, 6 and the empty 7 are probed one by one after
    assert m.waves == 2 + 3, m.describe()


@local_only
def test_a_head_naming_parts_that_are_gone_or_wrong_costs_a_round_trip_not_an_answer(durable_backend, key, round_trips):
    bulk_saved(round_trips, key, 1000)
    head = head_of(durable_backend, key)
    real = head["ext"]["open"]["parts"][0]
    other = "ab" * 32
    durable_backend.put(key, part_name(other), b'{"files": {}}')  # named, found, and referenced by nothing
    head["ext"]["open"] = {"stored": True, "parts": [other, "../../../etc/passwd", 7]}
    durable_backend.put(key, HEAD_NAME, json.dumps(head).encode())

    _, m = opened_and_listed(round_trips, key, 1000)
    names = [c.path for c in m.calls]
    assert sum(name.endswith(f"{real}.json") for name in names) == 1 and "passwd" not in " ".join(names)
    assert m.waves == 3, m.describe()  # the part the checkpoint references is read when the listing needs it


@local_only
def test_a_head_without_the_open_hint_opens_as_before(durable_backend, key, round_trips):
    """A head an earlier version wrote names no parts: the checkpoint still comes with the probes."""
    bulk_saved(round_trips, key, 1000)
    head = head_of(durable_backend, key)
    del head["ext"]
    durable_backend.put(key, HEAD_NAME, json.dumps(head).encode())
    _, m = opened_and_listed(round_trips, key, 1000)
    assert m.waves == 3, m.describe()
    assert checkpoint_name(2).rsplit("/", 1)[-1] in " ".join(c.path for c in m.in_wave(2))


@local_only
def test_a_large_index_is_listed_in_one_more_round_trip(durable_backend, key, round_trips, small_index_parts):
    bulk_saved(round_trips, key, 300, compact=True)
    head = head_of(durable_backend, key)
    refs = json.loads(durable_backend.journal(key)[checkpoint_name(head["checkpoint"])])["parts"]
    assert len(refs) > 10 and "parts" not in head_of(durable_backend, key)["ext"]["open"]

    _, m = opened_and_listed(round_trips, key, 300)
    assert m.waves == 3, m.describe()  # head; probes and checkpoint; every part at once
    assert len(m.in_wave(3)) == len(refs)


@local_only
def test_a_cold_search_of_an_up_to_date_store_reads_its_segments_and_no_index(
    durable_backend, key, round_trips, small_index_parts
):
    """Its segments' docs carry what a hit needs, expiry included (decisions 0148, 0156)."""
    bulk_saved(round_trips, key, 300)
    with round_trips.measure() as m:
        hits = MemoryStore.get_or_create(key=key).search("lantern tag7")
    assert hits and hits[0].path == "files/00007.txt"
    assert m.waves == 3, m.describe()  # head; probes and checkpoint; segments
    assert not [c for c in m.calls if "/parts/" in c.path], m.describe()


@local_only
def test_a_stale_head_after_a_record_slot_it_names_was_read_ahead(durable_backend, key, round_trips):
    """The hinted record is read ahead with the probes; when the probes find newer commits, it is unused
    and the newest state is what the open sees."""
    store = bulk_saved(round_trips, key, 20)  # no checkpoint: the hint names record 2
    store.write_text("a.txt", "a")
    store.save()
    with round_trips.measure() as m:
        fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("a.txt") == "a" and fresh.messages == [HELLO]
    assert {c.path.rsplit("/", 1)[-1] for c in m.in_wave(2)} == {log_name(s).rsplit("/", 1)[-1] for s in (2, 3, 4)}, (
        m.describe()
    )
