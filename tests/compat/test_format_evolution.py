"""Journal objects evolve (docs/journal.md, "How the format evolves"): extensions this version does not know
are carried where it rewrites what they belong to, a newer major format is refused naming the version that
wrote it, a ``min_reader`` above ours reads but never writes; and the release before evolution refuses
what this version saved, clearly and without damage (the one-time cost, docs/decisions/0039)."""

from __future__ import annotations

import hashlib
import json
import pathlib
import time
import tomllib
from datetime import timedelta

import pytest

from backends import JOURNAL
from flyteplugins_memory import (
    READER_REVISION,
    ContentPurged,
    MemoryStore,
    MemoryStoreError,
    StoreFormatTooNew,
)
from flyteplugins_memory._base.version import PACKAGE_VERSION, SOURCE_VERSION, WRITER
from flyteplugins_memory._rules.layout import HEAD_NAME, checkpoint_name, log_name
from flyteplugins_memory._rules.markers import CONFIG_NAME, purge_marker_name
from flyteplugins_memory._rules.search_binary import MAGIC as SEGMENT_MAGIC
from flyteplugins_memory._rules.search_binary import read_header
from released import BEFORE_EVOLUTION, released_source, result_of, run_released, start_released
from repo import REPO

FUTURE = "flyteplugins-memory 9.1.0"


def load(backend, key: str, name: str) -> dict:
    """A journal object, read straight from storage."""
    backend.fs.invalidate_cache()
    return json.loads(backend.fs.cat_file(backend.location(key, name)))


def put(backend, key: str, name: str, doc: dict) -> None:
    backend.put(key, name, json.dumps(doc).encode())


def saved_store(key: str) -> MemoryStore:
    """A store at commit 2: a.txt, b.txt and one message."""
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "a")
    store.write_text("b.txt", "b")
    store.append({"role": "user", "content": "hello"})
    store.save()
    return store


# -- extensions are carried -------------------------------------------------------------------------------


def test_extensions_of_a_checkpoint_survive_saves_and_the_next_checkpoint(durable_backend, key):
    saved_store(key).compact()  # checkpoint 2, named by the head
    checkpoint = load(durable_backend, key, checkpoint_name(2))
    checkpoint["ext"] = {"future": {"index": [1, 2, 3]}}
    checkpoint["min_reader"] = READER_REVISION  # a revision we know: allowed, and carried too
    checkpoint["files"]["b.txt"]["ext"] = {"tag": "kept while b.txt is unchanged"}
    checkpoint["files"]["a.txt"]["ext"] = {"tag": "gone when a.txt is rewritten"}
    put(durable_backend, key, checkpoint_name(2), checkpoint)
    head = load(durable_backend, key, HEAD_NAME)
    put(durable_backend, key, HEAD_NAME, {**head, "ext": {"hint": True}})

    store = MemoryStore.get_or_create(key=key)
    assert store.read_text("b.txt") == "b" and store.messages == [{"role": "user", "content": "hello"}]
    store.write_text("a.txt", "a2")
    store.save()

    record = load(durable_backend, key, log_name(3))
    assert without_search(record["ext"]) == without_search(checkpoint["ext"])
    assert record["min_reader"] == READER_REVISION
    assert record["writer"] == WRITER and record["format"] == 1
    assert "ext" not in record["delta"]["files"]["a.txt"]  # rewritten by us: its extension described the old one
    store.compact()
    folded = load(durable_backend, key, checkpoint_name(3))
    assert without_search(folded["ext"]) == without_search(checkpoint["ext"])
    assert folded["min_reader"] == READER_REVISION
    assert folded["files"]["b.txt"]["ext"] == {"tag": "kept while b.txt is unchanged"}
    assert "ext" not in folded["files"]["a.txt"]
    # a hint, rewritten blindly: another writer's extension is not carried (documented); only this version's
    # own open hint is there (decision 0147)
    assert set(load(durable_backend, key, HEAD_NAME).get("ext", {})) == {"open"}


