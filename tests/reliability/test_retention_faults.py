"""gc() under the retention policy and ttl, killed at every storage call it makes: the store still opens,
every live path reads, nothing a live state needs is lost, and a second gc finishes the job. Local disk
here; the walk over S3 (minutes on a busy machine) runs with ``make test-slow``."""

from __future__ import annotations

import time
from datetime import timedelta

import fsspec
import pytest

from faults import Faults, FaultyFileSystem, at_call
from flyteplugins_memory import UNVERIFIED_BACKENDS_ENV, MemoryStore, RetryPolicy, StorageError, set_retry_policy
from flyteplugins_memory._journal import gc as _gc
from flyteplugins_memory._journal.versions import version_order
from flyteplugins_memory._rules.layout import versions_dir_name
from flyteplugins_memory.storage import _fsspec as _storage

DRAFTS = 4
LIVE = {"doc.txt": f"draft {DRAFTS - 1}", "keep.txt": "kept"}


@pytest.fixture
def faulty(durable_backend, monkeypatch):
    """Every storage call goes through one `Faults` plan; no retries: a failed call is where gc died."""
    backend = durable_backend
    faults = Faults()
    real = _storage.filesystem_for
    monkeypatch.setattr(_storage, "filesystem_for", lambda uri: FaultyFileSystem(real(uri), faults))
    monkeypatch.setenv(UNVERIFIED_BACKENDS_ENV, fsspec.utils.get_protocol(backend.raw_data_path))
    previous = set_retry_policy(RetryPolicy(attempts=1))
    yield backend, faults
    set_retry_policy(previous)


class Clock:
    """gc's and the ttl's clock: the real one while a store is prepared, two hours ahead afterwards."""

    ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


def prepare(key: str, clock: Clock) -> MemoryStore:
    """History to collect: old drafts (journal and snapshots), a file whose ttl has run out by the time
    this returns, a policy of keep_last=2."""
    clock.ahead = 0.0
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("keep.txt", "kept")
    store.write_text("scratch.txt", "expired secret", ttl=timedelta(hours=1))
    for i in range(DRAFTS):
        store.write_text("doc.txt", f"draft {i}")
        store.append({"role": "user", "content": str(i)})
        store.save()
    store.set_retention(keep_last=2)
    clock.ahead = 2 * 3600.0
    return store


def snapshots(backend, key: str) -> list[bytes]:
    directory = versions_dir_name("doc.txt") + "/"
    objects = backend.objects(key)
    return [objects[n] for n in sorted(objects, key=version_order) if n.startswith(directory)]


def assert_live(backend, key: str) -> None:
    """Everything the newest state needs is there and reads."""
    store = MemoryStore.get_or_create(key=key)
    assert {p: store.read_text(p) for p in store.list_paths()} == LIVE
    assert [m["content"] for m in store.messages] == [str(i) for i in range(DRAFTS)]
    assert snapshots(backend, key)[-1] == LIVE["doc.txt"].encode()  # the live content's snapshot


def assert_finished(backend, key: str) -> None:
    assert snapshots(backend, key) == [b"draft 2", b"draft 3"]
    assert "scratch.txt" not in backend.upstream_view(key)
    # blobs, snapshots, records, checkpoints: not the search index, whose segments lag behind a commit
    # that could not read one (`_journal.search_segments` commits without updating it; a later save catches up)
    stored = {n: d for n, d in backend.stored(key).items() if "/.journal/search/" not in n}
    assert not [n for n, d in stored.items() if b"draft 0" in d or b"expired secret" in d]


def calls_of_a_gc(faults: Faults, key: str, clock: Clock) -> int:
    prepare(key, clock)
    faults.arm(lambda n, op, path: None)
    MemoryStore.get_or_create(key=key).gc(window=timedelta(0))
    return faults.calls


@pytest.mark.parametrize("kind", ["permanent", "lost_reply"])
def test_gc_killed_at_any_storage_call_loses_nothing_and_a_second_gc_finishes(faulty, key, monkeypatch, kind):
    backend, faults = faulty
    clock = Clock()
    monkeypatch.setattr(_gc, "clock", clock)
    total = calls_of_a_gc(faults, f"{key}-probe", clock)
    assert total >= 10
    died = 0
    for k in range(1, total + 1):
        name = f"{key}-{k}"
        prepare(name, clock)
        faults.arm(at_call(k, kind))
        try:
            MemoryStore.get_or_create(key=name).gc(window=timedelta(0))
        except StorageError:
            died += 1
        faults.clear()
        assert [f[0] for f in faults.injected] == [k]
        assert_live(backend, name)
        MemoryStore.get_or_create(key=name).gc(window=timedelta(0))
        MemoryStore.get_or_create(key=name).gc(window=timedelta(0))  # the expiry commit's own leftovers
        assert_live(backend, name)
        assert_finished(backend, name)
    assert died > total // 2  # most faults did stop gc there
