"""Issue 9, bulk saves: a new file is uploaded once, at its own path, with a create-only write before the
commit point (`_journal.inplace`), and is then read, rewritten, deleted, purged and collected like any file.
Every check looks at what landed in storage through the backend's own filesystem."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from types import SimpleNamespace

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import ConcurrencyError, CorruptStore, MemoryStore, StateCollected
from flyteplugins_memory._journal import commit as _commit
from flyteplugins_memory._journal.inplace import places_in_place
from flyteplugins_memory._journal.journal_storage import JournalStorage
from flyteplugins_memory._rules.codecs import sha256_bytes
from helpers import commit, save_dying_before_commit, saved


@pytest.fixture
def counter(io_counter, monkeypatch):
    """`io_counter`, also counting create-only writes of many objects (one per object), with their bytes."""
    original_create, original_write = JournalStorage.create_many, JournalStorage.write_many
    io_counter.sizes = []

    async def created(self, objects):
        before = len(io_counter.ops)
        try:
            return await original_create(self, objects)
        finally:  # one request per object, whether or not it went through `create_exclusive` one by one
            del io_counter.ops[before:]
            io_counter.ops.extend(("put", n) for n in objects)
            io_counter.sizes.extend(len(d) for d in objects.values())

    async def written(self, objects):
        io_counter.sizes.extend(len(d) for d in objects.values())
        return await original_write(self, objects)  # counted by `io_counter` itself

    monkeypatch.setattr(JournalStorage, "create_many", created)
    monkeypatch.setattr(JournalStorage, "write_many", written)
    return io_counter


def _blobs(backend, key: str) -> dict[str, bytes]:
    return {n: d for n, d in backend.journal(key).items() if "/blobs/" in n}


def test_a_bulk_save_costs_at_most_two_requests_per_file(durable_backend, key, counter):
    store = MemoryStore.create(key=key)
    files = {f"files/{i:05d}.txt": f"{i:05d}".ljust(1024, "x") for i in range(1000)}
    for path, text in files.items():
        store.write_text(path, text)
    counter.reset()
    store.save()
    # the constant: the commit, the head hint and, since 1,000 files make a record past 32 KiB, a checkpoint
    # (its audit segment, audit/log.jsonl read and rewritten, the checkpoint, the probe of the slot after
    # it for a purge that landed meanwhile (`_journal.commit._purged_after`), the head, gc's two reads), plus the
    # parts of the checkpoint's file index (about 32 KiB of file entries each: 1 per ~140 files)
    parts = [n for n in counter.names("put") if "/parts/" in n]
    assert len(parts) <= len(files) / 100
    assert counter.count() - len(parts) <= 2 * len(files) + 11, counter.ops[-12:]
    stored = durable_backend.upstream_view(key)
    assert {p: stored[p].decode() for p in files} == files  # each file at its own path ...
    assert all(f"meta/{p.replace('/', '%2F')}.json" in stored for p in files)  # ... with its sidecar
    assert _blobs(durable_backend, key) == {}  # ... and no second copy in the journal
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("files/00999.txt") == files["files/00999.txt"]
    assert reopened.prefetch() == 999


def test_a_large_new_file_crosses_the_wire_once(durable_backend, key, counter):
    store = MemoryStore.get_or_create(key=key)
    big = "0123456789abcdef" * (512 * 1024)  # 8 MiB
    store.write_text("data/big.txt", big)
    counter.reset()
    store.save()
    assert len(big) <= sum(counter.sizes) < len(big) + 64 * 1024  # the file once, plus small journal objects
    assert durable_backend.upstream_view(key)["data/big.txt"] == big.encode()
    assert _blobs(durable_backend, key) == {}
    assert MemoryStore.get_or_create(key=key).read_text("data/big.txt") == big


def test_two_creators_of_one_new_path_the_later_committer_loses_nothing(durable_backend, key):
    """A places its file first, B's create finds it and falls back to a blob; B commits first. A's commit
    then conflicts: A keeps its change, B's committed content is what every open reads."""
    MemoryStore.create(key=key)
    a, b = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    a.write_text("notes/x.md", "from a")
    a.write_text("notes/only-a.md", "only a")
    b.write_text("notes/x.md", "from b")
    real_upload = _commit.upload_in_place

    async def a_places_then_b_saves(remote, base, changes, contents, **flags):
        placed = await real_upload(remote, base, changes, contents, **flags)
        if "notes/only-a.md" in changes.files:  # A's save: B saves between A's upload and A's commit
            assert placed == {"notes/x.md", "notes/only-a.md"}
            await b.save.aio()
        return placed

    _commit.upload_in_place = a_places_then_b_saves
    try:
        with pytest.raises(ConcurrencyError) as raised:
            a.save()
    finally:
        _commit.upload_in_place = real_upload
    assert raised.value.paths == ("notes/x.md",)
    assert durable_backend.upstream_view(key)["notes/x.md"] == b"from b"
    assert MemoryStore.get_or_create(key=key).read_text("notes/x.md") == "from b"
    assert a.read_text("notes/x.md") == "from a" and a.has_unsaved_changes()  # A's change is intact
    assert a.refresh() == ["notes/x.md"]
    a.save()  # its other new file was left at its path by the failed save: now it goes to a blob
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("notes/only-a.md") == "only a" and reopened.read_text("notes/x.md") == "from b"


