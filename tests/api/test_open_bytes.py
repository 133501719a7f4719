"""Streaming reads (`MemoryStore.open_bytes`, decision 0151; a past state's, `store.at(commit).open_bytes`,
decision 0162) and large reads in ranged parts, on local disk and S3: what a stream sees, its typed errors,
its round trips and its memory. "Large" is made small by
patching the part size (`storage._ranges.PART_SIZE`)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import tracemalloc
from datetime import timedelta

import pytest

from flyteplugins_memory import (
    ByteStream,
    CommitNotFound,
    ConcurrencyError,
    ContentChanged,
    ContentPurged,
    CorruptStore,
    MemoryReader,
    MemoryStore,
    PathNotFound,
    StateCollected,
    StoreDeleted,
)
from flyteplugins_memory._base.syncify import run_sync
from flyteplugins_memory._journal.journal_storage import JournalStorage
from flyteplugins_memory._rules.layout import blob_name
from flyteplugins_memory.storage import _byte_stream, _ranges

PART = 4096
#: a file of 12 parts and a bit
DATA = os.urandom(PART * 12 + 123)


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(_ranges, "PART_SIZE", PART)


def saved(key: str, files: dict[str, bytes], **options) -> MemoryStore:
    store = MemoryStore.get_or_create(key=key, **options)
    for path, data in files.items():
        store.write_bytes(path, data)
    store.save()
    return store


def test_a_committed_file_streams_whole_seekable_and_verified(durable_backend, key, small_parts):
    saved(key, {"big.bin": DATA})
    fresh = MemoryStore.open(key=key)
    with fresh.open_bytes("big.bin") as stream:
        assert isinstance(stream, ByteStream) and isinstance(stream, io.BufferedIOBase)
        assert stream.readable() and stream.seekable() and stream.size == len(DATA)
        chunks = iter(lambda: stream.read(1000), b"")
        assert b"".join(chunks) == DATA
        assert stream.read(10) == b"" and stream.tell() == len(DATA)
        stream.seek(-50, io.SEEK_END)
        assert stream.read() == DATA[-50:]
        stream.seek(PART * 3 + 7)
        buffer = bytearray(PART * 2)
        assert stream.readinto(buffer) == PART * 2 and bytes(buffer) == DATA[PART * 3 + 7 : PART * 5 + 7]
    assert stream.closed
    with pytest.raises(ValueError):
        stream.read(1)
    assert fresh.read_bytes("big.bin") == DATA  # read_bytes takes the ranged parts too


def test_a_stream_sees_what_read_bytes_sees(durable_backend, key, small_parts):
    store = saved(key, {"a.bin": DATA, "dir/b.bin": b"b"})
    store.write_bytes("a.bin", b"unsaved")  # the handle's own unsaved write wins, as everywhere
    assert store.open_bytes("a.bin").read() == b"unsaved"
    store.delete("dir/b.bin")
    for gone in ("dir/b.bin", "dir", "missing.bin"):
        with pytest.raises(PathNotFound) as raised:
            store.open_bytes(gone)
        assert isinstance(raised.value, FileNotFoundError)
        assert store.read_bytes(gone) is None  # read_bytes says "no file" with its default
    empty = saved(f"{key}-e", {"empty.bin": b""})
    assert empty.open_bytes("empty.bin").read() == b""


def test_expired_read_only_and_scoped_paths(durable_backend, key, small_parts, clock):
    store = saved(key, {"ref/manual.bin": DATA})
    store.write_bytes("tmp.bin", b"soon gone", ttl=timedelta(hours=1))
    store.save()
    fresh = MemoryStore.get_or_create(key=key, read_only_prefixes=("ref/",))
    assert fresh.open_bytes("ref/manual.bin").read() == DATA  # reading a read-only prefix is fine
    assert fresh.scope("ref").open_bytes("manual.bin").read(5) == DATA[:5]
    clock.offset += 2 * 3600
    with pytest.raises(PathNotFound):
        MemoryStore.open(key=key).open_bytes("tmp.bin")


def test_async_use(durable_backend, key, small_parts):
    saved(key, {"big.bin": DATA})

    async def read_all() -> bytes:
        store = MemoryStore.open(key=key)
        async with await store.open_bytes.aio("big.bin") as stream:
            head = await stream.aread(100)
            return head + await stream.aread()

    assert asyncio.run(read_all()) == DATA


def test_content_purged_by_another_writer_mid_stream_is_a_typed_error(durable_backend, key, small_parts):
    saved(key, {"big.bin": DATA, "keep.md": b"keep"})
    reader = MemoryStore.open(key=key)
    stream = reader.open_bytes("big.bin")
    assert stream.read(100) == DATA[:100]  # parts 0-4 are requested or in hand
    MemoryStore.open(key=key).purge("big.bin")
    stream.seek(PART * 10)  # beyond what was read ahead: fetched now, and gone
    with pytest.raises(ContentPurged):
        stream.read(10)
    with pytest.raises(ContentPurged):
        reader.open_bytes("big.bin")


def test_a_file_replaced_in_place_under_a_stream_fails_never_silently(durable_backend, key, small_parts):
    saved(key, {"big.bin": DATA})  # a new file: stored in place at its path (decision 0041)
    reader = MemoryStore.open(key=key)
    stream, skipping = reader.open_bytes("big.bin"), reader.open_bytes("big.bin")
    other = bytes(reversed(DATA))  # same length, other bytes: a part-wise mix would look whole
    durable_backend.fs.pipe_file(durable_backend.prefix(key) + "/big.bin", other)  # upstream rewrites in place
    with pytest.raises(ContentChanged) as raised:
        stream.read()
    assert isinstance(raised.value, ConcurrencyError)
    skipping.seek(len(DATA) - 10)  # a reader that skips to the end: the skipped parts are hashed first
    with pytest.raises(ContentChanged):
        skipping.read()


def test_a_damaged_blob_fails_at_the_end(durable_backend, key, small_parts):
    store = saved(key, {"big.bin": b"first"})
    store.write_bytes("big.bin", DATA)  # a changed path: its content goes to a blob
    store.save()
    stream = MemoryStore.open(key=key).open_bytes("big.bin")
    remote = JournalStorage.at(durable_backend.store_uri(key))
    run_sync(remote.write_many, {blob_name(hashlib.sha256(DATA).hexdigest()): bytes(reversed(DATA))})
    with pytest.raises(CorruptStore):
        stream.read()


def test_a_large_read_takes_its_parts_in_one_wave(durable_backend, key, round_trips, monkeypatch):
    monkeypatch.setattr(_ranges, "PART_SIZE", 64 * 1024)
    monkeypatch.setattr(_byte_stream, "READ_AHEAD", 32)
    data = os.urandom(1024 * 1024)
    saved(key, {"big.bin": data})
    handle = MemoryStore.open(key=key)
    handle.list_paths()
    with round_trips.measure() as read:
        assert handle.read_bytes("big.bin") == data
    # a whole read: at most MAX_PARTS parts (of 128 KiB here), so they fit the client's connection pool
    assert read.requests == _ranges.MAX_PARTS and read.waves == 1, read.describe()
    with round_trips.measure() as streamed:
        assert handle.open_bytes("big.bin").read() == data
    # a stream: the 16 parts of PART_SIZE (the 32 read ahead reach past the end), and whether the file has a
    # blob copy to read instead
    assert streamed.requests == 17 and streamed.waves == 1, streamed.describe()


def test_a_stream_holds_a_few_parts_not_the_file(local_backend, key, monkeypatch):
    part = 64 * 1024
    monkeypatch.setattr(_ranges, "PART_SIZE", part)
    data = os.urandom(part * 40)  # 2.5 MiB
    saved(key, {"big.bin": data})
    store = MemoryStore.open(key=key)
    store.list_paths()
    digest = hashlib.sha256()
    tracemalloc.start()
    try:
        with store.open_bytes("big.bin") as stream:
            for chunk in iter(lambda: stream.read(part), b""):
                digest.update(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert peak < (_byte_stream.READ_AHEAD + 4) * part, peak  # the window and a chunk, never the 40 parts


# -- the store as of a commit (`store.at(commit).open_bytes`, decision 0162) -------------------------------------


def stored(backend, key: str, name: str) -> bytes | None:
    """The file `name` of store `key` as storage holds it at its path, or None."""
    full = f"{backend.prefix(key)}/{name}"
    return backend.fs.cat_file(full) if backend.fs.exists(full) else None


def blob(backend, key: str, data: bytes) -> bytes | None:
    """The content-addressed blob of `data` in store `key`'s journal, as storage holds it, or None."""
    remote = JournalStorage.at(backend.store_uri(key))
    return run_sync(remote.read, blob_name(hashlib.sha256(data).hexdigest()))


