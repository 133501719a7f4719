"""The data map (`_rules.data_map`) knows every object a store keeps: a scenario that uses every feature, then a
listing of everything under the storage root, each object classified. A feature that stores a new kind of
object without registering it fails here. docs/data-map.md is the map rendered."""

from __future__ import annotations

import pathlib
import re
import time
from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._journal import gc as _gc
from flyteplugins_memory._journal.retention import Inventory
from flyteplugins_memory._rules.data_map import (
    OBJECTS,
    PLACES,
    Area,
    Carries,
    UnknownStoredObject,
    classify_object,
    journal_kind,
    render_markdown,
)
from flyteplugins_memory._rules.layout import JOURNAL_DIR
from flyteplugins_memory.storage._fsspec import Listed
from repo import REPO

DOCS = REPO / "docs" / "data-map.md"
HOURS = 3600.0


def every_feature(key: str, tmp_path: pathlib.Path, monkeypatch, *, checkpoint: bool) -> MemoryStore:
    """One store through every feature that stores something: files of every type with labels and ttls,
    versions, the transcript and its compaction, record logs and sessions, proposals, read-only prefixes,
    retention and the gc window, search, restore, purge, expiry by gc, export and import, a deleted store."""
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.append({"role": "user", "content": "hello"})
    store.write_text("notes/a.md", "alpha one", metadata={"kind": "note"}, ttl=timedelta(hours=1))
    store.write_text("notes/b.md", "beta", metadata={"kind": "note"})
    store.write_bytes("img/c.bin", b"\x00\x01\x02")
    store.write_json("j.json", {"x": 1})
    store.records("logs/events").append({"event": 1})
    store.session("chat").append({"role": "user", "content": "in a session"})
    store.save(actor="writer", reason="first")
    for i in range(200 if checkpoint else 0):  # a record past 32 KiB: the save writes a checkpoint, audit segment
        store.write_text(f"bulk/{i:03}.md", f"bulk {i}", metadata={"n": i})
    store.save()
    draft = store.propose("memory/tea.md", "likes tea", actor="agent", reason="said so", metadata={"topic": "diet"})
    store.save()
    store.accept(draft.id, actor="reviewer", reason="checked")
    store.propose("memory/coffee.md", "likes coffee", actor="agent", reason="said so")
    store.write_text("notes/b.md", "beta two")
    store.save()
    store.restore("notes/b.md", store.history("notes/b.md")[-1].version_id, actor="human", reason="undo")
    for i in range(4):
        store.append({"role": "assistant", "content": f"reply {i}"})
    store.save()
    assert store.search("beta")
    store.compact_transcript(lambda old: "a summary", keep_last=2)
    trusted = MemoryStore.open(key=key, trusted=True)
    trusted.set_read_only_prefixes(["memory/"], actor="ops", reason="lock")
    trusted.set_retention(keep_last=3, actor="ops", reason="bound")
    trusted.set_gc_window(timedelta(hours=2))
    store.refresh()
    store.purge("img/c.bin", actor="ops", reason="redact")
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * HOURS)
    store.gc()
    monkeypatch.undo()
    store.export(str(tmp_path / "export.tar.gz"))
    MemoryStore.import_store(str(tmp_path / "export.tar.gz"), key=key + "-copy", actor="ops", reason="copy")
    doomed = MemoryStore.get_or_create(key=key + "-gone")
    doomed.write_text("x.md", "soon gone")
    doomed.save()
    MemoryStore.delete_store(key=key + "-gone", actor="ops", reason="user asked")
    return store


#: a stored object's name relative to its area: the journal (of any generation) or the store prefix
JOURNAL_OBJECT = re.compile(r"\.journal/(?:\.journal/g[0-9]+/)?v0/[^/]+/[^/]+/[^/]+/[^/]+/(.+)")
STORE_OBJECT = re.compile(r"v0/[^/]+/[^/]+/[^/]+/[^/]+/(.+)")


def everything_stored(backend) -> list[tuple[Area, str]]:
    """Every object under the tree of stores (every key, every generation, the journals beside them), read
    through the backend's own filesystem, with its area and name relative to it."""
    tree = backend.prefix("any").split("/v0/", 1)[0]
    backend.fs.invalidate_cache()
    found = []
    for path in backend.fs.find(tree):
        relative = path[len(tree) + 1 :]
        if journal := JOURNAL_OBJECT.fullmatch(relative):
            found.append((Area.JOURNAL, journal.group(1)))
        elif store := STORE_OBJECT.fullmatch(relative):
            found.append((Area.STORE, store.group(1)))
        else:
            raise AssertionError(f"{path} is neither in a store nor in a journal")
    return found