def test_a_new_path_taken_by_a_committed_file_is_never_overwritten(durable_backend, key):
    MemoryStore.create(key=key)
    stale = MemoryStore.get_or_create(key=key)
    winner = MemoryStore.get_or_create(key=key)
    winner.write_text("x.txt", "committed")
    winner.save()
    stale.write_text("x.txt", "stale writer")  # new in its base, but the path is taken
    with pytest.raises(ConcurrencyError):
        stale.save()
    assert durable_backend.upstream_view(key)["x.txt"] == b"committed"
    assert MemoryStore.get_or_create(key=key).read_text("x.txt") == "committed"
    assert stale.read_text("x.txt") == "stale writer"


def test_a_save_that_dies_before_its_commit_leaves_only_a_stray_upstream_can_see(durable_backend, key, monkeypatch):
    MemoryStore.create(key=key)
    doomed = MemoryStore.get_or_create(key=key)
    doomed.write_text("notes/new.md", "never committed")
    save_dying_before_commit(doomed, monkeypatch)
    assert durable_backend.upstream_view(key)["notes/new.md"] == b"never committed"  # the stray
    fresh = MemoryStore.get_or_create(key=key)
    assert not fresh.exists("notes/new.md") and fresh.list_paths() == []  # ours never sees it
    assert "notes/new.md" in UpstreamStore.get_or_create(key=key).list_paths()  # upstream does (no sidecar)

    fresh.write_text("notes/new.md", "the next save of that path")
    fresh.save()
    assert durable_backend.upstream_view(key)["notes/new.md"] == b"the next save of that path"
    assert MemoryStore.get_or_create(key=key).read_text("notes/new.md") == "the next save of that path"
    with pytest.raises(ConcurrencyError):  # the dead save's handle: its change conflicts, nothing is lost
        doomed.save()
    assert doomed.read_text("notes/new.md") == "never committed"


def test_older_states_still_read_an_in_place_file_after_it_is_rewritten_or_deleted(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "first a")
    store.write_text("b.txt", "first b")
    store.save()
    pinned = store._serialize()  # a task input pinned to that commit
    opened = MemoryStore.get_or_create(key=key)  # a handle standing on it, nothing read yet

    writer = MemoryStore.get_or_create(key=key)
    writer.write_text("a.txt", "second a")
    writer.delete("b.txt")
    writer.save()

    view = durable_backend.upstream_view(key)
    assert view["a.txt"] == b"second a" and "b.txt" not in view
    blobs = set(_blobs(durable_backend, key).values())
    assert {b"first a", b"first b"} <= blobs  # copied once, before the commit that replaced them
    for old in (MemoryStore._deserialize(pinned), opened):
        assert old.read_text("a.txt") == "first a" and old.read_text("b.txt") == "first b"
    current = MemoryStore.get_or_create(key=key)
    assert current.read_text("a.txt") == "second a" and not current.exists("b.txt")