def test_a_past_state_streams_what_its_read_bytes_returns(durable_backend, key, small_parts, clock):
    other = bytes(reversed(DATA))
    store = saved(key, {"big.bin": DATA, "gone.bin": DATA[:5000]})  # new files: stored in place at their paths
    store.write_bytes("tmp.bin", b"scratch", ttl=timedelta(hours=1))
    store.save()
    first = store.log(limit=1)[0]
    store.write_bytes("big.bin", other)  # the save keeps the old bytes in a blob before it rewrites the path
    store.delete("gone.bin")
    store.save()
    # storage: the paths hold the new state, the old bytes only their blobs
    assert stored(durable_backend, key, "big.bin") == other and stored(durable_backend, key, "gone.bin") is None
    assert blob(durable_backend, key, DATA) == DATA
    reopened = MemoryStore.open(key=key)
    past, now = reopened.at(first), reopened.at(reopened.log(limit=1)[0])
    readers: list[MemoryReader] = [past, now, reopened]
    for reader in readers:
        assert isinstance(reader, MemoryReader)
    with past.open_bytes("big.bin") as stream:  # the blob copy, not the path, and checked to its end
        assert stream.size == len(DATA) and stream.name == "big.bin"
        assert b"".join(iter(lambda: stream.read(1000), b"")) == DATA == past.read_bytes("big.bin")
    assert past.open_bytes("gone.bin").read() == DATA[:5000] == past.read_bytes("gone.bin")
    assert now.open_bytes("big.bin").read() == other == reopened.open_bytes("big.bin").read()
    assert past.open_bytes("tmp.bin").read() == b"scratch"
    for gone in ("gone.bin", "missing.bin", "dir"):  # deleted at that commit, never there, no file
        with pytest.raises(PathNotFound):
            now.open_bytes(gone)
        assert now.read_bytes(gone) is None
    clock.offset += 2 * 3600  # an expired file does not come back through time travel
    with pytest.raises(PathNotFound):
        past.open_bytes("tmp.bin")
    assert past.read_bytes("tmp.bin") is None

    async def read_async() -> bytes:
        async with await past.open_bytes.aio("big.bin") as stream:
            return await stream.aread(10) + await stream.aread()

    assert asyncio.run(read_async()) == DATA


