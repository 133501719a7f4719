"""A stale handle's save never stores again the old bytes of an in-place file that gc() collected.

A save that rewrites or deletes an in-place file copies the bytes it replaces into a blob first
(`_journal.preserve`), taken from the handle's working root (`WorkingCopy.held`). A handle whose base gc() has collected
since (another handle replaced the file, then gc ran) would store bytes no kept state names again: a later
`purge(path)`, which walks the history gc left, cannot find them. A copy this save created goes again
unless a stored state still holds that content at the path (or the state its commit lands on does: its
upstream view then overwrites the bytes). Every check scans storage itself, on local disk and moto S3.
"""

from __future__ import annotations

import contextlib
import math
import time
from datetime import timedelta

import pytest

from flyteplugins_memory import ConcurrencyError, MemoryStore
from flyteplugins_memory._journal import gc as _gc
from helpers import holding

FIRST = "stale-first-bytes-4b1d"
SECOND = "the-second-version-93ce"


def stale_reader(key: str) -> tuple[MemoryStore, MemoryStore, int]:
    """A store whose ``p.md`` holds FIRST (created in place: its bytes only at its path), a handle that
    wrote it, a second handle that read it (the bytes are in its working root), and the commit."""
    writer = MemoryStore.get_or_create(key=key)
    writer.write_text("p.md", FIRST)
    writer.save()
    stale = MemoryStore.open(key=key)
    assert stale.read_text("p.md") == FIRST
    return writer, stale, writer.log(limit=1)[0].seq


def test_a_refused_stale_save_does_not_store_collected_bytes_again(durable_backend, key):
    writer, stale, _ = stale_reader(key)
    writer.write_text("p.md", SECOND)
    writer.save()
    writer.gc(window=timedelta(0))  # collects the first state, and the blob holding FIRST
    assert holding(durable_backend, FIRST) == []
    stale.write_text("p.md", "the stale handle's own")
    with pytest.raises(ConcurrencyError):
        stale.save()
    assert holding(durable_backend, FIRST) == []
    writer.purge("p.md", actor="sec", reason="forget it")
    assert holding(durable_backend, FIRST) == [] and holding(durable_backend, SECOND) == []


def test_a_stale_delete_merged_after_gc_does_not_store_collected_bytes_again(durable_backend, key):
    writer, stale, _ = stale_reader(key)
    writer.delete("p.md")
    writer.save()
    writer.gc(window=timedelta(0))
    assert holding(durable_backend, FIRST) == []
    stale.delete("p.md")
    stale.write_text("q.md", "q")
    stale.save()  # both deleted it: the delete merges, and the save commits
    assert holding(durable_backend, FIRST) == []
    assert MemoryStore.open(key=key).list_paths() == ["q.md"]


def test_a_file_changed_twice_around_a_gc_leaves_no_copy_of_its_first_bytes(durable_backend, key):
    writer, stale, _ = stale_reader(key)
    writer.write_text("p.md", SECOND)
    writer.save()
    writer.gc(window=timedelta(0))  # keeps only the state holding SECOND
    writer.write_text("p.md", "third")
    writer.save()
    stale.write_text("p.md", "the stale handle's own")
    with pytest.raises(ConcurrencyError):
        stale.save()
    assert holding(durable_backend, FIRST) == []
    writer.purge("p.md", actor="sec", reason="forget it")
    assert holding(durable_backend, FIRST) == [] and holding(durable_backend, SECOND) == []


def test_a_refused_stale_save_keeps_the_bytes_a_stored_state_still_reads(durable_backend, key):
    writer, stale, first = stale_reader(key)
    writer.write_text("p.md", SECOND)
    writer.save()  # the default window keeps the first state: its bytes are copied into a blob
    stale.write_text("p.md", "the stale handle's own")
    with pytest.raises(ConcurrencyError):
        stale.save()
    assert MemoryStore.open(key=key).at(first).read_text("p.md") == FIRST
    writer.purge("p.md", actor="sec", reason="forget it")
    assert holding(durable_backend, FIRST) == []


def test_a_stale_save_on_a_collected_base_keeps_the_bytes_the_state_it_lands_on_needs(durable_backend, key):
    writer, stale, _ = stale_reader(key)
    writer.write_text("other.md", "other")
    writer.save()
    kept = writer.log(limit=1)[0].seq
    writer.gc(window=timedelta(0))  # the stale handle's base is gone; the state kept still holds FIRST in place
    stale.write_text("p.md", "the stale handle's own")
    stale.save()  # rebases onto the kept state and replaces the bytes there: the copy is needed
    past = MemoryStore.open(key=key).at(kept)
    assert past.read_text("p.md") == FIRST and past.read_text("other.md") == "other"
    assert MemoryStore.open(key=key).read_text("p.md") == "the stale handle's own"
    writer.purge("p.md", actor="sec", reason="forget it")
    assert holding(durable_backend, FIRST) == []


