"""Only backends whose create-only write is verified atomic hold stores; others need an explicit opt-in.

The unverified backend here is a real fsspec filesystem, registered under its own protocol, whose
``pipe_file`` ignores ``mode="create"`` (as a careless or eventually consistent backend would): two
writers can both "create" one commit slot there, so one save would vanish silently.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import ClassVar

import flyte
import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

import flyteplugins_memory
from flyteplugins_memory import (
    MemoryStore,
    UnsupportedBackend,
)
from flyteplugins_memory.storage._conditional import create_exclusive
from flyteplugins_memory.storage._fsspec import FsspecStorage

PROTOCOL = "carelessmem"


class CarelessFileSystem(MemoryFileSystem):
    """An in-memory filesystem whose create-only write silently overwrites."""

    protocol = PROTOCOL
    store: ClassVar[dict] = {}  # its own objects, not MemoryFileSystem's
    pseudo_dirs: ClassVar[list] = [""]

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        super().pipe_file(path, value, mode="overwrite", **kwargs)


fsspec.register_implementation(PROTOCOL, CarelessFileSystem, clobber=True)


@pytest.fixture
def careless(raw_data_context):
    """Stores of this test live on the careless backend; yields its objects (what landed in storage)."""
    CarelessFileSystem.store.clear()
    raw_data_context(f"{PROTOCOL}://bucket-{uuid.uuid4().hex[:8]}/raw")

    flyte.init(org="acme", project="research", domain="development")
    yield CarelessFileSystem.store
    CarelessFileSystem.store.clear()


def allow_unverified_backend(protocol: str, allowed: bool = True) -> bool:
    return flyteplugins_memory.allow_unverified_backend(protocol, allowed)  # looked up late: new in issue 8


@pytest.fixture
def opted_in():
    before = allow_unverified_backend(PROTOCOL)
    yield
    allow_unverified_backend(PROTOCOL, allowed=before)


def test_an_unverified_backend_gets_only_its_own_create_only_write():
    """Why such a backend is refused: no lock or link() of ours stands in for it (it may keep its objects
    anywhere), and its own pipe_file(mode="create") here lets two writers create one commit slot."""
    fs = CarelessFileSystem()
    path = f"/race-{uuid.uuid4().hex}/log/1.json"
    assert create_exclusive(fs, path, b"first") is True
    assert create_exclusive(fs, path, b"second") is True  # the first commit is gone
    assert fs.cat_file(path) == b"second"


def test_unverified_backend_is_refused_before_anything_is_written(careless, key):
    with pytest.raises(UnsupportedBackend, match=PROTOCOL):
        MemoryStore.get_or_create(key=key)
    with pytest.raises(UnsupportedBackend):
        MemoryStore.create(key=key)
    with pytest.raises(UnsupportedBackend):
        MemoryStore.exists(key=key)
    store = MemoryStore(key=key)
    store.write_text("notes.md", "kept locally")
    store.append({"role": "user", "content": "hi"})
    with pytest.raises(UnsupportedBackend):
        store.save()
    assert store.has_unsaved_changes()
    assert careless == {}  # nothing reached storage, not even a read-created directory


async def test_unverified_backend_is_refused_from_async_code_too(careless, key):
    with pytest.raises(UnsupportedBackend):
        await MemoryStore.get_or_create.aio(key=key)
    assert careless == {}


def test_unsupported_backend_is_a_value_error_naming_the_opt_in(careless, key):
    with pytest.raises(ValueError) as raised:
        MemoryStore.get_or_create(key=key)
    assert "allow_unverified_backend('carelessmem')" in str(raised.value)
    assert "FLYTEPLUGINS_MEMORY_UNVERIFIED_BACKENDS=carelessmem" in str(raised.value)


def test_opted_in_backend_works(careless, opted_in, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes.md", "on the careless backend")
    store.append({"role": "user", "content": "hi"})
    store.save()
    names = {path.rsplit(f"/{key}/", 1)[-1] for path in careless}
    assert {"notes.md", "messages.json", "meta/notes.md.json"} <= names
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("notes.md") == "on the careless backend"
    assert reopened.messages == [{"role": "user", "content": "hi"}]
    assert MemoryStore.exists(key=key)


def test_opt_in_through_the_environment(careless, key, monkeypatch):
    monkeypatch.setenv(flyteplugins_memory.UNVERIFIED_BACKENDS_ENV, f"other, {PROTOCOL.upper()}")
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "a")
    store.save()
    assert MemoryStore.get_or_create(key=key).read_text("a.txt") == "a"
    monkeypatch.delenv(flyteplugins_memory.UNVERIFIED_BACKENDS_ENV)
    with pytest.raises(UnsupportedBackend):
        MemoryStore.get_or_create(key=key)


def test_opt_in_can_be_withdrawn(careless, key):
    assert allow_unverified_backend(f"{PROTOCOL}://") is False
    assert allow_unverified_backend(PROTOCOL, allowed=False) is True
    with pytest.raises(UnsupportedBackend):
        MemoryStore.get_or_create(key=key)


def test_an_opted_in_backend_is_not_reported_as_atomic(opted_in):
    assert FsspecStorage(f"{PROTOCOL}://bucket/store").capabilities.atomic_create is False


def test_subclasses_of_verified_filesystems_are_not_verified(tmp_path):
    """A subclass may change exactly what we rely on, so the allow-list matches classes exactly."""

    class MyLocal(LocalFileSystem):
        pass

    with pytest.raises(UnsupportedBackend):
        FsspecStorage(str(tmp_path / "store"), fs=MyLocal())
    assert list(tmp_path.iterdir()) == []


def test_a_backend_fsspec_cannot_provide_is_unsupported():
    with pytest.raises(UnsupportedBackend, match="nosuchfs"):
        FsspecStorage("nosuchfs://bucket/store")


def test_a_real_unverified_backend_is_refused():
    """Azure through the obstore-backed fsspec class that flyte registers: installed, but not verified."""
    with pytest.raises(UnsupportedBackend, match="allow_unverified_backend\\('abfs'\\)"):
        FsspecStorage("abfs://container/store")


@pytest.mark.parametrize(
    ("uri", "symlinks", "cross_process"),
    [("/tmp/x", True, True), ("file:///tmp/x", True, True), ("memory://bucket/x", False, False)],
)
def test_verified_backends_open(uri, symlinks, cross_process):
    capabilities = FsspecStorage(uri).capabilities
    assert capabilities.atomic_create is True
    assert (capabilities.symlinks, capabilities.cross_process) == (symlinks, cross_process)


def test_s3_and_gcs_backends_are_verified(s3_backend, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # constructing makes no request
    assert FsspecStorage("s3://bucket/x").capabilities.atomic_create is True
    assert FsspecStorage("s3://bucket/x").capabilities.if_match is True
    # opens; the emulator ignores preconditions, so it is not "atomic" there (real GCS is)
    assert FsspecStorage("gs://bucket/x").capabilities.atomic_create is False


async def test_concurrent_creates_on_local_disk_yield_one_store(local_backend, key):
    """Local disk declares exclusive_create, so the shared race tests run there; this one is local only."""
    assert "exclusive_create" in local_backend.capabilities
    results = await asyncio.gather(*(MemoryStore.create.aio(key=key) for _ in range(8)), return_exceptions=True)
    assert sum(isinstance(r, MemoryStore) for r in results) == 1
    logs = [n for n in local_backend.journal(key) if "/log/" in n]
    assert logs == ["meta/.journal/log/00000000000000000001.json"]


@pytest.mark.parametrize("uri", ["ftp://host/x", "zip://nothing", "webhdfs://host/x", "reference://x"])
def test_unknown_backends_are_refused_before_anything_is_built(uri):
    with pytest.raises(UnsupportedBackend):
        FsspecStorage(uri)