def test_a_past_state_of_a_purged_path_raises_content_purged(durable_backend, key, small_parts):
    store = saved(key, {"secret.bin": DATA, "keep.bin": b"keep"})
    first = store.log(limit=1)[0]
    store.write_bytes("secret.bin", b"rotated")
    store.save()
    pinned = MemoryStore.open(key=key).at(first)  # a view taken before the purge
    store.purge("secret.bin")
    assert stored(durable_backend, key, "secret.bin") is None and blob(durable_backend, key, DATA) is None
    for past in (pinned, MemoryStore.open(key=key).at(first)):
        with pytest.raises(ContentPurged):
            past.open_bytes("secret.bin")
        with pytest.raises(ContentPurged):
            past.read_bytes("secret.bin")
        assert past.open_bytes("keep.bin").read() == b"keep"


def test_a_stream_on_a_past_state_while_a_save_rewrites_its_path(durable_backend, key, small_parts):
    saved(key, {"big.bin": DATA})  # in place at its path, no blob copy yet
    writer = MemoryStore.open(key=key)
    past = MemoryStore.open(key=key).at(writer.log(limit=1)[0])
    stream = past.open_bytes("big.bin")
    assert stream.read(100) == DATA[:100]  # parts 0-4 requested or in hand: the rest comes from the path
    writer.write_bytes("big.bin", bytes(reversed(DATA)))  # same length: a part-wise mix would look whole
    writer.save()
    with pytest.raises(ContentChanged):
        stream.read()  # never a silent mix of the two versions
    assert blob(durable_backend, key, DATA) == DATA
    assert past.open_bytes("big.bin").read() == DATA  # opened again: the blob copy the save kept


