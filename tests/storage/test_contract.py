"""The storage contract: FsspecStorage implements ObjectStorage, capabilities are read by the commit path,
storage options reach the filesystem, and async filesystems are bound to the running loop."""

from __future__ import annotations

import asyncio
import os
import threading

import fsspec
import pytest

from flyteplugins_memory import Capabilities, MemoryStore, ObjectStorage, set_storage_options
from flyteplugins_memory._journal.commit import _claim
from flyteplugins_memory.storage._fsio import bound_to_running_loop
from flyteplugins_memory.storage._fsspec import FsspecStorage, filesystem_for
from flyteplugins_memory.storage._options import storage_options_for


def test_remote_store_implements_the_protocol(tmp_path):
    remote: ObjectStorage = FsspecStorage(str(tmp_path / "store"))  # checked statically by pyright, too
    assert isinstance(remote, ObjectStorage)
    assert remote.capabilities == Capabilities(atomic_create=True, if_match=False, symlinks=True, cross_process=True)
    with pytest.raises(AttributeError):
        remote.capabilities.atomic_create = False  # type: ignore[misc]  # frozen: declared, not switched


class FakeSlot:
    """A storage whose create-only write "succeeds", and whose slot then holds `holds`."""

    def __init__(self, atomic: bool, holds: bytes):
        self.capabilities = Capabilities(atomic_create=atomic, if_match=False, symlinks=False, cross_process=True)
        self.holds = holds
        self.reads = 0

    async def create_exclusive(self, name: str, data: bytes) -> bool:
        return True

    async def read(self, name: str) -> bytes | None:
        self.reads += 1
        return self.holds


async def test_without_atomic_create_a_claimed_slot_is_read_back():
    clobbered = FakeSlot(atomic=False, holds=b"another writer's record")
    assert await _claim(clobbered, "meta/.journal/log/1.json", b"ours") is False  # type: ignore[arg-type]
    assert clobbered.reads == 1
    kept = FakeSlot(atomic=False, holds=b"ours")
    assert await _claim(kept, "meta/.journal/log/1.json", b"ours") is True  # type: ignore[arg-type]
    atomic = FakeSlot(atomic=True, holds=b"never read")
    assert await _claim(atomic, "meta/.journal/log/1.json", b"ours") is True  # type: ignore[arg-type]
    assert atomic.reads == 0  # no extra request where the backend guarantees it


def test_storage_options_are_validated_and_matched_by_whole_segments():
    with pytest.raises(ValueError):
        set_storage_options("bucket-without-scheme", {})
    with pytest.raises(TypeError):
        set_storage_options("s3://bucket", [("key", "x")])  # type: ignore[arg-type]
    try:
        assert set_storage_options("s3://opt-bucket/", {"key": "outer"}) is None
        set_storage_options("s3://opt-bucket/deeper", {"key": "inner"})
        assert storage_options_for("s3://opt-bucket/x") == {"key": "outer"}
        assert storage_options_for("s3://opt-bucket/deeper/x") == {"key": "inner"}  # the longest prefix wins
        assert storage_options_for("s3://opt-bucket-2/x") == {}
    finally:
        set_storage_options("s3://opt-bucket", None)
        set_storage_options("s3://opt-bucket/deeper", None)
    assert storage_options_for("s3://opt-bucket/x") == {}


def test_storage_options_alone_reach_s3(s3_backend, key, monkeypatch):
    """No endpoint in Flyte's settings or the environment: the store finds moto through its options only."""
    import flyte

    for name in [n for n in os.environ if n.startswith("FLYTE_AWS_")]:
        monkeypatch.delenv(name)
    flyte.init(org="acme", project="research", domain="development")  # no storage=: s3fs would go to AWS
    bucket = fsspec.utils.infer_storage_options(s3_backend.raw_data_path)["host"]
    endpoint = s3_backend.fs.storage_options["endpoint_url"]
    set_storage_options(f"s3://{bucket}", {"endpoint_url": endpoint, "key": "testing", "secret": "testing"})
    try:
        assert filesystem_for(f"s3://{bucket}/x").storage_options["endpoint_url"] == endpoint
        store = MemoryStore.create(key=key)
        store.write_text("a.txt", "through the options")
        store.save()
    finally:
        set_storage_options(f"s3://{bucket}", None)
    assert s3_backend.objects(key)["a.txt"] == b"through the options"


def test_async_filesystems_are_bound_once_per_loop(s3_backend):
    fs = filesystem_for(s3_backend.raw_data_path)
    assert fs.async_impl and not fs.asynchronous

    async def bind_twice():
        first, second = bound_to_running_loop(fs), bound_to_running_loop(fs)
        return first, second, asyncio.get_running_loop()

    first, second, _ = asyncio.run(bind_twice())
    assert first is second and first.asynchronous and first is not fs
    other: list = []
    thread = threading.Thread(target=lambda: other.append(asyncio.run(bind_twice())))
    thread.start()
    thread.join()
    assert other[0][0] is not first  # another loop, another copy (fsspec's cache would have shared one)
    assert bound_to_running_loop.__module__ == "flyteplugins_memory.storage._fsio"


async def test_s3_calls_run_on_the_running_loop_without_a_thread(s3_backend, key, monkeypatch):
    """An async filesystem is awaited directly: no storage call of a save goes through a worker thread."""
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "x")
    hops: list = []
    real = asyncio.to_thread

    async def counted(fn, *args, **kwargs):
        hops.append(getattr(fn, "__qualname__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    await store.save.aio()
    assert not [h for h in hops if "FileSystem" in h or "BlockingIO" in h], hops
    assert s3_backend.objects(key)["a.txt"] == b"x"
