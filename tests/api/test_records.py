"""Record logs (`store.records(name)`) and per-session conversations (`store.session(name)`), on local disk
and moto S3: appends survive concurrent saves of threads and processes, each once, in one order that
every reader shares; bad input is refused before anything is appended; segments land as ordinary files."""

from __future__ import annotations

import json
import math
import threading
import urllib.parse

import pytest

from flyteplugins_memory import (
    Conversation,
    InvalidArgument,
    InvalidMessage,
    InvalidPath,
    InvalidRecord,
    MemoryStore,
    ReadOnlyPath,
    RecordLog,
    ReservedPath,
    UnsavedChanges,
)
from flyteplugins_memory._api.records import RecordLog as RecordLogImpl
from released import released_source, run_released
from workers import child

#: The release deployed before record logs (issue 9's: 0.4.0 with in-place uploads through obstore).
PREVIOUS_RELEASE = "6df8b45"


def segments(backend, key: str, log: str) -> dict[str, bytes]:
    """The log's segment files as the backend itself holds them."""
    return {n: d for n, d in backend.objects(key).items() if n.startswith(log + "/")}


def test_append_read_since_limit_and_what_lands_in_storage(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    store = MemoryStore.get_or_create(key=key)
    log = store.records("users/alice/events")
    assert isinstance(log, RecordLog) and log.name == "users/alice/events"
    log.append({"n": 0})
    log.extend([1, "two", [3], None])
    assert log.read() == [{"n": 0}, 1, "two", [3], None] and log.count() == 5
    store.save()
    log.extend([5, 6])  # unsaved: after every committed record
    assert log.read(since=3) == [[3], None, 5, 6]
    assert log.read(since=1, limit=2) == [1, "two"]
    assert log.read(since=4, limit=2) == [None, 5]
    assert log.read(since=9) == [] and log.read(limit=0) == []
    store.save()

    stored = segments(backend, key, "users/alice/events")
    assert len(stored) == 2  # one segment per save
    lines = sorted(d.decode() for d in stored.values())
    assert lines == ["5\n6\n", '{"n":0}\n1\n"two"\n[3]\nnull\n']
    sidecars = backend.objects(key)
    for name in stored:
        meta = json.loads(sidecars[f"meta/{urllib.parse.quote(name, safe='')}.json"])
        assert meta["path"] == name and meta["bytes"] == len(stored[name])
    events = [e for e in store.audit_tail(0) if e["path"].startswith("users/alice/events/")]
    assert sorted(e["path"] for e in events) == sorted(stored)

    fresh = MemoryStore.get_or_create(key=key).records("users/alice/events")
    assert fresh.read() == [{"n": 0}, 1, "two", [3], None, 5, 6] and fresh.count() == 7


def test_reads_fetch_only_the_segments_they_need(local_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    log = store.records("tools/search")
    for batch in range(4):
        log.extend([batch * 10 + i for i in range(10)])
        store.save()
    fetched: list[str] = []
    original = RecordLogImpl._fetch_one

    async def counting(self, segment):
        fetched.append(segment.path)
        return await original(self, segment)

    monkeypatch.setattr(RecordLogImpl, "_fetch_one", counting)
    reader = MemoryStore.get_or_create(key=key).records("tools/search")
    assert reader.count() == 40 and fetched == []  # counts live in the file index
    assert reader.read(since=25, limit=3) == [25, 26, 27]
    assert len(fetched) == 1
    fetched.clear()
    assert reader.read(since=18, limit=4) == [18, 19, 20, 21] and len(fetched) == 2


def test_threads_appending_to_one_log_lose_nothing_and_share_one_order(durable_backend_and_endpoint, key):
    MemoryStore.create(key=key)
    first = MemoryStore.get_or_create(key=key)
    first.records("shared").extend(["start"])
    first.save()
    errors: list[BaseException] = []

    # opened here: Flyte's raw-data context does not follow into threads
    stores = {w: [MemoryStore.get_or_create(key=key) for _ in range(3)] for w in range(4)}

    def worker(w: int) -> None:
        try:
            for r, store in enumerate(stores[w]):
                store.records("shared").extend([f"{w}:{r}:{i}" for i in range(4)])
                store.save()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    records = MemoryStore.get_or_create(key=key).records("shared").read()
    assert records[0] == "start"
    assert sorted(records[1:]) == sorted(f"{w}:{r}:{i}" for w in range(4) for r in range(3) for i in range(4))
    for w in range(4):  # each writer's records keep its own order
        mine = [x for x in records if x.startswith(f"{w}:")]
        assert mine == [f"{w}:{r}:{i}" for r in range(3) for i in range(4)]
    assert MemoryStore.get_or_create(key=key).records("shared").read() == records
    # the old handle, once moved on, sees the same log, its own first record still first
    first.refresh()
    assert first.records("shared").read() == records


def test_processes_appending_to_one_log_lose_nothing(s3_backend, moto_endpoint, key, tmp_path):
    # on S3 only (process start-up dominates this test's time): local disk's commit race is covered by the
    # threads above and by test_multiprocess
    backend, endpoint = s3_backend, moto_endpoint
    MemoryStore.create(key=key)
    go = tmp_path / "go"
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "go": str(go)}
    config |= {"log": "runs/r1", "rounds": 2, "per_round": 3}
    procs = [child("append_records", {**config, "worker": w}) for w in range(3)]
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]

    records = MemoryStore.get_or_create(key=key).records("runs/r1").read()
    expected = [{"w": w, "r": r, "i": i} for w in range(3) for r in range(2) for i in range(3)]
    assert len(records) == len(expected)
    assert sorted(map(json.dumps, records)) == sorted(map(json.dumps, expected))
    for w in range(3):
        assert [x for x in records if x["w"] == w] == [x for x in expected if x["w"] == w]
    assert MemoryStore.get_or_create(key=key).records("runs/r1").read(since=4) == records[4:]
    assert len(segments(backend, key, "runs/r1")) == 6  # one per save, none overwritten


