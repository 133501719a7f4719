"""Search and ttl (docs/decisions/0156): the index's docs carry their file's expiry, so a cold search leaves
expired files out without reading the file index; docs of segments written before (no expiry) are looked
up in the file index as before. Stores of old and new segments answer alike; purge removes binary segments
that hold a purged content. On local disk (the backend does not matter here)."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore, SearchHit
from flyteplugins_memory._journal import gc as _gc
from flyteplugins_memory._journal import search_segments
from flyteplugins_memory._rules.search_binary import MAGIC
from flyteplugins_memory._rules.search_forms import encode_json_segment
from released import BEFORE_BINARY_SEGMENTS, released_source, run_released

SEGMENTS = "meta/.journal/search/"
PARTS = "meta/.journal/parts/"


def paths(hits: list[SearchHit]) -> list[str]:
    return [h.path for h in hits]


def later(monkeypatch, hours: float) -> None:
    """Every handle's clock runs `hours` ahead of the real one."""
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + hours * 3600)


def old_segments(monkeypatch) -> None:
    """Saves write segments as releases before 0155/0156 did: JSON, docs without their expiry."""

    def encode(docs, writer):
        return encode_json_segment(
            {p: d and dataclasses.replace(d, expiry_known=False) for p, d in docs.items()}, writer
        )

    monkeypatch.setattr(search_segments, "encode_segment", encode)


def seeded(key: str) -> MemoryStore:
    """kept.md and scratch.md (a ttl of one hour) both say heron; a checkpoint holds their entries in index
    parts (with `small_index_parts`)."""
    store = MemoryStore.create(key=key)
    store.write_text("kept.md", "a grey heron by the pond")
    store.write_text("scratch.md", "heron notes, for an hour", ttl=timedelta(hours=1))
    for i in range(30):
        store.write_text(f"other/{i:02d}.md", f"sparrow {i}")
    store.save()
    store.compact()
    return store


def test_a_cold_search_leaves_expired_files_out_without_reading_the_file_index(
    local_backend, key, io_counter, monkeypatch, small_index_parts
):
    seeded(key)
    assert [n for n in local_backend.journal(key) if n.startswith(PARTS)]
    fresh = MemoryStore.get_or_create(key=key)
    io_counter.reset()
    assert paths(fresh.search("heron")) == ["scratch.md", "kept.md"]
    assert not [n for n in io_counter.names("get") if n.startswith(PARTS)], io_counter.ops
    later(monkeypatch, 2)
    again = MemoryStore.get_or_create(key=key)
    io_counter.reset()
    assert paths(again.search("heron")) == ["kept.md"]  # the ttl ran out: the doc says so
    reads = io_counter.names("get")
    assert reads and all(n.startswith(SEGMENTS) for n in reads), io_counter.ops
    assert all(d.startswith(MAGIC) for n, d in local_backend.journal(key).items() if n.startswith(SEGMENTS))


def test_docs_of_old_segments_are_looked_up_in_the_file_index(
    local_backend, key, io_counter, monkeypatch, small_index_parts
):
    with monkeypatch.context() as patch:
        old_segments(patch)
        seeded(key)
    assert not any(d.startswith(MAGIC) for n, d in local_backend.journal(key).items() if n.startswith(SEGMENTS))
    later(monkeypatch, 2)
    fresh = MemoryStore.get_or_create(key=key)
    io_counter.reset()
    assert paths(fresh.search("heron")) == ["kept.md"]
    assert [n for n in io_counter.names("get") if n.startswith(PARTS)], io_counter.ops  # no expiry in the doc


def test_a_store_of_old_and_new_segments_searches_right_and_purge_removes_both_kinds(local_backend, key, monkeypatch):
    store = MemoryStore.create(key=key)
    for i in range(8):
        store.write_text(f"files/{i}.md", f"owl {i} " + "filler " * 200)
    store.write_text("secret.md", "the code word is quokkaburra, owl")
    with monkeypatch.context() as patch:
        old_segments(patch)
        store.save()
    store.write_text("files/0.md", "owl owl owl kestrel")
    store.write_text("late.md", "the late quokkaburra note, owl")
    store.save()
    kinds = {d.startswith(MAGIC) for n, d in local_backend.journal(key).items() if n.startswith(SEGMENTS)}
    assert kinds == {True, False}  # the new save did not merge the old segment away: both kinds in one index
    fresh = MemoryStore.get_or_create(key=key)
    assert paths(fresh.search("kestrel")) == ["files/0.md"] and paths(fresh.search("owl"))[0] == "files/0.md"
    assert set(paths(fresh.search("quokkaburra"))) == {"secret.md", "late.md"}
    fresh.purge("secret.md")
    fresh.purge("late.md")
    assert [n for n, d in local_backend.stored(key).items() if b"quokkaburra" in d] == []
    assert MemoryStore.get_or_create(key=key).search("quokkaburra") == []
    assert paths(MemoryStore.get_or_create(key=key).search("kestrel")) == ["files/0.md"]


@pytest.mark.parametrize("form", ["binary", "json"])
def test_a_rewrite_that_drops_the_ttl_keeps_the_file_found(local_backend, key, monkeypatch, form):
    if form == "json":
        old_segments(monkeypatch)
    store = MemoryStore.create(key=key)
    store.write_text("note.md", "ibis", ttl=timedelta(hours=1))
    store.save()
    store.write_text("note.md", "ibis")  # the same words, no ttl: it lives on
    store.save()
    later(monkeypatch, 2)
    assert paths(MemoryStore.get_or_create(key=key).search("ibis")) == ["note.md"]


@pytest.mark.slow
def test_the_release_before_binary_segments_searches_a_store_of_them_and_search_stays_right(
    local_backend, key, tmp_path
):
    """It cannot parse a binary segment: it indexes the files instead (no error), and its save replaces
    the segment it could not read with one of its own JSON form, which this version reads."""
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "an osprey over the bay")
    store.write_text("b.md", "a kestrel on the wire")
    store.save()
    previous = released_source(BEFORE_BINARY_SEGMENTS, tmp_path / "previous")
    config = {"key": key, "raw": local_backend.raw_data_path, "endpoint": None, "query": "osprey"}
    done = run_released(previous, "search", config | {"writes": {"c.md": "osprey too"}})
    assert done["hits"] == ["a.md"]
    kinds = {d.startswith(MAGIC) for n, d in local_backend.journal(key).items() if n.startswith(SEGMENTS)}
    assert False in kinds  # its own segment, in the JSON form
    fresh = MemoryStore.get_or_create(key=key)
    assert set(paths(fresh.search("osprey"))) == {"a.md", "c.md"} and paths(fresh.search("kestrel")) == ["b.md"]
    fresh.write_text("d.md", "osprey again")
    fresh.save()
    again = MemoryStore.get_or_create(key=key)
    assert set(paths(again.search("osprey"))) == {"a.md", "c.md", "d.md"} and paths(again.search("kestrel")) == ["b.md"]
