"""The store contract, run unchanged on every backend, checked against what landed in storage."""

from __future__ import annotations

import json
import pathlib

import pytest

from flyteplugins_memory import (
    AccessDenied,
    ConcurrencyError,
    MemoryMeta,
    MemoryStore,
    ReadOnlyPath,
    ReservedPath,
    StoreAlreadyExists,
    UnsafeStoreContent,
)


def test_create_writes_the_upstream_layout(backend, key):
    store = MemoryStore.create(key=key)
    assert store.remote_path == backend.store_uri(key)
    assert "/agents/memory-store/v0/acme/research/development/" in store.remote_path
    assert backend.upstream_view(key) == {"messages.json": b"[]"}
    assert MemoryStore.exists(key=key) is True
    assert MemoryStore.exists(key=key + "-other") is False


def test_create_of_an_existing_key_raises_and_changes_nothing(backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "kept")
    store.save()
    before = backend.stored(key)
    with pytest.raises(StoreAlreadyExists):
        MemoryStore.create(key=key)
    assert backend.stored(key) == before


def test_save_and_reopen_round_trip(backend, key):
    store = MemoryStore.get_or_create(key=key)
    meta = store.write_text("notes/today.md", "# hi", actor="planner", reason="first note")
    store.write_json("state/plan.json", {"b": 1, "a": [1, 2]})
    store.extend([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    store.save()

    objects = backend.objects(key)
    assert objects["notes/today.md"] == b"# hi"
    assert json.loads(objects["state/plan.json"]) == {"a": [1, 2], "b": 1}
    sidecar = json.loads(objects["meta/notes%2Ftoday.md.json"])
    assert sidecar == {
        "path": "notes/today.md",
        "sha256": meta.sha256,
        "updated_at": meta.updated_at,
        "updated_by": "planner",
        "reason": "first note",
        "bytes": 4,
    }
    assert json.loads(objects["messages.json"])[1] == {"role": "assistant", "content": "a"}
    assert "audit/log.jsonl" not in objects  # upstream's audit log is brought up to date by checkpoints
    store.compact()
    assert [json.loads(line)["path"] for line in backend.objects(key)["audit/log.jsonl"].splitlines()] == [
        "notes/today.md",
        "state/plan.json",
    ]

    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.list_paths() == ["notes/today.md", "state/plan.json"]
    assert reopened.read_text("notes/today.md") == "# hi"
    assert reopened.read_json("state/plan.json") == {"a": [1, 2], "b": 1}
    assert reopened.messages == store.messages
    assert reopened.get_meta("notes/today.md") == meta
    assert reopened.current_sha("notes/today.md") == meta.sha256
    assert [e["op"] for e in reopened.audit_tail()] == ["create", "create"]


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


def test_policy_refusals(backend, key):
    store = MemoryStore.get_or_create(key=key, read_only_prefixes=("memory/",))
    for path, error in [
        ("memory/core.md", ReadOnlyPath),
        ("messages.json", ReservedPath),
        ("audit/log.jsonl", ReservedPath),
        ("meta/x.json", ReservedPath),
        ("versions/x/y.txt", ReservedPath),
    ]:
        with pytest.raises(error):
            store.write_text(path, "x")
        assert issubclass(error, AccessDenied) and issubclass(error, PermissionError)
    store.save()
    assert backend.upstream_view(key) == {"messages.json": b"[]"}


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


def test_symlinked_objects_in_storage_are_refused(backend, key, tmp_path):
    if "symlinks" not in backend.capabilities:
        pytest.skip(f"{backend.name} has no symlinks: an object name can never point elsewhere")
    from flyte.ai.agents import MemoryStore as UpstreamStore

    (tmp_path / "secret.txt").write_text("secret")
    upstream = UpstreamStore.get_or_create(key=key)  # no journal: ours imports it by listing
    upstream.save()
    (pathlib.Path(upstream.remote_path) / "leak.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(UnsafeStoreContent):
        MemoryStore.get_or_create(key=key)

    ours = MemoryStore.create(key=key + "-j")
    ours.write_text("a.txt", "first")
    ours.write_text("b.txt", "first")
    ours.save()
    meta = ours.write_text("b.txt", "secret")  # same bytes as the planted target
    ours.save()
    # a new file is stored at its own path (`_inplace`), a rewrite in a content-addressed blob: a symlink
    # planted in either place is refused
    blob = next(pathlib.Path(backend.journal_prefix(key + "-j")).rglob(meta.sha256))
    for planted, path in ((pathlib.Path(backend.prefix(key + "-j")) / "a.txt", "a.txt"), (blob, "b.txt")):
        planted.unlink()
        planted.symlink_to(tmp_path / "secret.txt")
        with pytest.raises(UnsafeStoreContent):
            MemoryStore.get_or_create(key=key + "-j").read_text(path)