def test_a_stream_on_a_past_state_while_a_purge_removes_its_content(durable_backend, key, small_parts):
    store = saved(key, {"big.bin": b"first"})
    store.write_bytes("big.bin", DATA)  # a changed path: DATA is in a blob
    store.save()
    past = MemoryStore.open(key=key).at(store.log(limit=1)[0])
    stream = past.open_bytes("big.bin")
    assert stream.read(100) == DATA[:100]
    store.write_bytes("big.bin", b"later")
    store.save()  # a later save leaves the blob where it is: the stream stays good ...
    stream.seek(PART * 6)
    assert stream.read(PART) == DATA[PART * 6 : PART * 7]
    MemoryStore.open(key=key).purge("big.bin")  # ... until a purge removes the content from every state
    stream.seek(PART * 11)  # beyond what was read ahead: fetched now, and gone
    with pytest.raises(ContentPurged):
        stream.read(10)


def test_a_past_state_s_stream_of_a_rewritten_in_place_file_costs_two_waves(durable_backend, key, round_trips):
    store = saved(key, {"a.bin": b"first version"})
    first = store.log(limit=1)[0]
    store.write_bytes("a.bin", b"second version")
    store.save()
    past = MemoryStore.open(key=key).at(first)
    past.list_paths()
    with round_trips.measure() as opened:
        assert past.open_bytes("a.bin").read() == b"first version"
    # the path and whether it has a blob copy, side by side; then the blob copy the save made
    assert opened.requests == 3 and opened.waves == 2, opened.describe()


def test_a_past_state_collected_by_gc_under_its_view_and_its_stream(durable_backend, key, small_parts):
    store = saved(key, {"big.bin": b"first"})
    store.write_bytes("big.bin", DATA)  # a changed path: DATA is in a blob
    store.save()
    seq = store.log(limit=1)[0].seq
    past = MemoryStore.open(key=key).at(seq)
    stream = past.open_bytes("big.bin")
    assert stream.read(100) == DATA[:100]
    store.write_bytes("big.bin", b"later")
    store.save()
    store.gc(window=timedelta(0))  # every state but the newest, and DATA's blob with them
    assert blob(durable_backend, key, DATA) is None
    stream.seek(PART * 11)  # beyond what was read ahead: fetched now, and gone
    for read in (lambda: stream.read(10), lambda: past.open_bytes("big.bin"), lambda: past.read_bytes("big.bin")):
        with pytest.raises(StateCollected) as raised:
            read()
        assert not isinstance(raised.value, ContentPurged)  # collected, not purged
    with pytest.raises(CommitNotFound):
        store.at(seq)


def test_a_past_state_s_stream_after_delete_store(durable_backend, key, small_parts):
    store = saved(key, {"big.bin": b"first"})
    store.write_bytes("big.bin", DATA)
    store.save()
    past = store.at(store.log(limit=1)[0])
    stream = past.open_bytes("big.bin")
    assert stream.read(100) == DATA[:100]
    MemoryStore.delete_store(key=key, actor="ops", reason="forget")
    stream.seek(PART * 11)  # beyond what was read ahead: the store is gone, and says so
    for read in (lambda: stream.read(10), lambda: past.open_bytes("big.bin"), lambda: past.read_bytes("big.bin")):
        with pytest.raises(StoreDeleted):
            read()