def test_extensions_of_a_record_survive_a_save_by_another_handle(durable_backend, key):
    saved_store(key)
    record = load(durable_backend, key, log_name(2))
    record["ext"] = {"future": "store-level"}
    record["delta"]["files"]["b.txt"]["ext"] = {"future": "per-file"}
    record["info"]["ext"] = {"future": "per-commit"}
    put(durable_backend, key, log_name(2), record)

    store = MemoryStore.get_or_create(key=key)
    assert store.read_text("a.txt") == "a" and store.log()[0].seq == 2
    store.write_text("c.txt", "c")
    store.save()

    newest = load(durable_backend, key, log_name(3))
    assert without_search(newest["ext"]) == {"future": "store-level"}  # carried beside this version's index
    assert newest["delta"]["files"]["b.txt"]["ext"] == {"future": "per-file"}  # unchanged: kept
    assert "ext" not in newest["info"]  # commit info describes its own commit only
    assert MemoryStore.get_or_create(key=key).list_paths() == ["a.txt", "b.txt", "c.txt"]


def test_extensions_of_the_settings_are_kept_when_the_window_changes(durable_backend, key):
    store = saved_store(key)
    store.set_gc_window(timedelta(hours=2))
    config = load(durable_backend, key, CONFIG_NAME)
    put(durable_backend, key, CONFIG_NAME, {**config, "ext": {"policy": "future"}, "surprise": 1})
    store.set_gc_window(timedelta(hours=3))
    written = load(durable_backend, key, CONFIG_NAME)
    assert written["ext"] == {"policy": "future"} and written["gc_window_seconds"] == 3 * 3600
    assert written["writer"] == WRITER
    assert written["surprise"] == 1  # a newer version's setting survives an older writer's window change
    assert MemoryStore.get_or_create(key=key).gc(window=None) is not None  # and is read leniently


def test_a_purge_marker_with_extensions_still_says_purged(durable_backend, key):
    saved_store(key)
    stale = MemoryStore.get_or_create(key=key)  # names b.txt's content, has not read it
    MemoryStore.get_or_create(key=key).purge("b.txt")
    name = purge_marker_name(hashlib.sha256(b"b").hexdigest())
    marker = load(durable_backend, key, name)
    assert marker["writer"] == WRITER and marker["format"] == 1
    put(durable_backend, key, name, {**marker, "ext": {"future": 1}, "surprise": True})
    with pytest.raises(ContentPurged):
        stale.read_text("b.txt")


# -- a newer major is refused -----------------------------------------------------------------------------


def _newer(backend, key: str, what: str, writer: str | None) -> None:
    """Make the newest `what` (record, checkpoint, head or settings) one of a newer major."""
    named = {"writer": writer} if writer is not None else {}
    if what == "record":
        put(backend, key, log_name(3), {"format": 2, **named, "seq": 3, "changes": ["anything at all"]})
    elif what == "checkpoint":
        put(backend, key, checkpoint_name(2), {"format": 3, **named, "seq": 2, "files": "elsewhere"})
    else:
        put(backend, key, HEAD_NAME, {"format": 2, **named, "newest": 2})


@pytest.mark.parametrize("what", ["record", "checkpoint", "head"])
def test_a_newer_major_is_refused_on_open_naming_its_writer(durable_backend, key, what):
    saved_store(key).compact()
    _newer(durable_backend, key, what, FUTURE)
    before = durable_backend.stored(key)
    with pytest.raises(StoreFormatTooNew) as refused:
        MemoryStore.get_or_create(key=key)
    message = str(refused.value)
    assert FUTURE in message and refused.value.writer == FUTURE and "format" in message
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, MemoryStoreError)
    assert durable_backend.stored(key) == before


def test_a_newer_major_that_does_not_name_its_writer_says_so(local_backend, key):
    saved_store(key)
    _newer(local_backend, key, "record", writer=None)
    with pytest.raises(StoreFormatTooNew, match="does not say") as refused:
        MemoryStore.get_or_create(key=key)
    assert refused.value.writer == ""