def test_purge_removes_an_in_place_file_and_its_copies(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("creds.txt", "secret one")
    store.write_text("other.txt", "harmless")
    store.save()
    store.write_text("creds.txt", "secret two")  # the first value is copied into a blob here
    store.save()
    store.purge("creds.txt")
    stored = durable_backend.stored(key)
    assert not [n for n, d in stored.items() if b"secret one" in d or b"secret two" in d]
    assert MemoryStore.get_or_create(key=key).list_paths() == ["other.txt"]


def test_gc_keeps_in_place_files_and_collects_their_copies(durable_backend, key):
    store = saved(key, {"doc.txt": "old", "stays.txt": "stays"})
    early = MemoryStore.get_or_create(key=key)
    commit(store, {"doc.txt": "new"})
    assert b"old" in _blobs(durable_backend, key).values()
    store.gc(window=timedelta(0))
    assert b"old" not in _blobs(durable_backend, key).values()  # no state that gc keeps needs it
    assert durable_backend.upstream_view(key)["stays.txt"] == b"stays"  # an in-place file is the live copy
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("stays.txt") == "stays" and reopened.read_text("doc.txt") == "new"
    assert early.read_text("stays.txt") == "stays"
    with pytest.raises(StateCollected):
        early.read_text("doc.txt")  # never the new bytes for the old state


def test_an_upstream_writer_changing_an_in_place_file_is_refused_not_misread(durable_backend, key):
    """The trade-off (docs/decisions/0041): a file we created in place is exposed, as imported files
    are, to an upstream writer changing it in place. Our readers get a typed error, never wrong bytes."""
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "ours")
    store.write_text("b.txt", "untouched")
    store.save()
    upstream = UpstreamStore.get_or_create(key=key)
    upstream.write_text("a.txt", "changed by upstream")
    upstream.save()
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("b.txt") == "untouched"
    with pytest.raises(CorruptStore, match=r"a\.txt"):
        reopened.read_text("a.txt")


def test_in_place_only_where_creates_are_atomic():
    def remote(atomic):
        return SimpleNamespace(capabilities=SimpleNamespace(atomic_create=atomic))

    assert places_in_place(remote(True)) and not places_in_place(remote(False))


def test_on_a_backend_without_atomic_creates_new_files_go_to_blobs(memory_backend, key, monkeypatch):
    monkeypatch.setattr("flyteplugins_memory._journal.inplace.places_in_place", lambda remote: False)
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "in a blob")
    store.save()
    assert list(_blobs(memory_backend, key).values()) == [b"in a blob"]
    assert memory_backend.upstream_view(key)["a.txt"] == b"in a blob"
    assert sha256_bytes(b"in a blob") in next(iter(_blobs(memory_backend, key)))


def test_the_first_save_of_a_store_upstream_wrote_uploads_no_file_in_place(durable_backend, key, monkeypatch):
    """Until its first save commits, such a store is opened by listing it: a file placed by a save that
    died there would become part of it. Its first save uses blobs; later ones place new files."""
    upstream = UpstreamStore.get_or_create(key=key)
    upstream.write_text("up.txt", "upstream")
    upstream.save()
    doomed = MemoryStore.get_or_create(key=key)
    doomed.write_text("new.txt", "never committed")
    save_dying_before_commit(doomed, monkeypatch)
    assert "new.txt" not in durable_backend.upstream_view(key)
    assert MemoryStore.get_or_create(key=key).list_paths() == ["up.txt"]
    store = MemoryStore.get_or_create(key=key)
    store.write_text("first.txt", "first")
    store.save()
    assert _blobs(durable_backend, key) and MemoryStore.get_or_create(key=key).read_text("first.txt") == "first"
    store.write_text("second.txt", "second")
    store.save()
    assert (
        b"second" not in _blobs(durable_backend, key).values()
        and durable_backend.upstream_view(key)["second.txt"] == b"second"
    )


def test_a_stale_saves_copy_of_old_bytes_never_removes_a_blob_another_save_created(s3_backend, key):
    store = saved(key, {"a.txt": "first a", "b.txt": "b"})
    pinned = store._serialize()
    first, stale = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    commit(first, {"a.txt": "second a"})  # copies "first a" into its blob, then rewrites a.txt in place
    assert b"first a" in _blobs(s3_backend, key).values()
    stale.write_text("a.txt", "third a")  # never read a.txt: its save copies from the path, which moved on
    with contextlib.suppress(ConcurrencyError):  # both rewrote a.txt from one base: it may conflict
        stale.save()
    assert b"first a" in _blobs(s3_backend, key).values()
    assert MemoryStore._deserialize(pinned).read_text("a.txt") == "first a"