def test_every_stored_object_has_a_kind(durable_backend, key, tmp_path, monkeypatch):
    checkpoint = durable_backend.name == "local"  # the 200 writes that make one cost moto 8 s: local disk only
    every_feature(key, tmp_path, monkeypatch, checkpoint=checkpoint)
    again = MemoryStore.create(key=key + "-gone")  # a deleted key takes a new store
    again.write_text("y.md", "a new life", metadata={"n": 1})
    again.save()
    seen: dict[str, list[str]] = {}
    for area, name in everything_stored(durable_backend):
        seen.setdefault(classify_object(area, name).name, []).append(name)
    # the scenario reached the kinds it should; a kind no scenario reaches is still listed in the map
    reached = {"commit_record", "blob", "search_segment", "head", "messages", "sidecar", "version_snapshot"}
    reached |= {"record_segment", "file", "settings"}
    reached |= {"checkpoint", "audit_segment", "audit_log"} if checkpoint else set()
    assert reached <= set(seen), sorted(seen)


def test_gc_and_purge_sort_journal_objects_by_the_map():
    listing = {
        f"{JOURNAL_DIR}/log/{7:020d}.json": Listed(10, 1.0),
        f"{JOURNAL_DIR}/checkpoints/{5:020d}.json": Listed(10, 1.0),
        f"{JOURNAL_DIR}/audit/{5:020d}.jsonl": Listed(10, 1.0),
        f"{JOURNAL_DIR}/blobs/ab/{'ab' * 32}": Listed(10, 1.0),
        f"{JOURNAL_DIR}/parts/cd/{'cd' * 32}.json": Listed(10, 1.0),
        f"{JOURNAL_DIR}/search/ef/{'ef' * 32}.json": Listed(10, 1.0),
        f"{JOURNAL_DIR}/purged/01/{'01' * 32}.json": Listed(10, 1.0),
        f"{JOURNAL_DIR}/config.json": Listed(10, 1.0),
        f"{JOURNAL_DIR}/something-newer/x.json": Listed(10, 1.0),
    }
    inventory = Inventory.of(listing)
    assert list(inventory.records) == [7] and list(inventory.checkpoints) == [5] and list(inventory.segments) == [5]
    assert list(inventory.blobs) == ["ab" * 32] and list(inventory.parts) == ["cd" * 32]
    assert list(inventory.search) == ["ef" * 32] and list(inventory.markers) == ["01" * 32]
    assert journal_kind("something-newer/x.json") is None


@pytest.mark.parametrize(
    ("area", "name", "kind"),
    [
        (Area.STORE, "messages.json", "messages"),
        (Area.STORE, "audit/log.jsonl", "audit_log"),
        (Area.STORE, "meta/notes%2Fa.md.json", "sidecar"),
        (Area.STORE, "versions/notes%2Fa.md/2026-01-01T00-00-00+00-00_" + "a" * 64 + ".txt", "version_snapshot"),
        (Area.STORE, "meta/.journal/log/00000000000000000001.json", "old_journal"),
        (Area.STORE, "logs/ev/01795775534878175925-047609d99041.jsonl", "record_segment"),
        (Area.STORE, "notes/a.md", "file"),
        (Area.JOURNAL, "expiring/" + "0" * 32 + ".json", "pending_expiry"),
    ],
)
def test_classify(area, name, kind):
    assert classify_object(area, name).name == kind


def test_unknown_objects_are_refused():
    with pytest.raises(UnknownStoredObject):
        classify_object(Area.JOURNAL, "newfeature/x.json")
    with pytest.raises(UnknownStoredObject):
        classify_object(Area.STORE, "meta/a/b")


def test_every_place_that_holds_content_or_labels_says_how_purge_reaches_it():
    names = {k.name for k in OBJECTS}
    for place in PLACES:
        assert set(place.objects) <= names, place.name
        if place.carries & (Carries.CONTENT | Carries.LABELS | Carries.MESSAGES):
            assert place.purge and not place.purge.startswith("n/a"), place.name
    for kind in OBJECTS:
        if kind.carries & (Carries.CONTENT | Carries.LABELS):
            assert kind.purge and not kind.purge.startswith("n/a"), kind.name


def test_docs_show_the_map():
    assert DOCS.read_text() == render_markdown(), (
        "run: python -c 'from flyteplugins_memory._rules.data_map import *; ...'"
    )
