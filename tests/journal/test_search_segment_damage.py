"""A search segment a buggy or hostile writer damaged, its bytes matching the sha256 the index names
(docs/decisions/0161): a search answers from the files that segment held and never raises; a save that
merges it commits, drops it from the index and marks the index inexact, so that readers read those files
again; the save after a search writes their docs back and the index is exact again. Storage is checked
after each save: what the index names, and what each segment it names holds. On local disk (the backend
does not matter: the damage is in the bytes)."""

from __future__ import annotations

import hashlib
import logging
from array import array

import pytest

from flyteplugins_memory import MemoryStore, SearchHit
from flyteplugins_memory._journal import search_segments
from flyteplugins_memory._rules.search_binary import read_header
from flyteplugins_memory._rules.search_index import decode_segment, read_ext
from segment_damage import rebuilt

SEGMENTS = "meta/.journal/search/"


def _every(data: bytes, name: str, value) -> bytes:
    """`data` with every value of column `name` but its first and last set to `value(total, old)`."""
    code = read_header(data)[0]["widths"][name]

    def changed(block: bytes) -> bytes:
        values = array(code, block)
        total = values[-1]
        for i in range(1, len(values) - 1):
            values[i] = value(total, values[i])
        return values.tobytes()

    return rebuilt(data, **{name: changed})


DAMAGE = {
    "first doc row not JSON": lambda b: rebuilt(b, docs=lambda block: b"{" + block[1:]),
    "postings out of order": lambda b: _every(b, "starts", lambda total, v: total - v),
    "doc ids out of range": lambda b: _every(b, "ids", lambda total, v: 250),
    "truncated column": lambda b: rebuilt(b, tfs=lambda block: block[:-1]),  # refused when opened
}


def paths(hits: list[SearchHit]) -> list[str]:
    return sorted(h.path for h in hits)


def named(store: MemoryStore, backend) -> dict[str, bytes]:
    """The segments the store's head index names, by sha256, read from storage (each must be there)."""
    index = read_ext(store._checkout.working_copy.base.ext)
    assert index is not None
    journal = backend.journal(store.key)
    out = {r.sha256: journal[f"{SEGMENTS}{r.sha256[:2]}/{r.sha256}.json"] for r in index.segments}
    assert all(hashlib.sha256(data).hexdigest() == sha for sha, data in out.items())
    return out


def exact(store: MemoryStore) -> bool:
    index = read_ext(store._checkout.working_copy.base.ext)
    return index is not None and index.seq == store._checkout.working_copy.base.seq


def indexed(store: MemoryStore, backend) -> dict[str, str]:
    """The live docs of the segments the head names, path to sha256, decoded in full (as a merge reads them)."""
    out: dict[str, str | None] = {}
    for data in named(store, backend).values():
        out.update({p: d.sha256 if d else None for p, d in decode_segment(data).full_docs().items()})
    return {p: s for p, s in out.items() if s is not None}


def file_shas(store: MemoryStore) -> dict[str, str]:
    metas = {p: store.get_meta(p) for p in store.list_paths()}
    return {p: meta.sha256 for p, meta in metas.items() if meta is not None}


def buggy_save(store: MemoryStore, backend, monkeypatch, damage) -> str:
    """`store.save()` by a writer that damages the segment it writes; the sha256 of what it wrote."""
    real, decode = search_segments.encode_segment, search_segments.decode_segment
    with monkeypatch.context() as patched:
        patched.setattr(search_segments, "encode_segment", lambda docs, writer: damage(real(docs, writer)))
        # the writer caches what it wrote: one that cannot read back its own damage still commits it
        patched.setattr(search_segments, "decode_segment", lambda data: _lenient(decode, data))
        store.save()
    (sha,) = named(store, backend)
    return sha


def _lenient(decode, data: bytes):
    try:
        return decode(data)
    except ValueError:
        return decode(search_segments.encode_segment({}, "buggy"))


