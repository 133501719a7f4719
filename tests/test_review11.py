"""Hostile review of issue 11's merged parts (metadata, record logs, bytes, bulk deletes, trusted): each test
is a defect found by trying to break them, checked in storage (a new handle or the backend's objects)."""

from __future__ import annotations

import pytest

from flyteplugins_memory import InvalidMetadata, InvalidPath, InvalidRecord, MemoryStore


def test_an_int_too_long_for_json_is_invalid_metadata_not_a_value_error(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    huge = 10**5000  # more digits than Python converts to text: json.dumps raises a bare ValueError
    with pytest.raises(InvalidMetadata, match="metadata"):
        store.write_text("a.md", "a", metadata={"n": huge})
    with pytest.raises(InvalidMetadata, match="where"):
        store.list_paths(where={"n": huge})
    big = 10**300  # fits: kept exactly
    store.write_text("a.md", "a", metadata={"n": big})
    store.save()
    assert MemoryStore.open(key=key).list_paths(where={"n": big}) == ["a.md"]


def test_a_record_with_keys_json_would_turn_into_strings_is_refused(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    log = store.records("events")
    for bad in [{1: "a"}, {"ok": [{None: 1}]}, {True: 1}, {1.5: 2}, [{("t",): 1}]]:
        with pytest.raises(InvalidRecord, match="keys"):
            log.append(bad)
    log.append({"1": "a", "nested": [{"k": (1, 2)}]})  # str keys; a tuple is a JSON array
    store.save()
    assert MemoryStore.open(key=key).records("events").read() == [{"1": "a", "nested": [{"k": [1, 2]}]}]


def test_delete_prefix_also_drops_unsaved_records_of_logs_under_it(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.records("n").append("old")
    store.save()
    store.records("n").append("unsaved")
    store.records("n/inner").append("unsaved too")
    store.records("nx").append("kept: another directory")
    deleted = store.delete_prefix("n")
    assert len(deleted) == 1 and deleted[0].startswith("n/")
    assert store.records("n").count() == 0 and store.records("n/inner").count() == 0
    store.save()
    assert [n for n in durable_backend.upstream_view(key) if n.startswith("n/")] == []
    fresh = MemoryStore.open(key=key)
    assert fresh.records("n").read() == [] and fresh.records("nx").read() == ["kept: another directory"]


@pytest.mark.parametrize("name", ["", "../x", "/etc/passwd", "a\x00b"])
def test_read_version_bytes_of_a_bad_name_is_invalid_path_not_corrupt_store(local_backend, key, name):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    with pytest.raises(InvalidPath):
        store.read_version_bytes(name)
    with pytest.raises(InvalidPath):
        store.read_version(name)


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


def test_metadata_of_str_int_and_float_subclasses_is_stored_and_matched_as_the_builtin(local_backend, key):
    import enum

    class Kind(enum.StrEnum):
        IMG = "img"

    class Level(enum.IntEnum):
        HIGH = 3

    class Score(float):
        pass

    store = MemoryStore.get_or_create(key=key)
    meta = store.write_text("a.md", "a", metadata={"kind": Kind.IMG, "level": Level.HIGH, "score": Score(0.5)})
    assert [type(v) for v in meta.metadata.values()] == [str, int, float]
    assert store.set_metadata("a.md", {Kind.IMG: 1}).metadata == {"img": 1}  # keys too
    assert type(next(iter(store.get_meta("a.md").metadata))) is str
    store.set_metadata("a.md", {"kind": Kind.IMG, "level": Level.HIGH, "score": Score(0.5)})
    # the handle that wrote it matches as a fresh one does (a str filter finds a StrEnum value, and back)
    assert store.list_paths(where={"kind": "img", "level": 3}) == ["a.md"]
    assert store.list_paths(where={"kind": Kind.IMG}) == ["a.md"]
    store.save()
    fresh = MemoryStore.open(key=key)
    assert fresh.get_meta("a.md").metadata == {"kind": "img", "level": 3, "score": 0.5}
    assert fresh.list_paths(where={"kind": Kind.IMG, "level": Level.HIGH}) == ["a.md"]
