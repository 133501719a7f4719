"""Ranged reads on every backend (`ObjectStorage.read_range`) and large objects read as parallel parts
(`storage._ranges`): the bytes match what the backend itself holds, in one wave, with bounded memory."""

from __future__ import annotations

import os

from flyteplugins_memory._base.syncify import run_sync
from flyteplugins_memory.storage import _ranges
from flyteplugins_memory.storage._fsspec import FsspecStorage, filesystem_for


def _storage(backend, key: str) -> FsspecStorage:
    return FsspecStorage(backend.store_uri(key))


def test_read_range_returns_the_bytes_the_backend_holds(backend):
    data = os.urandom(1000)
    backend.fs.pipe_file(backend.prefix("ranges") + "/blob", data)  # written by the backend itself
    storage = _storage(backend, "ranges")
    got = run_sync(_ranges_of, storage, [(0, 10), (10, 1000), (990, 1000), (995, 2000), (1000, 1100)])
    assert got == [data[:10], data[10:], data[990:], data[995:], b""]
    assert run_sync(storage.read_range, "absent", 0, 10) is None


async def _ranges_of(storage: FsspecStorage, bounds: list[tuple[int, int]]) -> list[bytes | None]:
    return [await storage.read_range("blob", start, end) for start, end in bounds]


def test_part_bounds_cover_the_object_once():
    assert _ranges.part_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert _ranges.part_bounds(8, 4) == [(0, 4), (4, 8)]
    assert _ranges.part_bounds(0, 4) == [(0, 0)]


def test_a_large_object_is_read_in_parts_and_joined(backend, monkeypatch):
    monkeypatch.setattr(_ranges, "PART_SIZE", 256)
    data = os.urandom(256 * 5 + 17)  # 6 parts of 256 (fewer than MAX_PARTS)
    backend.fs.pipe_file(backend.prefix("parts") + "/blob", data)
    storage = _storage(backend, "parts")
    assert run_sync(_ranges.read_in_parts, storage, "blob", len(data)) == data
    assert run_sync(_ranges.read_in_parts, storage, "absent", len(data)) is None
    # a record that says more bytes than the object holds gets the object (short): its hash then fails
    assert run_sync(_ranges.read_in_parts, storage, "blob", len(data) + 600) == data


def test_the_parts_of_a_large_read_go_out_in_one_wave(durable_backend, monkeypatch):
    from flyteplugins_memory.testing.faults import Faults, FaultyFileSystem

    monkeypatch.setattr(_ranges, "PART_SIZE", 64 * 1024)
    data = os.urandom(1024 * 1024)
    durable_backend.fs.pipe_file(durable_backend.prefix("wave") + "/blob", data)
    faults = Faults(latency=0.002)
    uri = durable_backend.store_uri("wave")
    storage = FsspecStorage(uri, FaultyFileSystem(filesystem_for(uri), faults))
    with faults.measure() as measured:
        assert run_sync(_ranges.read_in_parts, storage, "blob", len(data)) == data
    assert measured.requests == _ranges.MAX_PARTS and measured.waves == 1, measured.describe()
