"""The concurrent bulk paths (read_many, write_many, remove_all) under injected faults: the fault injector is
an async filesystem, so the store fans its bulk calls out through it as it does on s3fs, and each object
is retried on its own."""

from __future__ import annotations

from datetime import timedelta

import pytest

from faults import Faults, FaultyFileSystem, at_random
from flyteplugins_memory import MemoryStore, RetryPolicy, set_retry_policy
from flyteplugins_memory.storage import _fsspec as _storage

TRANSIENT = ("fail", "timeout", "lost_reply")
FILES = {f"bulk/{i:03d}.txt": f"content {i}" for i in range(24)}


@pytest.fixture(params=["local_backend", "memory_backend", "s3_backend"])
def faulty(request, monkeypatch):
    """A backend whose every storage call goes through one `Faults` plan (disarmed until a test arms it)."""
    faults = Faults()
    real = _storage.filesystem_for
    monkeypatch.setattr(_storage, "filesystem_for", lambda uri: FaultyFileSystem(real(uri), faults))
    previous = set_retry_policy(RetryPolicy(attempts=8, initial_delay=0.0, max_delay=0.0, jitter=False))
    yield request.getfixturevalue(request.param), faults
    set_retry_policy(previous)


def _saved(key: str) -> MemoryStore:
    store = MemoryStore.create(key=key)
    for path, text in FILES.items():
        store.write_text(path, text)
    store.save()
    return store


def test_a_bulk_save_under_faults_lands_every_object_once(faulty, key):
    backend, faults = faulty
    store = MemoryStore.create(key=key)
    for path, text in FILES.items():
        store.write_text(path, text)
    faults.arm(at_random(seed=1, rate=0.2, kinds=TRANSIENT))
    store.save()
    faults.clear()
    assert faults.peak > 1, "the uploads ran one at a time"
    assert any(op == "write" for _, op, _, _ in faults.injected)
    view = backend.upstream_view(key)
    assert {p: view[p].decode() for p in FILES} == FILES
    reopened = MemoryStore.get_or_create(key=key)
    assert {p: reopened.read_text(p) for p in reopened.list_paths()} == FILES
    assert len(reopened.audit_tail(0)) == len(FILES)  # committed exactly once


def test_prefetch_under_faults_reads_every_file_whole(faulty, key):
    _, faults = faulty
    _saved(key)
    store = MemoryStore.get_or_create(key=key)
    faults.arm(at_random(seed=2, rate=0.2, kinds=TRANSIENT))
    assert store.prefetch("bulk") == len(FILES)
    faults.clear()
    assert faults.peak > 1, "the reads ran one at a time"
    assert any(op == "read" for _, op, _, _ in faults.injected)
    assert {p: (store.root / p).read_text() for p in FILES} == FILES


def test_gc_under_faults_removes_what_it_reports(faulty, key):
    backend, faults = faulty
    store = _saved(key)
    for i in range(2):
        for path in FILES:
            store.write_text(path, f"rewrite {i} of {path}")
        store.save()
    before = backend.journal(key)
    faults.arm(at_random(seed=3, rate=0.2, kinds=TRANSIENT))
    result = store.gc(window=timedelta(0))
    faults.clear()
    assert faults.peak > 1, "the deletes ran one at a time"
    assert any(op == "delete" for _, op, _, _ in faults.injected)
    after = backend.journal(key)
    assert result.objects > len(FILES) and set(after) < set(before)
    assert not any(b"content " in data for data in after.values())  # overwritten contents are gone
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("bulk/007.txt") == "rewrite 1 of bulk/007.txt"