def test_a_handle_meeting_a_newer_major_commit_stops_before_committing(durable_backend, key):
    saved_store(key)
    handle = MemoryStore.get_or_create(key=key)
    _newer(durable_backend, key, "record", FUTURE)
    handle.write_text("h.txt", "h")
    with pytest.raises(StoreFormatTooNew, match=FUTURE):
        handle.save()
    assert f"{JOURNAL}/log/{4:020d}.json" not in durable_backend.journal(key)
    assert handle.has_unsaved_changes()


# -- a higher min_reader reads, never writes --------------------------------------------------------------


def _guard(backend, key: str, seq: int) -> None:
    """Mark commit `seq` as holding a feature of a later revision than ours."""
    record = load(backend, key, log_name(seq))
    put(backend, key, log_name(seq), {**record, "min_reader": READER_REVISION + 1, "writer": FUTURE, "ext": {"x": 1}})


def test_a_higher_min_reader_reads_but_every_write_is_refused(durable_backend, key):
    saved_store(key)
    _guard(durable_backend, key, 2)
    store = MemoryStore.get_or_create(key=key)
    assert store.read_text("a.txt") == "a" and store.list_paths() == ["a.txt", "b.txt"]
    assert store.messages == [{"role": "user", "content": "hello"}] and store.log()[0].seq == 2
    before = durable_backend.stored(key)

    clean = MemoryStore.get_or_create(key=key)
    with pytest.raises(StoreFormatTooNew, match=FUTURE):
        clean.compact()
    store.write_text("x.txt", "x")
    refusals = [store.save, store.gc, lambda: store.gc(window=timedelta(0)), lambda: store.purge("a.txt")]
    refusals.append(lambda: store.set_gc_window(timedelta(hours=1)))  # the window decides what gc removes
    for operation in refusals:
        with pytest.raises(StoreFormatTooNew, match=FUTURE) as refused:
            operation()
        assert f"revision {READER_REVISION + 1}" in str(refused.value)
        assert durable_backend.stored(key) == before, "a refused write must write nothing"
    assert store.has_unsaved_changes() and store.read_text("x.txt") == "x"


def test_a_save_meeting_a_commit_with_a_higher_min_reader_does_not_commit(durable_backend, key):
    saved_store(key)
    handle = MemoryStore.get_or_create(key=key)
    other = MemoryStore.get_or_create(key=key)
    other.write_text("o.txt", "o")
    other.save()
    _guard(durable_backend, key, 3)
    handle.write_text("h.txt", "h")
    with pytest.raises(StoreFormatTooNew, match=FUTURE):
        handle.save()
    assert f"{JOURNAL}/log/{4:020d}.json" not in durable_backend.journal(key)
    assert handle.has_unsaved_changes()


def test_settings_with_a_higher_min_reader_are_not_changed(local_backend, key):
    store = saved_store(key)
    store.set_gc_window(timedelta(hours=2))
    config = load(local_backend, key, CONFIG_NAME)
    put(local_backend, key, CONFIG_NAME, {**config, "min_reader": READER_REVISION + 1, "writer": FUTURE})
    with pytest.raises(StoreFormatTooNew, match=FUTURE):
        store.set_gc_window(timedelta(hours=5))
    assert load(local_backend, key, CONFIG_NAME)["gc_window_seconds"] == 2 * 3600


# -- what this version writes ------------------------------------------------------------------------------


