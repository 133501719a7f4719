"""A save refused after it copied a stale handle's in-place bytes into blobs (`_journal.preserve`) stores nothing
that a purge or a store's deletion removed meanwhile: a refusal by a read-only prefix made since, by the
store's deletion, or any other failure after the copy (found by the hostile review of issue 23)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore, ReadOnlyPath, StorageError, StoreDeleted
from flyteplugins_memory._journal import commit as _commit
from helpers import holding

SECRET = "stale-handle-SECRET-7f3a"


def stale_reader(key: str) -> MemoryStore:
    """A store whose `p.md` holds the secret, and a second handle that read it (its in-place bytes held)."""
    writer = MemoryStore.get_or_create(key=key)
    writer.write_text("p.md", SECRET)
    writer.save()
    stale = MemoryStore.open(key=key)
    assert stale.read_text("p.md") == SECRET
    return stale


def test_a_save_refused_by_a_read_only_prefix_stores_no_purged_bytes(durable_backend, key):
    stale = stale_reader(key)
    MemoryStore.open(key=key).purge("p.md", actor="sec", reason="gdpr")
    assert holding(durable_backend, SECRET) == []
    MemoryStore.open(key=key, trusted=True).set_read_only_prefixes(["ro/"], actor="ops", reason="lock")
    stale.delete("p.md")
    stale.write_text("ro/x.md", "x")
    with pytest.raises(ReadOnlyPath):
        stale.save()
    assert holding(durable_backend, SECRET) == []
    MemoryStore.open(key=key).gc()  # the default window: nothing young is left to keep it either
    assert holding(durable_backend, SECRET) == []


def test_a_save_refused_by_the_stores_deletion_stores_nothing_of_it(durable_backend, key):
    stale = stale_reader(key)
    MemoryStore.delete_store(key=key, actor="ops", reason="forget me")
    assert holding(durable_backend, SECRET) == []
    stale.write_text("p.md", "replaced")
    with pytest.raises(StoreDeleted):
        stale.save()
    assert holding(durable_backend, SECRET) == []
    again = MemoryStore.create(key=key)  # the key's next store, then its deletion: still nothing
    again.write_text("z.md", "z")
    again.save()
    again.gc(window=timedelta(0))
    assert holding(durable_backend, SECRET) == []


def test_a_save_failing_after_the_copy_stores_no_purged_bytes(local_backend, key, monkeypatch):
    stale = stale_reader(key)
    MemoryStore.open(key=key).purge("p.md", actor="sec", reason="gdpr")

    async def down(remote, job, latest):
        raise StorageError("storage went away")

    monkeypatch.setattr(_commit, "_commit", down)
    stale.write_text("q.md", "q")
    stale.delete("p.md")
    with pytest.raises(StorageError):
        stale.save()
    assert holding(local_backend, SECRET) == []


def test_a_refused_save_keeps_copies_another_state_still_needs(durable_backend, key):
    """Copies of content no purge removed stay: a committed state may need them (its older version)."""
    stale = stale_reader(key)
    first = MemoryStore.open(key=key)
    first.write_text("p.md", "second version")
    first.save()
    MemoryStore.open(key=key, trusted=True).set_read_only_prefixes(["ro/"], actor="ops", reason="lock")
    stale.write_text("ro/x.md", "x")
    with pytest.raises(ReadOnlyPath):
        stale.save()
    history = MemoryStore.open(key=key).history("p.md")
    assert MemoryStore.open(key=key).read_version("p.md", history[-1].version_id) == SECRET