def test_a_stale_delete_on_a_deleted_then_collected_file_after_more_commits_stores_nothing(durable_backend, key):
    writer, stale, _ = stale_reader(key)
    writer.delete("p.md")
    writer.save()
    writer.gc(window=timedelta(0))
    writer.write_text("q.md", "q")
    writer.save()  # the oldest stored state now is the delete's, not the newest
    stale.write_text("p.md", "the stale handle's own")
    with pytest.raises(ConcurrencyError):
        stale.save()
    assert holding(durable_backend, FIRST) == []


def test_a_stale_save_never_copies_the_bytes_of_a_file_whose_ttl_ran_out(durable_backend, key, monkeypatch):
    writer = MemoryStore.get_or_create(key=key)
    writer.write_text("p.md", FIRST, ttl=timedelta(hours=1))  # created in place
    writer.save()
    stale = MemoryStore.open(key=key)
    assert stale.read_text("p.md") == FIRST
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * 3600)  # its ttl ran out
    writer.gc()  # the default window: the states stay, the expired content goes at once
    assert holding(durable_backend, FIRST) == []
    stale.write_text("p.md", "the stale handle's own")
    with contextlib.suppress(ConcurrencyError):  # gc deleted the expired file meanwhile: may conflict
        stale.save()
    assert holding(durable_backend, FIRST) == []


def test_a_stale_save_never_removes_a_blob_it_did_not_create(durable_backend, key):
    writer, stale, _ = stale_reader(key)
    writer.write_text("q.md", "q")
    writer.save()
    writer.write_text("q.md", FIRST)  # the same bytes at another path: in a blob (q.md was there already)
    writer.write_text("p.md", SECOND)
    writer.save()
    writer.gc(window=timedelta(0))  # the state kept holds FIRST at q.md only
    stale.write_text("p.md", "the stale handle's own")
    with pytest.raises(ConcurrencyError):
        stale.save()
    assert MemoryStore.open(key=key).read_text("q.md") == FIRST
    assert [n for n in holding(durable_backend, FIRST) if "/blobs/" in n]


def test_a_refused_stale_save_keeps_a_copy_a_commit_between_still_reads(durable_backend, key, monkeypatch):
    """Found by review: the stale save copies ``p.md``'s old bytes; meanwhile the path is deleted, written
    again with those very bytes (c4, in place) and replaced (c5: its own copy finds the blob taken, so it is
    not its own), and gc keeps c3..c5. The stale save, refused, must keep the copy: c4 still reads it."""
    import asyncio

    from flyteplugins_memory._journal import commit as _commit

    first = MemoryStore.get_or_create(key=key)
    first.write_text("p.md", "OLDBYTES")
    first.save()
    stale = MemoryStore.get_or_create(key=key)
    assert stale.read_text("p.md") == "OLDBYTES"
    other = MemoryStore.get_or_create(key=key)
    original = _commit.preserve_legacy

    async def meanwhile(remote, base, changes, held=None):
        copies = await original(remote, base, changes, held)
        monkeypatch.setattr(_commit, "preserve_legacy", original)
        await other.delete.aio("p.md")
        await other.save.aio()
        await other.compact.aio()
        # c1..c3 are stamped before the next whole second, c4 and c5 at it or after (S3 stamps whole
        # seconds); gc's clock is then held so its window starts exactly there, however slowly CI runs
        boundary = float(math.floor(time.time()) + 1)
        await asyncio.sleep(boundary - time.time() + 0.02)
        assert time.time() >= boundary
        monkeypatch.setattr(_gc, "clock", lambda: boundary + 100.0)
        await other.write_text.aio("p.md", "OLDBYTES")
        await other.save.aio()  # c4
        await other.write_text.aio("p.md", "NEW")
        await other.save.aio()  # c5
        await other.gc.aio(window=timedelta(seconds=100))  # c3, the newest before the window, and after
        return copies

    monkeypatch.setattr(_commit, "preserve_legacy", meanwhile)
    stale.write_text("p.md", "S")
    with pytest.raises(ConcurrencyError):
        stale.save()
    fresh = MemoryStore.get_or_create(key=key)
    assert [c.seq for c in fresh.log()] == [5, 4, 3]
    assert fresh.read_version("p.md", "c4") == "OLDBYTES" and fresh.at(4).read_text("p.md") == "OLDBYTES"
    assert any("/blobs/" in n for n in holding(durable_backend, "OLDBYTES"))  # the copy c4 reads
