"""Item 12 of issue 8, gc(): what no committed state inside the retention window needs leaves storage;
the newest state never loses anything; handles pinned to collected state get `StateCollected`."""

from __future__ import annotations

import math
import time
from datetime import timedelta

import pytest

from flyteplugins_memory import GcResult, MemoryStore, StateCollected
from flyteplugins_memory._journal import commit as _commit
from flyteplugins_memory._journal import gc as _gc
from flyteplugins_memory._rules.codecs import sha256_bytes
from helpers import commit, saved


def _content(i: int) -> str:
    return f"<<content number {i:04d}>>"


def _history(store: MemoryStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        store.write_text("doc.txt", _content(i))
        store.append({"role": "user", "content": str(i)})
        store.save()


def _view(store: MemoryStore) -> dict:
    return {
        "files": {p: store.read_text(p) for p in store.list_paths()},
        "messages": store.messages,
        "audit": store.audit_tail(0),
    }


def _anywhere(backend, key: str, needle: bytes) -> list[str]:
    """Every object of the store (prefix and journal) that holds `needle`."""
    return [n for n, d in backend.stored(key).items() if needle in d]


def test_gc_with_an_empty_window_keeps_only_the_newest_state(backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("stays.txt", "stays")
    store.save()
    pinned = store._serialize()
    _history(store, 1)
    early = MemoryStore.get_or_create(key=key)  # a handle standing on the commit of content 0
    _history(store, 14, start=1)
    before = _view(MemoryStore.get_or_create(key=key))
    objects_before = backend.journal(key)

    result = store.gc(window=timedelta(0))

    assert isinstance(result, GcResult) and result.objects > 0 and result.bytes > 0
    assert list(result.commits) == list(range(1, 17))  # every commit but the newest (17)
    assert len(backend.journal(key)) < len(objects_before)
    assert sum(map(len, backend.journal(key).values())) < sum(map(len, objects_before.values())) / 2
    assert _view(MemoryStore.get_or_create(key=key)) == before
    for i in range(14):  # overwritten contents are gone from storage
        assert not _anywhere(backend, key, _content(i).encode()), i
    assert _anywhere(backend, key, _content(14).encode())
    with pytest.raises(StateCollected):
        MemoryStore._deserialize(pinned).list_paths()
    assert early.read_text("stays.txt") == "stays"  # still stored: the newest state holds it
    with pytest.raises(StateCollected):
        early.read_text("doc.txt")  # content 0: its state is gone, and so are its bytes
    store.write_text("after.txt", "after")
    store.save()
    assert MemoryStore.get_or_create(key=key).read_text("after.txt") == "after"


def _next_whole_second() -> float:
    """Wait for the next whole second of the clock storage stamps objects with, and return it: what was
    written before is stamped earlier, what is written after is stamped at it or later, even where
    timestamps are cut to whole seconds (S3), however slowly the writes after it run."""
    boundary = float(math.floor(time.time()) + 1)
    while time.time() < boundary:
        time.sleep(boundary - time.time())
    return boundary


def test_gc_keeps_what_the_window_needs(backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    _history(store, 3)
    too_old = store._serialize()
    _history(store, 3, start=3)
    at_window_start = store._serialize()
    assert store.gc() == GcResult()  # everything is younger than the default 24 hours
    window_start = _next_whole_second()
    _history(store, 3, start=6)
    # gc's now is fixed, so the window begins exactly between the two batches, whatever the load
    monkeypatch.setattr(_gc, "clock", lambda: window_start + 2)
    result = store.gc(window=timedelta(seconds=2))
    assert list(result.commits) == [1, 2, 3, 4, 5, 6]
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("doc.txt") == _content(8)
    # the state that was newest when the window began is kept, with what it needs
    assert MemoryStore._deserialize(at_window_start).read_text("doc.txt") == _content(5)
    with pytest.raises(StateCollected):
        MemoryStore._deserialize(too_old).read_text("doc.txt")
    assert not _anywhere(backend, key, _content(1).encode())
    assert _anywhere(backend, key, _content(5).encode()) and _anywhere(backend, key, _content(6).encode())


def test_orphan_blobs_go_once_older_than_the_window(backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "kept")
    store.save()

    async def die(*args, **kwargs):
        raise RuntimeError("the process died before its commit point")

    dying = MemoryStore.get_or_create(key=key)
    dying.write_text("a.txt", "orphaned bytes")  # a rewrite: a new path would go in place, not to a blob
    with monkeypatch.context() as patch:
        patch.setattr(_commit, "_commit", die)
        with pytest.raises(RuntimeError):
            dying.save()
    orphan = f"meta/.journal/blobs/{sha256_bytes(b'orphaned bytes')[:2]}/{sha256_bytes(b'orphaned bytes')}"
    assert orphan in backend.journal(key)

    assert store.gc(window=timedelta(hours=1)).objects == 0  # young: maybe a save in flight
    assert orphan in backend.journal(key)
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * 3600)
    result = store.gc(window=timedelta(hours=1))
    assert orphan not in backend.journal(key) and result.objects >= 1
    assert MemoryStore.get_or_create(key=key).read_text("a.txt") == "kept"


def _left_behind(key: str) -> tuple[MemoryStore, MemoryStore]:
    """A writer that committed x.txt, then y0..y3.txt one save each, and a handle opened after x.txt
    that has not looked since."""
    writer = saved(key, {"x.txt": "x"})
    behind = MemoryStore.get_or_create(key=key)
    for i in range(4):
        commit(writer, {f"y{i}.txt": str(i)})
    return writer, behind


def test_a_stale_handle_commits_after_gc_without_forking(backend, key):
    writer, stale = _left_behind(key)
    writer.gc(window=timedelta(0))  # the slot after `stale`'s base is collected
    stale.write_text("z.txt", "from the stale handle")
    stale.save()
    final = MemoryStore.get_or_create(key=key)
    assert final.list_paths() == ["x.txt", "y0.txt", "y1.txt", "y2.txt", "y3.txt", "z.txt"]


def test_a_long_idle_handle_checks_the_head_before_committing(backend, key, monkeypatch):
    """Collected slots older than an hour are deleted, not kept as tombstones; a handle that has not looked
    at the store for that long re-reads the head before committing, so it cannot commit into one."""
    writer, idle = _left_behind(key)
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * 3600)
    writer.gc(window=timedelta(0))
    assert not any("/log/00000000000000000003" in n for n in backend.journal(key))  # deleted outright
    idle._checkout.working_copy.base.observed_at -= 2 * 3600  # as if it had been idle for two hours
    idle.write_text("z.txt", "z")
    idle.save()
    assert MemoryStore.get_or_create(key=key).list_paths() == ["x.txt", "y0.txt", "y1.txt", "y2.txt", "y3.txt", "z.txt"]


def test_the_store_window_is_used_by_saves_at_checkpoints(backend, key, monkeypatch):
    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 4)
    store = MemoryStore.get_or_create(key=key)
    store.set_gc_window(timedelta(0))
    assert MemoryStore.get_or_create(key=key).gc().objects == 0  # the window is read from the store
    _history(store, 24)
    journal = backend.journal(key)
    blobs = [n for n in journal if "/blobs/" in n]
    checkpoints = [n for n in journal if "/checkpoints/" in n]
    assert len(blobs) <= 5 and len(checkpoints) <= 2, (blobs, checkpoints)
    assert _view(MemoryStore.get_or_create(key=key))["files"] == {"doc.txt": _content(23)}
    assert len(MemoryStore.get_or_create(key=key).audit_tail(0)) == 24
    store.set_gc_window(None)
    assert 'gc_window_seconds":null' in backend.journal(key)["meta/.journal/config.json"].decode()