def test_a_save_over_in_place_bytes_changed_behind_its_back_leaves_no_blob_of_other_bytes(s3_backend, key, monkeypatch):
    """A server-side copy would put the path's current bytes under the blob's name before checking them, and a
    failure before its cleanup would leave them there (decision 0160): the save reads and checks instead."""
    import s3fs

    from flyteplugins_memory import StorageError

    store = saved(key, {"a.txt": "first a", "b.txt": "b"})
    s3_backend.fs.pipe_file(s3_backend.prefix(key) + "/a.txt", b"changed behind our back")  # upstream, in place
    writer = MemoryStore.get_or_create(key=key)
    writer.write_text("a.txt", "second a")  # never read a.txt: its save copies from the path

    async def delete_fails(self, path, **kwargs):
        raise OSError("the DELETE of the mismatching copy failed (or the process died here)")

    with monkeypatch.context() as patch:
        patch.setattr(s3fs.core.S3FileSystem, "_rm_file", delete_fails)
        with contextlib.suppress(StorageError, OSError):
            writer.save()
    for name, data in _blobs(s3_backend, key).items():
        assert sha256_bytes(data) == name.rsplit("/", 1)[-1], f"{name} holds {data!r}"
    assert store.read_text("b.txt") == "b"


def test_a_copy_dropped_as_unneeded_never_takes_the_blob_of_a_file_the_same_save_wrote(local_backend, key, monkeypatch):
    import asyncio

    saved(key, {"q.txt": "shared bytes", "p.txt": "old p"})  # both placed in place
    writer = MemoryStore.get_or_create(key=key)
    assert writer.read_text("q.txt") == "shared bytes"  # held: its save copies these bytes itself
    commit(MemoryStore.get_or_create(key=key), {}, deleted=["q.txt"])  # another deletes it too
    MemoryStore.get_or_create(key=key).gc(window=timedelta(0))  # the writer's base commit and q's blob go
    writer.write_text("p.txt", "shared bytes")  # p.txt exists: this content goes to its blob
    writer.delete("q.txt")  # a delete both sides made: no conflict, the save rebases onto the other's
    # the first wave runs the copy beside the blob's upload; here the copy creates the blob first (as the
    # sequential save before issue 26 always did): whichever wins, the committed p.txt needs that blob
    copied = asyncio.Event()
    preserve, upload = _commit.preserve_legacy, _commit.upload_in_place

    async def copy_first(*args, **kwargs):
        try:
            return await preserve(*args, **kwargs)
        finally:
            copied.set()

    async def upload_after(*args, **kwargs):
        await copied.wait()
        return await upload(*args, **kwargs)

    monkeypatch.setattr(_commit, "preserve_legacy", copy_first)
    monkeypatch.setattr(_commit, "upload_in_place", upload_after)
    writer.save()
    assert MemoryStore.get_or_create(key=key).read_text("p.txt") == "shared bytes"
    assert b"shared bytes" in _blobs(local_backend, key).values()


def test_a_failed_first_wave_never_removes_an_upstream_writers_file(durable_backend, key, storage_faults, monkeypatch):
    from flyteplugins_memory import StorageError

    saved(key, {"e.txt": "existing"})
    writer = MemoryStore.get_or_create(key=key)
    writer.write_text("p.txt", "ours")  # new: created in place
    writer.write_text("e.txt", "changed")  # its content goes to a blob, whose upload fails
    upload = _commit.upload_in_place

    async def upstream_saves_meanwhile(*args, **kwargs):
        placed = await upload(*args, **kwargs)
        durable_backend.fs.pipe_file(durable_backend.prefix(key) + "/p.txt", b"upstream's p")  # overwrites
        return placed

    monkeypatch.setattr(_commit, "upload_in_place", upstream_saves_meanwhile)
    storage_faults.arm(lambda n, op, path: "permanent" if op == "write" and "/blobs/" in path else None)
    with pytest.raises(StorageError):
        writer.save()
    storage_faults.clear()
    assert durable_backend.upstream_view(key).get("p.txt") == b"upstream's p"