@pytest.fixture
def bird_store(local_backend, key):
    store = MemoryStore.create(key=key)
    for i in range(4):
        store.write_text(f"birds/{i}.md", f"heron egret {i} " + " ".join(f"marsh{j}" for j in range(30)))
    return store


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_search_reads_a_damaged_segments_files_and_the_next_save_drops_it(
    bird_store, local_backend, key, monkeypatch, caplog, damage
):
    damaged = buggy_save(bird_store, local_backend, monkeypatch, damage)
    birds = [f"birds/{i}.md" for i in range(4)]
    fresh = MemoryStore.get_or_create(key=key)
    with caplog.at_level(logging.WARNING, logger=search_segments.__name__):
        assert paths(fresh.search("heron marsh3", limit=10)) == birds  # from the files, never a ValueError
        assert paths(fresh.search("egret", limit=10)) == birds  # the corpus holds their docs now
    warned = [r.getMessage() for r in caplog.records if damaged in r.getMessage()]
    assert len(warned) == 1 and "malformed" in warned[0], warned
    fresh.write_text("birds/new.md", "a heron again")
    fresh.save()  # writes the docs it read from the files, and drops the damaged segment
    again = MemoryStore.get_or_create(key=key)
    assert damaged not in named(again, local_backend) and exact(again)
    assert indexed(again, local_backend) == file_shas(again)  # every file's doc, in segments that decode in full
    assert paths(again.search("heron")) == [*birds, "birds/new.md"]


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_save_that_merges_a_damaged_segment_commits_and_readers_read_its_files(
    bird_store, local_backend, key, monkeypatch, damage
):
    damaged = buggy_save(bird_store, local_backend, monkeypatch, damage)
    other = MemoryStore.get_or_create(key=key)  # never searched: its save's merge is what meets the damage
    # a save that merges (one at MAX_SEGMENTS, or one that removes a doc; decision 0146 lets the others wait)
    monkeypatch.setattr(search_segments, "_merge_waits", lambda *args: False)
    for i in range(4, 8):
        other.write_text(f"birds/{i}.md", f"heron plover {i} " + " ".join(f"marsh{j}" for j in range(30)))
    other.save()
    saved = MemoryStore.get_or_create(key=key)
    assert sorted(saved.list_paths()) == [f"birds/{i}.md" for i in range(8)]  # committed, whatever the index
    # dropped, and the index inexact: readers check it against the files
    assert damaged not in named(saved, local_backend) and not exact(saved)
    assert set(indexed(saved, local_backend)) == {f"birds/{i}.md" for i in range(4, 8)}  # this save's docs only
    assert paths(saved.search("heron")) == [f"birds/{i}.md" for i in range(8)]
    saved.write_text("birds/0.md", "no longer a heron, a crane")
    saved.save()
    again = MemoryStore.get_or_create(key=key)
    assert exact(again) and indexed(again, local_backend) == file_shas(again)
    assert paths(again.search("crane")) == ["birds/0.md"] and len(again.search("heron", limit=20)) == 8


def test_a_search_with_embed_and_a_filter_over_a_damaged_doc_row_reads_the_files(
    bird_store, local_backend, key, monkeypatch
):
    bird_store.write_text("birds/4.md", "a stork")  # a doc with no query term: `embed=` reads it as a candidate
    damaged = buggy_save(bird_store, local_backend, monkeypatch, DAMAGE["first doc row not JSON"])
    fresh = MemoryStore.get_or_create(key=key)
    hits = fresh.search("stork", prefix="birds", embed=lambda texts: [[1.0, float(len(t))] for t in texts])
    assert paths(hits) == [f"birds/{i}.md" for i in range(5)] and hits[0].path == "birds/4.md"
    fresh.write_text("birds/5.md", "an ibis")
    fresh.save()
    assert damaged not in named(MemoryStore.get_or_create(key=key), local_backend)
