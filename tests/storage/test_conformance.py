"""The store's API, run unchanged on every backend, checked against what landed in storage.

The storage contract itself (layout, create exclusivity, races, conflicts, crash-free saves, path rules,
symlinks, upstream interop) lives in the conformance kit, `flyteplugins_memory.testing`, which
tests/storage/test_kit.py runs on the same four backends."""

from __future__ import annotations

import pytest

from flyteplugins_memory import (
    ConcurrencyError,
    MemoryMeta,
    MemoryStore,
)


def test_reads_of_missing_paths_return_defaults(backend, key):
    store = MemoryStore.get_or_create(key=key)
    assert store.read_text("nope.txt", default="d") == "d"
    assert store.read_json("nope.json", default={"x": 1}) == {"x": 1}
    assert store.get_meta("nope.txt") is None
    assert store.current_sha("nope.txt") == ""
    assert store.exists("nope.txt") is False
    assert store.list_paths("nope") == []


def test_list_paths_and_exists_follow_directories(backend, key):
    store = MemoryStore.get_or_create(key=key)
    for path in ("a/x.txt", "a/b/y.txt", "ab.txt", "z.txt"):
        store.write_text(path, path)
    assert store.list_paths() == ["a/b/y.txt", "a/x.txt", "ab.txt", "z.txt"]
    assert store.list_paths("a") == ["a/b/y.txt", "a/x.txt"]
    assert store.list_paths("a/b/") == ["a/b/y.txt"]
    assert store.exists("a") and store.exists("a/b/y.txt") and not store.exists("a/q")


def test_expected_sha_guards_writes(backend, key):
    store = MemoryStore.get_or_create(key=key)
    first = store.write_text("doc.txt", "v1", expected_sha="")
    with pytest.raises(ConcurrencyError) as info:
        store.write_text("doc.txt", "v2", expected_sha="0" * 64)
    assert info.value.path == "doc.txt" and info.value.actual_sha == first.sha256
    assert store.read_text("doc.txt") == "v1"
    second = store.write_text("doc.txt", "v2", expected_sha=first.sha256)
    store.save()
    assert backend.objects(key)["doc.txt"] == b"v2"
    assert [(e["op"], e["old_sha"], e["new_sha"]) for e in store.audit_tail()] == [
        ("create", "", first.sha256),
        ("update", first.sha256, second.sha256),
    ]


def test_keep_versions_snapshots_every_write(backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("doc.txt", "v1")
    store.write_text("doc.txt", "v2")
    store.write_text("doc.txt", "v2")
    store.save()
    versions = {n: d for n, d in backend.objects(key).items() if n.startswith("versions/doc.txt/")}
    assert sorted(versions.values()) == [b"v1", b"v2", b"v2"]
    events = store.audit_tail()
    assert sorted(e["version_file"] for e in events) == sorted(versions)
    assert store.list_versions("doc.txt") == sorted(versions)
    assert MemoryStore.get_or_create(key=key).list_versions("doc.txt") == sorted(versions)
    assert store.read_version(events[0]["version_file"]) == "v1"


def test_audit_off_writes_no_log(backend, key):
    store = MemoryStore.get_or_create(key=key, audit=False)
    store.write_text("a.txt", "x")
    store.compact()
    assert "audit/log.jsonl" not in backend.objects(key)
    assert store.audit_tail() == []


async def test_every_io_call_has_an_aio_twin(backend, key):
    store = await MemoryStore.get_or_create.aio(key=key)
    assert await MemoryStore.exists.aio(key=key)
    meta = await store.write_text.aio("a.txt", "x")
    assert isinstance(meta, MemoryMeta)
    await store.write_json.aio("b.json", [1])
    assert await store.read_text.aio("a.txt") == "x"
    assert await store.read_json.aio("b.json") == [1]
    assert await store.list_paths.aio() == ["a.txt", "b.json"]
    assert await store.exists.aio("a.txt")
    assert (await store.get_meta.aio("a.txt")) == meta
    assert await store.current_sha.aio("a.txt") == meta.sha256
    assert len(await store.audit_tail.aio(1)) == 1
    await store.flush_messages.aio()
    await store.save.aio()
    assert backend.objects(key)["a.txt"] == b"x"
    assert await store.list_versions.aio("a.txt") == []