def test_gc_costs_what_it_removes_not_the_history(backend, key, io_counter):
    costs = []
    for name, history in ((key + "-short", 5), (key + "-long", 30)):
        store = MemoryStore.get_or_create(key=name)
        _history(store, history)
        store.gc(window=timedelta(0))
        _history(store, 5, start=history)
        io_counter.reset()
        result = store.gc(window=timedelta(0))
        costs.append((io_counter.count(), len(result.commits)))
    assert costs[0] == costs[1], costs  # the same five commits removed, whatever came before


def test_gc_of_a_store_that_was_never_saved_removes_nothing(backend, key):
    assert MemoryStore(key=key, remote_path=backend.store_uri(key)).gc() == GcResult()


def test_a_task_input_of_the_newest_commit_survives_gc(backend, key, monkeypatch):
    """The newest commit may be read from its checkpoint or, pinned, from its record and the checkpoint
    that record is built on: gc keeps both."""
    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 3)
    store = MemoryStore.get_or_create(key=key)
    _history(store, 8)
    store.compact()  # the newest commit now also has its own checkpoint
    pinned = store._serialize()
    store.gc(window=timedelta(0))
    received = MemoryStore._deserialize(pinned)
    assert received.read_text("doc.txt") == _content(7) and len(received.messages) == 8
    assert MemoryStore.get_or_create(key=key).read_text("doc.txt") == _content(7)
