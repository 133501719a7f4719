"""Every bad input gets a typed error, and nothing on disk or in storage changes."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from flyteplugins_memory import (
    AccessDenied,
    CorruptStore,
    InvalidKey,
    InvalidMessage,
    InvalidPath,
    MemoryMeta,
    MemoryStore,
    MemoryStoreError,
    PathEscapesRoot,
    ReadOnlyPath,
    ReservedPath,
    UnsafeStoreContent,
)
from flyteplugins_memory._rules.codecs import encode_meta, sha256_bytes


def local_tree(root: pathlib.Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def saved_store(backend, key):
    store = MemoryStore.get_or_create(key=key, read_only_prefixes=("policy/",))
    store.write_text("notes/a.md", "keep me")
    store.append({"role": "user", "content": "hello"})
    store.save()
    return store


BAD_PATHS = [
    ("/etc/passwd", InvalidPath),
    ("../outside.txt", InvalidPath),
    ("notes/../../outside.txt", InvalidPath),
    ("", InvalidPath),
    ("./", InvalidPath),
    ("notes/a\x00.md", InvalidPath),
    ("messages.json", ReservedPath),
    ("messages.json/x", ReservedPath),
    ("audit/log.jsonl", ReservedPath),
    ("meta/notes%2Fa.md.json", ReservedPath),
    ("versions/x/1.txt", ReservedPath),
    ("audit", ReservedPath),
    ("policy/rules.md", ReadOnlyPath),
]


@pytest.mark.parametrize(("path", "error"), BAD_PATHS)
def test_bad_write_paths_are_refused_and_change_nothing(backend, key, saved_store, path, error):
    stored, local = backend.stored(key), local_tree(saved_store.root)
    with pytest.raises(error):
        saved_store.write_text(path, "evil")
    with pytest.raises(error):
        saved_store.write_json(path, {"evil": True})
    saved_store.save()
    assert backend.stored(key) == stored
    assert local_tree(saved_store.root) == local
    assert saved_store.list_paths() == ["notes/a.md"]


@pytest.mark.parametrize(("path", "error"), [(p, e) for p, e in BAD_PATHS if e is InvalidPath])
def test_bad_read_paths_are_refused(saved_store, path, error):
    for call in (
        saved_store.read_text,
        saved_store.read_json,
        saved_store.get_meta,
        saved_store.current_sha,
        saved_store.exists,
    ):
        with pytest.raises(error):
            call(path)
    if path:  # the empty prefix means "everything" for listings
        with pytest.raises(error):
            saved_store.list_paths(path)


def test_error_classes_keep_upstream_names_and_builtins():
    assert issubclass(InvalidPath, MemoryStoreError) and issubclass(InvalidPath, ValueError)
    assert issubclass(ReservedPath, AccessDenied) and issubclass(ReadOnlyPath, PermissionError)
    assert issubclass(CorruptStore, ValueError) and issubclass(MemoryStoreError, RuntimeError)


@pytest.mark.parametrize("bad_key", ["", ".", "..", "a/b", "a\\b", "a\x00b", "tab\tkey", "new\nline", "\x7f"])
def test_bad_keys_are_refused_before_any_io(backend, bad_key):
    before = backend.fs.find(backend.fs._strip_protocol(backend.raw_data_path)) if backend.name == "local" else []
    for call in (
        lambda: MemoryStore.create(key=bad_key),
        lambda: MemoryStore.get_or_create(key=bad_key),
        lambda: MemoryStore.exists(key=bad_key),
        lambda: MemoryStore.remote_path_for_key(key=bad_key),
        lambda: MemoryStore(key=bad_key),
    ):
        with pytest.raises(InvalidKey):
            call()
    if backend.name == "local":
        assert backend.fs.find(backend.fs._strip_protocol(backend.raw_data_path)) == before


def test_symlink_escape_is_refused_on_read_write_and_listing(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "file-link.txt").symlink_to(outside / "secret.txt")
    store = MemoryStore(key="k", root=root)

    assert store.list_paths() == []  # symlinks are never listed
    for path in ("link/secret.txt", "file-link.txt"):
        with pytest.raises(PathEscapesRoot):
            store.read_text(path)
        with pytest.raises(PathEscapesRoot):
            store.write_text(path, "overwritten")
    with pytest.raises(PathEscapesRoot):
        store.write_text("link/new.txt", "planted")
    with pytest.raises(PathEscapesRoot):
        store.list_paths("link")
    with pytest.raises(PathEscapesRoot):
        store.exists("link/secret.txt")
    assert local_tree(outside) == {"secret.txt": b"secret"}


def write_upstream_layout(backend, key, messages: bytes = b'[{"role": "user", "content": "hi"}]') -> None:
    """A store as upstream writes it (no journal), placed directly in storage."""
    meta = MemoryMeta("notes/a.md", sha256_bytes(b"keep me"), "2026-01-01T00:00:00+00:00", "agent", "", 7)
    backend.put(key, "notes/a.md", b"keep me")
    backend.put(key, "meta/notes%2Fa.md.json", encode_meta(meta))
    backend.put(key, "messages.json", messages)


@pytest.mark.parametrize("payload", [b"{not json", b'{"role": "user"}', b"[1, 2]", b"\xff\xfe", b""])
def test_corrupt_upstream_transcript_raises_and_is_never_saved_over(backend, key, payload):
    write_upstream_layout(backend, key, messages=payload)
    stored = backend.stored(key)
    with pytest.raises(CorruptStore):
        MemoryStore.get_or_create(key=key)
    with pytest.raises(CorruptStore):
        MemoryStore(key=key, remote_path=backend.store_uri(key)).save()
    assert backend.stored(key) == stored


def _record(seq: int, **delta) -> bytes:
    body = {"files": {}, "keep": 0, "append": [], "audit": [], "commits": [], **delta}
    return json.dumps({"format": 1, "seq": seq, "checkpoint": 0, "delta": body}).encode()


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b"{not json", CorruptStore),
        (_record(2, append=[1, 2]), CorruptStore),
        (_record(7), CorruptStore),
        (_record(2, keep=5), CorruptStore),
        (_record(2, files={"a.txt": {"sha256": "0" * 63, "bytes": 1}}), CorruptStore),
        (_record(2, files={"../escape.txt": {"sha256": "0" * 64, "bytes": 1}}), UnsafeStoreContent),
        (_record(2, files={"meta/x.json": {"sha256": "0" * 64, "bytes": 1}}), UnsafeStoreContent),
    ],
)
def test_corrupt_commit_record_raises_and_is_never_saved_over(backend, key, saved_store, payload, error):
    backend.put(key, "meta/.journal/log/00000000000000000002.json", payload)
    stored = backend.stored(key)
    with pytest.raises(error):
        MemoryStore.get_or_create(key=key)
    received = MemoryStore._deserialize(saved_store._serialize())
    with pytest.raises(error):
        received.save()
    assert backend.stored(key) == stored


@pytest.mark.parametrize(
    "payload",
    [
        b"{",
        b"[]",
        b'{"path": "notes/a.md"}',
        b'{"path": "other.md", "sha256": "x", "updated_at": "t", "updated_by": "a", "reason": "", "bytes": 1}',
        b'{"path": "notes/a.md", "sha256": 1, "updated_at": "t", "updated_by": "a", "reason": "", "bytes": 1}',
    ],
)
def test_corrupt_upstream_sidecar_raises_on_use_and_is_not_overwritten(backend, key, payload):
    write_upstream_layout(backend, key)
    backend.put(key, "meta/notes%2Fa.md.json", payload)
    store = MemoryStore.get_or_create(key=key)
    assert store.read_text("notes/a.md") == "keep me"  # the file itself is still readable
    with pytest.raises(CorruptStore):
        store.get_meta("notes/a.md")
    with pytest.raises(CorruptStore):
        store.current_sha("notes/a.md")
    with pytest.raises(CorruptStore):
        store.write_text("notes/a.md", "x", expected_sha="")
    store.write_text("other.txt", "x")
    store.save()
    assert backend.objects(key)["meta/notes%2Fa.md.json"] == payload
    repaired = store.write_text("notes/a.md", "fixed")  # a plain write repairs the sidecar
    assert store.get_meta("notes/a.md") == repaired


def test_tampered_content_is_refused(backend, key, saved_store):
    saved_store.write_text("notes/b.md", "first")
    saved_store.save()
    saved_store.write_text("notes/b.md", "rewritten")  # a rewrite: in a content-addressed blob
    saved_store.save()
    for blob in [n for n in backend.journal(key) if "/blobs/" in n]:
        backend.put(key, blob, b"tampered")
    backend.put(key, "notes/a.md", b"tampered")  # a new file: at its own path (`_journal.inplace`)
    for path in ("notes/a.md", "notes/b.md"):
        with pytest.raises(CorruptStore):
            MemoryStore.get_or_create(key=key).read_text(path)


def test_hostile_object_names_are_refused(backend, key):
    write_upstream_layout(backend, key)
    backend.put(key, "meta/..%2F..%2Fescape.json", b"{}")
    with pytest.raises(UnsafeStoreContent):
        MemoryStore.get_or_create(key=key)


def test_local_writes_are_atomic(tmp_path, monkeypatch):
    from flyteplugins_memory.storage._workdir import WorkDir

    workdir = WorkDir(tmp_path / "root")
    workdir.write("doc.txt", b"old")

    def crash(*args, **kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        workdir.write("doc.txt", b"new")
    monkeypatch.undo()
    assert workdir.read("doc.txt") == b"old"
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["doc.txt"]  # no temp file left


def test_a_failing_local_cache_never_fails_a_committed_save(local_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "saved")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    store.save()
    monkeypatch.undo()
    assert store.read_text("a.txt") == "saved" and not store.has_unsaved_changes()
    assert MemoryStore.get_or_create(key=key).read_text("a.txt") == "saved"


def test_invalid_unicode_in_audit_fields_and_paths_is_refused_and_the_handle_stays_usable(backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("important.md", "hours of work")
    with pytest.raises(InvalidMessage):
        store.write_text("a.txt", "x", reason="caf\udce9")
    with pytest.raises(InvalidMessage):
        store.write_text("a.txt", "x", actor="\udcff")
    with pytest.raises(InvalidPath):
        store.write_text("bad\udcff.txt", "x")
    store.save()
    assert MemoryStore.get_or_create(key=key).list_paths() == ["important.md"]
