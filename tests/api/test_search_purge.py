"""Search after a purge or gc()'s expiry (DESIGN §5b: purge x search, ttl x search): their commit merges the
whole index into one segment without the docs they delete, so the index it leaves names only segments that
stay in storage. A handle opened afterwards searches without a warning and without reading files again, also
when another live path holds the purged path's bytes (its doc stays; the purged path's labels do not)
(decision 0175)."""

from __future__ import annotations

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._rules.layout import search_segment_name
from flyteplugins_memory._rules.search_index import read_ext

SEGMENTS = "meta/.journal/search/"


def stored_segments(backend, key: str) -> dict[str, bytes]:
    return {n: d for n, d in backend.journal(key).items() if n.startswith(SEGMENTS)}


def named_segments(store: MemoryStore) -> list[str]:
    """The object names of the segments the handle's state names (``search/<sha[:2]>/<sha>.json``)."""
    sx = read_ext(store._checkout.working_copy.base.ext)
    assert sx is not None
    return [search_segment_name(r.sha256) for r in sx.segments]


def tiered(store: MemoryStore, secret: str, *, copy_to: str | None = None) -> None:
    """A large first save holding `secret` at notes/b.md (and at `copy_to`), then small saves: an index of
    several segments, the purged doc in the oldest, which the merges of later saves leave alone."""
    store.write_text("notes/b.md", secret, metadata={"tag": "labelofb"})
    if copy_to:
        store.write_text(copy_to, secret, metadata={"tag": "labelofcopy"})
    for i in range(40):
        store.write_text(f"notes/f{i}.md", f"flights number {i} to Oslo " + "padding " * 40)
    store.save()
    for j in range(6):
        store.write_text(f"later/{j}.md", f"trains note {j}")
        store.save()


def paths(hits) -> list[str]:
    return [h.path for h in hits]


def search_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Search segment" in r.getMessage() or "index" in r.getMessage()]


def test_a_handle_opened_after_a_purge_finds_every_segment_the_index_names(durable_backend, key, caplog):
    store = MemoryStore.create(key=key)
    tiered(store, "the vault code is quixotrebbly")
    assert len(named_segments(MemoryStore.get_or_create(key=key))) > 1  # the purged doc is not in the newest

    store.purge("notes/b.md")

    fresh = MemoryStore.get_or_create(key=key)
    named = named_segments(fresh)
    stored = stored_segments(durable_backend, key)
    assert len(named) == 1 and set(named) <= set(stored)
    assert not [n for n, d in stored.items() if b"quixotrebbly" in d or b"labelofb" in d or b"notes/b.md" in d]
    with caplog.at_level("INFO", logger="flyteplugins_memory"):
        assert len(fresh.search("flight", limit=100)) == 40
        assert sorted(h.path for h in fresh.search("trains")) == [f"later/{j}.md" for j in range(6)]
        assert fresh.search("quixotrebbly") == []
    assert search_warnings(caplog) == []


@pytest.mark.parametrize("purged", ["notes/b.md", "archive/b.md"])
def test_a_purge_keeps_the_segment_of_a_live_path_holding_the_same_bytes(durable_backend, key, caplog, purged):
    store = MemoryStore.create(key=key)
    tiered(store, "the vault code is quixotrebbly", copy_to="archive/b.md")
    kept = "archive/b.md" if purged == "notes/b.md" else "notes/b.md"
    own_label, kept_label = (b"labelofb", b"labelofcopy") if purged == "notes/b.md" else (b"labelofcopy", b"labelofb")

    result = store.purge(purged)
    assert result.kept_shas  # the content stays: `kept` holds it

    fresh = MemoryStore.get_or_create(key=key)
    stored = stored_segments(durable_backend, key)
    named = named_segments(fresh)
    assert set(named) <= set(stored)  # the newest index stays whole
    assert not [n for n, d in stored.items() if own_label in d or purged.encode() in d]  # no label, no row left
    assert [n for n, d in stored.items() if kept_label in d]  # the live copy's doc and labels stay
    with caplog.at_level("INFO", logger="flyteplugins_memory"):
        hits = fresh.search("quixotrebbly")
        assert [h.path for h in hits] == [kept] and hits[0].meta.metadata["tag"] == kept_label.decode()
    assert search_warnings(caplog) == []


def test_an_older_doc_of_the_purged_path_leaves_with_its_segment(durable_backend, key):
    """The path's earlier content, kept only in an older segment (its doc overridden by a newer one), leaves
    storage too, and the merged index left after the purge still names only segments that stay."""
    store = MemoryStore.create(key=key)
    store.write_text("notes/b.md", "first draft says xenoglossy")
    for i in range(30):
        store.write_text(f"notes/f{i}.md", "padding " * 40)
    store.save()
    store.write_text("notes/b.md", "second draft")
    store.save()
    store.purge("notes/b.md")
    stored = stored_segments(durable_backend, key)
    assert not [n for n, d in stored.items() if b"xenoglossy" in d or b"second draft" in d]
    fresh = MemoryStore.get_or_create(key=key)
    assert set(named_segments(fresh)) <= set(stored)
    assert fresh.search("xenoglossy") == [] and len(fresh.search("padding", limit=100)) == 30


@pytest.mark.parametrize("copied", [False, True])
def test_a_handle_opened_after_gc_expired_a_file_finds_every_segment_the_index_names(
    local_backend, key, caplog, monkeypatch, copied
):
    """gc()'s expiry commit merges the whole index too: the segment that held the expired doc goes, and the
    index it leaves names only segments that stay (decision 0175)."""
    import time
    from datetime import timedelta

    from flyteplugins_memory._journal import gc as _gc

    store = MemoryStore.create(key=key)
    store.write_text("tmp.md", "ephemeral wombatine", ttl=timedelta(hours=1), metadata={"tag": "labeloftmp"})
    if copied:  # a live path holds the same bytes: only the expired path's labels must leave
        store.write_text("copy.md", "ephemeral wombatine")
    for i in range(30):
        store.write_text(f"f{i}.md", "padding " * 40)
    store.save()
    for j in range(4):
        store.write_text(f"later/{j}.md", f"trains note {j}")
        store.save()
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * 3600)  # the ttl ran out
    assert store.gc(window=timedelta(0)).expired == ("tmp.md",)

    fresh = MemoryStore.get_or_create(key=key)
    stored = stored_segments(local_backend, key)
    assert set(named_segments(fresh)) <= set(stored)
    # its labels leave, and its text unless the copy holds it (a binary segment is read for the labels, not
    # removed whole as unparseable JSON)
    objects = local_backend.objects(key).items()
    assert not [n for n, d in objects if b"labeloftmp" in d or (b"wombatine" in d and not copied)]
    with caplog.at_level("INFO", logger="flyteplugins_memory"):
        assert paths(fresh.search("wombatine")) == (["copy.md"] if copied else [])
        assert len(fresh.search("padding", limit=100)) == 30
    assert search_warnings(caplog) == []