def test_every_object_this_version_writes_names_it(local_backend, key):
    store = saved_store(key)
    store.set_gc_window(timedelta(hours=1))
    store.compact()
    store.purge("b.txt")
    objects = local_backend.journal(key)
    segments = {n: d for n, d in objects.items() if d.startswith(SEGMENT_MAGIC)}  # binary: docs/decisions/0155
    documents = {n: json.loads(d) for n, d in objects.items() if n.endswith(".json") and n not in segments}
    assert documents and all(doc["writer"] == WRITER and doc["format"] == 1 for doc in documents.values())
    assert segments and all("/search/" in n for n in segments)
    headers = [read_header(d)[0] for d in segments.values()]
    assert all(h["writer"] == WRITER and h["format"] == 2 for h in headers)
    (fence,) = [json.loads(d) for d in local_backend.old_journal(key).values()]
    assert fence["writer"] == WRITER and fence["format"] == 2  # what earlier versions refuse
    store.gc(window=timedelta(0))
    tombstones = {d for n, d in local_backend.journal(key).items() if "/log/" in n and len(d) < 64}
    assert tombstones == {b'{"collected":true}'}  # frozen: listings tell it from a record by size


def test_the_version_is_the_one_in_pyproject():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == SOURCE_VERSION
    assert f"flyteplugins-memory {PACKAGE_VERSION}" == WRITER


# -- the release before evolution ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> pathlib.Path:
    return released_source(BEFORE_EVOLUTION, tmp_path_factory.mktemp("released"))


def child_config(backend, key: str, request, **more) -> dict:
    endpoint = request.getfixturevalue("moto_endpoint") if backend.name == "s3" else None
    return {"key": key, "raw": backend.raw_data_path, "endpoint": endpoint, **more}


def test_a_store_the_release_before_wrote_opens_saves_and_logs_here(durable_backend, key, released, request):
    run_released(released, "write", child_config(durable_backend, key, request, writes={"r1.txt": "1", "r2.txt": "2"}))
    store = MemoryStore.get_or_create(key=key)
    assert {p: store.read_text(p) for p in store.list_paths()} == {"r1.txt": "1", "r2.txt": "2"}
    older = store.log()
    assert [c.seq for c in older] == [3, 2, 1] and all(c.id for c in older)
    assert {(c.kind, c.time, c.actor, c.wrote) for c in older} == {("", "", "", ())}  # no info: empty fields

    store.write_text("r1.txt", "ours", actor="us")
    store.save()
    newest = store.log()
    assert newest[0].actor == "us" and newest[0].wrote == ("r1.txt",) and newest[1:] == older
    assert store.log(path="r1.txt") == newest[:1]  # its earlier commits name no paths


def test_the_release_before_refuses_what_this_version_saved_clearly_and_changes_nothing(
    durable_backend, key, released, request
):
    saved_store(key)
    before = durable_backend.stored(key)
    seen = run_released(released, "read", child_config(durable_backend, key, request))
    assert seen["error"] == "CorruptStore" and WRITER in seen["message"]
    assert durable_backend.stored(key) == before


def test_a_handle_of_the_release_before_cannot_commit_after_this_version(
    durable_backend, key, released, request, tmp_path
):
    run_released(released, "write", child_config(durable_backend, key, request, writes={"r.txt": "r"}))
    ready, go = tmp_path / "ready", tmp_path / "go"
    child = start_released(
        released, "save_after", child_config(durable_backend, key, request, ready=str(ready), go=str(go))
    )
    while not ready.exists():
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    ours = MemoryStore.get_or_create(key=key)
    ours.write_text("ours.txt", "ours")
    ours.save()
    go.touch()
    seen = result_of(child)
    assert seen["error"] == "CorruptStore" and WRITER in seen["message"]
    log = [n for n in durable_backend.journal(key) if "/log/" in n]
    assert log == [f"{JOURNAL}/log/{s:020d}.json" for s in (1, 2, 3)]  # create, r.txt, ours: nothing after
    assert "released.txt" not in durable_backend.upstream_view(key)
    assert MemoryStore.get_or_create(key=key).list_paths() == ["ours.txt", "r.txt"]


def without_search(ext: dict) -> dict:
    """A store-level ``ext`` without this version's search index (``ext["search"]``, updated by each save)."""
    return {k: v for k, v in ext.items() if k != "search"}
