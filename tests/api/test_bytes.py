"""Binary content (`write_bytes`, `read_bytes`) and deletes in bulk (`delete_prefix`), on local disk and S3,
checked in storage itself."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from flyteplugins_memory import (
    ConcurrencyError,
    CorruptStore,
    InvalidArgument,
    InvalidContent,
    InvalidKey,
    InvalidMessage,
    InvalidPath,
    MemoryStore,
    NotText,
    ReadOnlyPath,
    ReservedPath,
    StoreDeleted,
)

#: every byte value, NUL and invalid UTF-8 included
BINARY = bytes(range(256)) + b"\xff\xfe\x00\x80"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_bytes_land_byte_exact_with_sidecar_audit_and_version(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    meta = store.write_bytes("img/a.png", BINARY, actor="vision", reason="screenshot")
    assert (meta.sha256, meta.bytes, meta.updated_by) == (sha(BINARY), len(BINARY), "vision")
    store.save()
    view = durable_backend.upstream_view(key)
    assert view["img/a.png"] == BINARY  # upstream reads it at its path
    sidecar = json.loads(view["meta/img%2Fa.png.json"])
    assert (sidecar["sha256"], sidecar["bytes"], sidecar["reason"]) == (sha(BINARY), len(BINARY), "screenshot")
    [version] = [n for n in view if n.startswith("versions/")]
    assert view[version] == BINARY and version.endswith(".txt")  # upstream's snapshot name, exact bytes
    fresh = MemoryStore.open(key=key)
    assert fresh.read_bytes("img/a.png") == BINARY
    assert fresh.read_version_bytes(version) == BINARY
    [event] = fresh.audit_tail(5)
    assert (event["op"], event["new_sha"], event["version_file"]) == ("create", sha(BINARY), version)
    assert (store.root / "img/a.png").read_bytes() == BINARY  # the working root, in upstream's layout


def test_text_reads_of_binary_content_raise_not_text(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_bytes("b.bin", BINARY)
    store.save()
    fresh = MemoryStore.open(key=key)
    with pytest.raises(NotText, match="not valid UTF-8"):
        fresh.read_text("b.bin")
    with pytest.raises(CorruptStore):  # what such reads raised before; still caught the same way
        fresh.read_json("b.bin")
    [version] = fresh.list_versions("b.bin")
    with pytest.raises(NotText):
        fresh.read_version(version)


def test_read_bytes_of_text_is_its_utf8_and_bytes_that_are_utf8_read_as_text(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("t.md", "héllo ✓")
    store.write_bytes("u.txt", "naïve".encode())
    store.save()
    fresh = MemoryStore.open(key=key)
    assert fresh.read_bytes("t.md") == "héllo ✓".encode()
    assert fresh.read_text("u.txt") == "naïve"
    assert fresh.read_bytes("missing") is None and fresh.read_bytes("missing", b"d") == b"d"
    assert fresh.current_sha("t.md") == sha("héllo ✓".encode())


def test_write_bytes_expected_sha_guards_here_and_at_save(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    first = store.write_bytes("blob", b"\x00one", expected_sha="")
    store.save()
    other = MemoryStore.open(key=key)
    with pytest.raises(ConcurrencyError):
        store.write_bytes("blob", b"\x00two", expected_sha="0" * 64)
    store.write_bytes("blob", b"\x00two", expected_sha=first.sha256)
    other.write_bytes("blob", b"\x00three", expected_sha=first.sha256)
    other.save()
    with pytest.raises(ConcurrencyError):
        store.save()
    assert MemoryStore.open(key=key).read_bytes("blob") == b"\x00three"


def test_concurrent_binary_writes_of_different_paths_merge(durable_backend, key):
    a = MemoryStore.get_or_create(key=key)
    b = MemoryStore.open(key=key)
    a.write_bytes("a.bin", b"\xffA")
    b.write_bytes("b.bin", bytearray(b"\xffB"))
    a.save()
    b.save()
    fresh = MemoryStore.open(key=key)
    assert (fresh.read_bytes("a.bin"), fresh.read_bytes("b.bin")) == (b"\xffA", b"\xffB")


def test_write_bytes_copies_mutable_buffers(tmp_path):
    store = MemoryStore(key="k", root=tmp_path / "r")
    buffer = bytearray(b"\x01\x02")
    store.write_bytes("x", memoryview(buffer))
    buffer[0] = 9
    assert store.read_bytes("x") == b"\x01\x02"


def test_bad_binary_input_is_refused_with_typed_errors(tmp_path):
    store = MemoryStore(key="k", root=tmp_path / "r", read_only_prefixes=("ro/",))
    for bad in ("text", 42, None, [1, 2]):
        with pytest.raises(InvalidContent):
            store.write_bytes("x", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidContent):
        store.write_text("x", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ReservedPath):
        store.write_bytes("meta/x", b"")
    with pytest.raises(ReadOnlyPath):
        store.write_bytes("ro/x", b"")
    with pytest.raises(InvalidPath):
        store.write_bytes("../x", b"")
    with pytest.raises(InvalidArgument):
        store.read_bytes("x", default="text")  # type: ignore[arg-type]
    assert store.list_paths() == [] and not store.has_unsaved_changes()


# -- delete_prefix -------------------------------------------------------------------------------------


def test_delete_prefix_deletes_the_directory_audited_in_one_save(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    for path in ("notes/a.md", "notes/x/b.md", "notes.md", "notesy/c.md", "other/d.md"):
        store.write_text(path, path)
    store.save()
    seq = len(store.log(100))
    deleted = store.delete_prefix("notes/", actor="cleaner", reason="reset")
    assert deleted == ["notes/a.md", "notes/x/b.md"]
    assert store.list_paths() == ["notes.md", "notesy/c.md", "other/d.md"]
    assert store.has_unsaved_changes()
    assert MemoryStore.open(key=key).list_paths("notes") == ["notes/a.md", "notes/x/b.md"]  # not saved by itself
    store.save()
    assert len(store.log(100)) == seq + 1  # one commit
    fresh = MemoryStore.open(key=key)
    assert fresh.list_paths() == ["notes.md", "notesy/c.md", "other/d.md"]
    events = [e for e in fresh.audit_tail(0) if e["op"] == "delete"]
    assert [(e["path"], e["actor"], e["reason"]) for e in events] == [(p, "cleaner", "reset") for p in deleted]
    assert all("_deleted_" in e["version_file"] for e in events)  # tombstone snapshots
    view = durable_backend.upstream_view(key)
    assert not [n for n in view if n.startswith(("notes/", "meta/notes%2F"))]
    assert view["notes.md"] == b"notes.md"


def test_delete_prefix_of_nothing_and_with_unsaved_writes(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    assert store.delete_prefix("nothing") == []
    store.write_text("tmp/new.txt", "unsaved")
    assert store.delete_prefix("tmp") == ["tmp/new.txt"]
    store.save()  # created and deleted before any save: only the two audit events are saved
    fresh = MemoryStore.open(key=key)
    assert fresh.list_paths() == [] and [e["op"] for e in fresh.audit_tail(0)] == ["create", "delete"]
    assert "tmp/new.txt" not in durable_backend.upstream_view(key)


def test_delete_prefix_merges_with_a_concurrent_save(durable_backend, key):
    a = MemoryStore.get_or_create(key=key)
    a.write_text("cache/1", "1")
    a.write_text("keep", "k")
    a.save()
    b = MemoryStore.open(key=key)
    b.write_text("new", "n")
    b.save()
    a.delete_prefix("cache")
    a.save()
    assert MemoryStore.open(key=key).list_paths() == ["keep", "new"]


def test_delete_prefix_refuses_bad_prefixes_before_deleting_anything(tmp_path):
    store = MemoryStore(key="k", root=tmp_path / "r")
    store.write_text("a/ro/x", "x")
    store.write_text("a/y", "y")
    store.write_text("lock/z", "z")
    store.read_only_prefixes = ("a/ro", "lock")
    for bad, error in [("", InvalidPath), (".", InvalidPath), ("../a", InvalidPath), ("/a", InvalidPath)]:
        with pytest.raises(error):
            store.delete_prefix(bad)
    for reserved in ("meta", "audit/", "versions", "messages.json"):
        with pytest.raises(ReservedPath):
            store.delete_prefix(reserved)
    for read_only in ("a", "a/ro", "lock"):
        with pytest.raises(ReadOnlyPath):
            store.delete_prefix(read_only)
    with pytest.raises(InvalidPath):
        store.delete_prefix(42)  # type: ignore[arg-type]
    assert store.list_paths() == ["a/ro/x", "a/y", "lock/z"]  # all or none


# -- delete_store --------------------------------------------------------------------------------------


def fill_store(key: str, **options) -> MemoryStore:
    store = MemoryStore.get_or_create(key=key, keep_versions=True, **options)
    store.append({"role": "user", "content": "hi"})
    store.write_text("notes/a.md", "a")
    store.write_bytes("img/b.png", BINARY)
    store.save()
    store.write_text("notes/a.md", "a2")
    store.save()
    return store


def deletion_records(backend, key: str) -> dict[str, dict]:
    return {n: json.loads(d) for n, d in backend.journal(key).items()}


def test_delete_store_removes_prefix_and_journal_leaving_its_deletion_record(durable_backend, key):
    fill_store(key)
    other = f"{key}-other"
    MemoryStore.get_or_create(key=other).save()
    assert durable_backend.upstream_view(key) and len(durable_backend.journal(key)) > 3
    assert MemoryStore.delete_store(key=key, actor="admin", reason="user asked") is True
    assert durable_backend.objects(key) == {}  # upstream's layout: nothing left
    left = deletion_records(durable_backend, key)
    assert "meta/.journal/head.json" in left and all(r["deleted"] is True for r in left.values())
    record = left["meta/.journal/head.json"]
    assert (record["actor"], record["reason"], record["files"], record["seq"]) == (
        "admin",
        "user asked",
        2,
        4,
    )  # create + 2 saves
    assert not MemoryStore.exists(key=key) and MemoryStore.exists(key=other)
    assert key not in MemoryStore.list_keys() and other in MemoryStore.list_keys()
    with pytest.raises(StoreDeleted, match=r"deleted by 'admin'.*user asked"):
        MemoryStore.open(key=key)
    assert MemoryStore.delete_store(key=key) is False  # already gone
    assert MemoryStore.delete_store(key="never-was") is False


def test_a_handle_of_a_deleted_store_cannot_save_it_back(durable_backend, key):
    stale = fill_store(key)
    received = MemoryStore.open(key=key)
    assert MemoryStore.delete_store(key=key)
    stale.write_text("notes/late.md", "late")
    with pytest.raises(StoreDeleted):
        stale.save()
    received.append({"role": "user", "content": "late"})
    with pytest.raises(StoreDeleted):
        received.save()
    assert stale.has_unsaved_changes()  # nothing lost silently: the handle still holds its changes
    with pytest.raises(StoreDeleted):  # content it had not read yet: gone with the store, and it says so
        received.read_bytes("img/b.png")
    with pytest.raises(StoreDeleted):
        stale.refresh()
    assert durable_backend.objects(key) == {}
    assert all(r["deleted"] is True for r in deletion_records(durable_backend, key).values())


def test_a_save_racing_delete_store_either_lands_before_it_or_fails(durable_backend, key):
    fill_store(key)
    writer = MemoryStore.open(key=key)
    writer.write_text("race.txt", "r")

    async def both():
        return await asyncio.gather(writer.save.aio(), MemoryStore.delete_store.aio(key=key), return_exceptions=True)

    saved, deleted = asyncio.run(both())
    assert deleted is True
    # it committed before the deletion (and was deleted with the store), or was refused
    assert not isinstance(saved, BaseException) or isinstance(saved, StoreDeleted), saved
    assert durable_backend.objects(key) == {}
    assert all(r["deleted"] is True for r in deletion_records(durable_backend, key).values())
    with pytest.raises(StoreDeleted):
        MemoryStore.open(key=key)


def test_delete_store_refuses_read_only_content_unless_trusted(durable_backend, key):
    store = fill_store(key, trusted=True)
    store.set_read_only_prefixes(["notes/"])  # persisted with the store (`_rules.read_only`)
    with pytest.raises(ReadOnlyPath, match="trusted=True"):
        MemoryStore.delete_store(key=key)
    assert MemoryStore.open(key=key).read_text("notes/a.md") == "a2"  # nothing deleted
    store.set_read_only_prefixes(["memory/"])
    assert MemoryStore.delete_store(key=key) is True  # no file under memory/: allowed
    assert durable_backend.objects(key) == {}


def test_delete_store_of_read_only_content_with_trusted(durable_backend, key):
    fill_store(key, trusted=True).set_read_only_prefixes(["img/"])
    assert MemoryStore.delete_store(key=key, trusted=True, reason="trusted reset") is True
    assert durable_backend.objects(key) == {}


def test_delete_store_of_an_upstream_written_store(local_backend, key):
    import flyte.ai.agents as upstream

    store = upstream.MemoryStore.get_or_create(key=key)
    store.write_text("u.txt", "upstream")
    store.save()
    assert MemoryStore.delete_store(key=key, reason="migrate") is True
    assert local_backend.objects(key) == {}
    assert not MemoryStore.exists(key=key)


def test_delete_store_bad_input():
    for bad in ("", "a/b", "..", 42):
        with pytest.raises(InvalidKey):
            MemoryStore.delete_store(key=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        MemoryStore.delete_store(key="k", trusted="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        MemoryStore.delete_store(key="k", actor=None)  # type: ignore[arg-type]


#: The deployed release (issue 9's): its handles may still be running when a store is deleted.
ISSUE9_RELEASE = "370d8ce"


@pytest.fixture(scope="module")
def issue9_release(tmp_path_factory):
    from released import released_source

    return released_source(ISSUE9_RELEASE, tmp_path_factory.mktemp("issue9"))


@pytest.mark.slow
def test_a_handle_of_the_deployed_release_cannot_save_a_deleted_store_back(
    durable_backend, key, issue9_release, request, tmp_path
):
    import time

    from released import result_of, start_released

    fill_store(key)
    ready, go = tmp_path / "ready", tmp_path / "go"
    endpoint = request.getfixturevalue("moto_endpoint") if durable_backend.name == "s3" else None
    config = {
        "key": key,
        "raw": durable_backend.raw_data_path,
        "endpoint": endpoint,
        "ready": str(ready),
        "go": str(go),
    }
    child = start_released(issue9_release, "save_after", config)
    while not ready.exists():
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    assert MemoryStore.delete_store(key=key)
    go.touch()
    seen = result_of(child)
    assert seen["error"] == "StoreFormatTooNew", seen  # the deletion record is a newer format to it
    assert all(r["deleted"] is True for r in deletion_records(durable_backend, key).values())  # no commit landed
    with pytest.raises(StoreDeleted):
        MemoryStore.open(key=key)
    # what it can leave: the file it created in place before its commit failed (a stray no reader of ours sees)
    assert set(durable_backend.objects(key)) <= {"released.txt"}


def test_the_deletion_record_parses_only_as_itself():
    from flyteplugins_memory._rules.markers import Deleted, encode_marker, parse_deleted, parse_marker

    record = Deleted(deleted=True, seq=4, at="2026-01-01T00:00:00.000+00:00", actor="a", reason="r", files=2)
    data = encode_marker(record)
    assert parse_deleted(data) == parse_marker(data) == record.model_copy(update={"writer": parse_deleted(data).writer})
    assert json.loads(data)["format"] == 2 and json.loads(data)["writer"].startswith("flyteplugins-memory ")
    for other in (b'{"seq": 4, "at": "x"}', b'{"collected": true}', b"not json", b'{"deleted": false, "seq": 1}'):
        assert parse_deleted(other) is None


def test_delete_prefix_also_drops_unsaved_records_of_logs_under_it(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.records("n").append("old")
    store.save()
    store.records("n").append("unsaved")
    store.records("n/inner").append("unsaved too")
    store.records("nx").append("kept: another directory")
    deleted = store.delete_prefix("n")
    assert len(deleted) == 1 and deleted[0].startswith("n/")
    assert store.records("n").count() == 0 and store.records("n/inner").count() == 0
    store.save()
    assert [n for n in durable_backend.upstream_view(key) if n.startswith("n/")] == []
    fresh = MemoryStore.open(key=key)
    assert fresh.records("n").read() == [] and fresh.records("nx").read() == ["kept: another directory"]
