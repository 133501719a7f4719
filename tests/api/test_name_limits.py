"""Paths whose stored names would be too long are refused when written, never halfway through a save.

A path is stored as itself, as its sidecar ``meta/<quote(path, safe="")>.json`` (one file name, so
255 bytes on local disk, and the store's local working root has this layout on every backend) and as
version snapshots ``versions/<quote(path)>/<ts>_<sha>[_<salt>].txt``; on S3 and GCS each full key,
store prefix included, is at most 1,024 bytes.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from backends import make_backend
from flyteplugins_memory import InvalidPath, MemoryStore

#: ``2026-01-01T00-00-00+00-00`` (25) + ``_`` + sha256 (64) + ``_`` + salt (8) + ``.txt``
LONGEST_VERSION_FILE = 25 + 1 + 64 + 1 + 12 + 4  # <ts>_<sha256>_<token>.txt (see _writes._version)


@pytest.fixture(params=["s3", "gcs"])
def object_store(request, tmp_path, raw_data_context):
    chosen = make_backend(request.param, tmp_path, request)
    raw_data_context(chosen.raw_data_path)
    return chosen


def sidecar(path: str) -> str:
    return f"meta/{quote(path, safe='')}.json"


def round_trip(backend, key: str, path: str, *, versions: bool = False) -> None:
    """Write `path`, save, and check storage, a reopened handle and upstream's real class."""
    store = MemoryStore.get_or_create(key=key, keep_versions=versions)
    store.write_text(path, "first", actor="writer")
    if versions:
        store.write_text(path, "second", actor="writer")
    store.append({"role": "user", "content": "long names"})
    store.save()
    stored = backend.upstream_view(key)
    text = "second" if versions else "first"
    assert stored[path] == text.encode() and sidecar(path) in stored
    if versions:
        assert sorted(stored[n] for n in stored if n.startswith("versions/")) == [b"first", b"second"]
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text(path) == text and reopened.get_meta(path).updated_by == "writer"
    assert reopened.messages == [{"role": "user", "content": "long names"}]
    upstream = UpstreamStore.get_or_create(key=key)
    assert upstream.list_paths() == [path]
    assert upstream.read_text(path) == text and upstream.get_meta(path).updated_by == "writer"


def test_a_233_byte_name_round_trips(durable_backend, key):
    round_trip(durable_backend, key, "n" * 229 + ".txt")


def test_the_longest_allowed_name_round_trips_with_versions(durable_backend, key):
    path = "L" * 246 + ".txt"  # 250 bytes: its sidecar name is exactly 255
    assert len(sidecar(path).split("/")[1]) == 255
    round_trip(durable_backend, key, path, versions=True)


def test_a_name_one_byte_longer_is_refused_when_written(backend, key):
    store = MemoryStore.get_or_create(key=key)
    path = "L" * 247 + ".txt"  # 251 bytes: the file name fits, its sidecar name (256) does not
    with pytest.raises(InvalidPath, match="sidecar"):
        store.write_text(path, "x")
    with pytest.raises(InvalidPath):
        store.write_json(path, {"x": 1})
    with pytest.raises(InvalidPath):
        store.write_text("a" * 256, "x")
    assert not store.has_unsaved_changes() and store.list_paths() == []
    store.write_text("ok.txt", "ok")
    store.save()
    assert not any(len(part.encode()) > 255 for name in backend.objects(key) for part in name.split("/"))


def test_a_multibyte_name_is_measured_by_its_quoted_sidecar(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    too_long = "é" * 42  # 84 bytes as UTF-8, but each é quotes to %C3%A9: a 257-byte sidecar name
    assert len(too_long.encode()) == 84 and len(sidecar(too_long).split("/")[1]) == 257
    with pytest.raises(InvalidPath):
        store.write_text(too_long, "x")
    assert not store.has_unsaved_changes()
    round_trip(durable_backend, key, "é" * 41)  # a 251-byte sidecar name


def test_a_deep_path_of_short_segments_is_measured_by_its_sidecar(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    deep = "d/" * 62 + "f.md"  # every / quotes to %2F in the one-segment sidecar name: 257 bytes
    assert max(len(s) for s in deep.split("/")) == 4 and len(sidecar(deep).split("/")[1]) == 257
    with pytest.raises(InvalidPath):
        store.write_text(deep, "x")
    round_trip(durable_backend, key, "d/" * 61 + "f.md")  # 253 bytes


def test_local_disk_save_leaves_no_temp_files_beside_long_names(local_backend, key):
    round_trip(local_backend, key, "n" * 250)
    assert not [n for n in local_backend.objects(key) if ".~fpm-" in n]


def _store_key_prefix(backend, key: str) -> str:
    """The part of the store's URI an object key starts with (everything after the bucket)."""
    return backend.store_uri(key).split("://", 1)[1].partition("/")[2]


def _longest_allowed_file(backend, key: str) -> str:
    """The longest top-level ASCII name whose longest key, a version snapshot's, is 1,024 bytes."""
    prefix = _store_key_prefix(backend, key)
    room = 1024 - len(f"{prefix}/versions/") - len("/") - LONGEST_VERSION_FILE
    assert 0 < room < 250  # the key limit, not the file-name limit, is what binds here
    return "f" * room


def test_a_long_store_prefix_bounds_names_when_the_location_is_known(object_store, key):
    key = key + "-" + "k" * 700
    allowed = _longest_allowed_file(object_store, key)
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    with pytest.raises(InvalidPath, match="1024"):
        store.write_text(allowed + "f", "x")  # fits every local limit; a key would be 1,025 bytes
    store.write_text(allowed, "v1")
    store.write_text(allowed, "v2")
    store.save()
    stored = object_store.upstream_view(key)
    assert stored[allowed] == b"v2" and sidecar(allowed) in stored
    keys = [f"{_store_key_prefix(object_store, key)}/{name}" for name in object_store.objects(key)]
    assert max(len(k.encode()) for k in keys) <= 1024
    assert MemoryStore.get_or_create(key=key).read_text(allowed) == "v2"


def test_a_long_store_prefix_found_at_save_uploads_nothing(object_store, key):
    key = key + "-" + "k" * 700
    too_long = _longest_allowed_file(object_store, key) + "f"
    store = MemoryStore(key=key)  # where it lives is resolved at its first save
    store.write_text("fine.txt", "fine")
    store.write_text(too_long, "x")  # nothing tells yet that keys would be too long
    with pytest.raises(InvalidPath, match="1024"):
        store.save()
    assert object_store.objects(key) == {}  # not a blob, not a commit, not a sidecar
    assert store.has_unsaved_changes()
    store.delete(too_long)  # the handle keeps its changes; drop the offending one and save
    store.save()
    assert MemoryStore.get_or_create(key=key).list_paths() == ["fine.txt"]