def test_an_index_never_changes_once_committed(local_backend, key):
    a, b = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    a.records("log").extend(["a1", "a2"])
    a.save()
    b.records("log").append("b1")  # b's base predates a's save
    assert b.records("log").read() == ["b1"]
    b.save()  # lands after a's commit: its record comes after a's
    assert b.records("log").read() == ["a1", "a2", "b1"]
    a.records("log").append("a3")
    assert a.records("log").read() == ["a1", "a2", "a3"]  # unsaved: after what a has seen committed
    a.save()
    assert a.records("log").read() == ["a1", "a2", "b1", "a3"]


def test_bad_records_are_refused_and_nothing_is_appended(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    log = store.records("log")
    circular: list = []
    circular.append(circular)
    deep: list = []
    for _ in range(120):
        deep = [deep]
    for bad in (math.nan, math.inf, {1, 2}, object(), circular, {1: "a", "1": "b"}, "\ud800", deep, b"x"):
        with pytest.raises(InvalidRecord):
            log.append(bad)
        with pytest.raises(InvalidRecord):
            log.extend([1, bad])
    with pytest.raises(InvalidArgument):
        log.extend({"a": 1})
    assert log.count() == 0 and not store.has_unsaved_changes()
    for since, limit in ((-1, None), (0, -1), ("0", None), (0, True)):
        with pytest.raises(InvalidArgument):
            log.read(since, limit)
    assert isinstance(InvalidRecord("x"), ValueError)


def test_log_names_follow_the_path_rules(local_backend, key):
    store = MemoryStore.get_or_create(key=key, read_only_prefixes=("policies/",))
    for name in ("", "/abs", "a/../b", "a\x00b"):
        with pytest.raises(InvalidPath):
            store.records(name)
    for reserved in ("meta/log", "audit/x", "versions/x"):
        with pytest.raises(ReservedPath):
            store.records(reserved).append(1)
    readonly = store.records("policies/log")
    with pytest.raises(ReadOnlyPath):
        readonly.append(1)
    assert readonly.read() == [] and not store.has_unsaved_changes()


def test_other_files_and_nested_logs_are_not_records(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("log/notes.txt", "not a record")
    store.records("log").append("outer")
    store.records("log/inner").append("inner")
    store.save()
    reader = MemoryStore.get_or_create(key=key)
    assert reader.records("log").read() == ["outer"]
    assert reader.records("log/inner").read() == ["inner"]


def test_segments_keep_no_versions_and_unsaved_records_block_sending(local_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.records("log").append(1)
    assert store.has_unsaved_changes()
    with pytest.raises(UnsavedChanges):
        store._serialize()
    store.save()
    assert not store.has_unsaved_changes()
    assert not [n for n in local_backend.objects(key) if n.startswith("versions/")]


def test_session_round_trip_through_a_task_boundary(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    store = MemoryStore.get_or_create(key=key)
    chat = store.session("abc")
    assert isinstance(chat, Conversation) and chat.name == "abc" and chat.log.name == "sessions/abc"
    chat.append({"role": "user", "content": "hi"})
    chat.extend([{"role": "assistant", "content": "hello"}])
    assert store.messages == []  # not the store's transcript
    store.save()
    received = MemoryStore._deserialize(store._serialize())
    other = received.session("abc")
    assert other.messages == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    other.append({"role": "user", "content": "again"})
    received.save()
    again = MemoryStore.get_or_create(key=key).session("abc")
    assert [m["content"] for m in again.read(since=1)] == ["hello", "again"] and again.count() == 3
    assert len(segments(backend, key, "sessions/abc")) == 2


def test_session_names_and_messages_are_checked(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    for name in ("", "a/b", "..", 3):
        with pytest.raises((InvalidPath, InvalidArgument)):
            store.session(name)  # type: ignore[arg-type]
    chat = store.session("s1")
    for bad in ("text", {"x": math.nan}, {1: "a", "1": "b"}):
        with pytest.raises(InvalidMessage):
            chat.append(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        chat.extend([{"role": "user"}, "nope"])  # type: ignore[list-item]
    assert chat.count() == 0 and not store.has_unsaved_changes()


def test_a_log_blocked_by_a_file_keeps_its_records_until_discarded(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes", "a file where the log's directory would be")
    store.save()
    log = store.records("notes")
    log.extend([1, 2])
    with pytest.raises(InvalidPath):
        store.save()
    assert log.count() == 2 and store.has_unsaved_changes()  # nothing lost
    assert log.discard_unsaved() == 2
    store.save()
    assert not store.has_unsaved_changes() and MemoryStore.get_or_create(key=key).list_paths() == ["notes"]


def test_the_previous_release_opens_and_saves_a_store_with_logs(local_backend, key, tmp_path):
    store = MemoryStore.get_or_create(key=key)
    store.records("events").extend([{"a": 1}, {"b": 2}])
    store.save()
    released = released_source(PREVIOUS_RELEASE, tmp_path / "released")
    config = {"key": key, "raw": local_backend.raw_data_path, "endpoint": None}
    # one child (it costs seconds): it opens the store, sees the segment as a file, writes and saves
    seen = run_released(released, "write", {**config, "writes": {"events/plain.txt": "not a segment"}})
    assert len(seen["files"]) == 2 and "events/plain.txt" in seen["files"]
    reader = MemoryStore.get_or_create(key=key)
    reader.records("events").append({"c": 3})
    reader.save()
    assert MemoryStore.get_or_create(key=key).records("events").read() == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_a_saved_segment_is_audited_under_the_saves_actor(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.records("tools/search").append({"q": "tea"})
    store.save(actor="researcher")
    store.records("tools/search").append({"q": "coffee"})
    store.save()  # naming no actor: the default, as for a write without one
    events = [e for e in MemoryStore.open(key=key).audit_tail(0) if e["path"].startswith("tools/search/")]
    assert [e["actor"] for e in events] == ["researcher", "agent"]
    assert MemoryStore.open(key=key).log(limit=2)[1].actor == "researcher"


def test_a_record_with_keys_json_would_turn_into_strings_is_refused(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    log = store.records("events")
    for bad in [{1: "a"}, {"ok": [{None: 1}]}, {True: 1}, {1.5: 2}, [{("t",): 1}]]:
        with pytest.raises(InvalidRecord, match="keys"):
            log.append(bad)
    log.append({"1": "a", "nested": [{"k": (1, 2)}]})  # str keys; a tuple is a JSON array
    store.save()
    assert MemoryStore.open(key=key).records("events").read() == [{"1": "a", "nested": [{"k": [1, 2]}]}]


def test_a_log_segment_cannot_be_rewritten_so_record_indexes_never_change(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    log = store.records("events")
    log.append("first")
    store.save()
    log.append("second")
    store.save()
    first = min(store.list_paths("events"))
    before = durable_backend.objects(key)[first]
    # a rewrite would move the segment to the end of the log (logs are ordered by the commit that wrote)
    with pytest.raises(InvalidPath, match="record log"):
        store.set_metadata(first, {"label": "x"})
    with pytest.raises(InvalidPath, match="record log"):
        store.write_text(first, '"forged"\n')
    with pytest.raises(InvalidPath, match="record log"):
        store.write_bytes("events/00000000000000000001-0123456789ab.jsonl", b'"injected"\n')
    assert not store.has_unsaved_changes()
    store.write_text("events/notes.jsonl", "an ordinary file beside the log")  # other names stay writable
    store.save()
    assert durable_backend.objects(key)[first] == before
    assert MemoryStore.open(key=key).records("events").read() == ["first", "second"]


@pytest.mark.parametrize("text", ["line\u2028separator", "para\u2029graph", "next\x85line"])
def test_a_record_holding_a_unicode_line_break_reads_back(durable_backend, key, text):
    # JSON leaves U+2028, U+2029 and U+0085 unescaped; str.splitlines splits on them
    store = MemoryStore.get_or_create(key=key)
    store.records("events").extend([{"text": text}, "after"])
    store.save()
    [segment] = [n for n in durable_backend.objects(key) if n.startswith("events/")]
    assert durable_backend.objects(key)[segment].count(b"\n") == 2  # two records, one line each
    assert MemoryStore.open(key=key).records("events").read() == [{"text": text}, "after"]


@pytest.mark.parametrize("name", [".", ".."])
def test_a_session_named_dot_is_refused_not_the_log_of_every_session(local_backend, key, name):
    store = MemoryStore.get_or_create(key=key)
    store.session("s1").append({"role": "user", "content": "s1's message"})
    store.save()
    for owner in [store, store.scope("users/alice")]:
        with pytest.raises(InvalidPath):  # "." was "sessions": its segments among the session directories
            owner.session(name)
    assert store.list_paths("sessions") == [p for p in store.list_paths() if p.startswith("sessions/s1/")]
