"""Every bad input gets a typed error, and nothing on disk or in storage changes."""

from __future__ import annotations

import os
import pathlib

import pytest

from flyteplugins_memory import (
    AccessDenied,
    CorruptStore,
    InvalidKey,
    InvalidPath,
    MemoryStore,
    MemoryStoreError,
    PathEscapesRoot,
    ReadOnlyPath,
    ReservedPath,
    UnsafeStoreContent,
)


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
    ("audit/log.jsonl", ReservedPath),
    ("meta/notes%2Fa.md.json", ReservedPath),
    ("versions/x/1.txt", ReservedPath),
    ("audit", ReservedPath),
    ("policy/rules.md", ReadOnlyPath),
]


@pytest.mark.parametrize(("path", "error"), BAD_PATHS)
def test_bad_write_paths_are_refused_and_change_nothing(backend, key, saved_store, path, error):
    stored, local = backend.objects(key), local_tree(saved_store.root)
    with pytest.raises(error):
        saved_store.write_text(path, "evil")
    with pytest.raises(error):
        saved_store.write_json(path, {"evil": True})
    saved_store.save()
    assert backend.objects(key) == stored
    assert local_tree(saved_store.root) == {**local, "messages.json": local["messages.json"]}
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


@pytest.mark.parametrize("payload", [b"{not json", b'{"role": "user"}', b"[1, 2]", b"\xff\xfe"])
def test_corrupt_transcript_raises_and_is_never_saved_over(backend, key, saved_store, payload):
    backend.put(key, "messages.json", payload)
    stored = backend.objects(key)
    with pytest.raises(CorruptStore):
        MemoryStore.get_or_create(key=key)
    received = MemoryStore._deserialize(saved_store._serialize())
    with pytest.raises(CorruptStore):
        received.save()
    assert backend.objects(key) == stored


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
def test_corrupt_sidecar_raises_on_use_and_is_not_overwritten(backend, key, saved_store, payload):
    backend.put(key, "meta/notes%2Fa.md.json", payload)
    store = MemoryStore.get_or_create(key=key)
    assert store.read_text("notes/a.md") == "keep me"  # the file itself is still readable
    with pytest.raises(CorruptStore):
        store.get_meta("notes/a.md")
    with pytest.raises(CorruptStore):
        store.current_sha("notes/a.md")
    store.write_text("other.txt", "x")
    store.save()
    assert backend.objects(key)["meta/notes%2Fa.md.json"] == payload
    repaired = store.write_text("notes/a.md", "fixed")  # a plain write repairs the sidecar
    assert store.get_meta("notes/a.md") == repaired


def test_hostile_object_names_are_refused(local_backend, key):
    MemoryStore.create(key=key)
    local_backend.put(key, "meta/..%2F..%2Fescape.json", b"{}")
    with pytest.raises(UnsafeStoreContent):
        MemoryStore.get_or_create(key=key)


def test_local_writes_are_atomic(tmp_path, monkeypatch):
    store = MemoryStore(key="k", root=tmp_path / "root")
    store.write_text("doc.txt", "old")

    def crash(*args, **kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.write_text("doc.txt", "new")
    monkeypatch.undo()
    assert (tmp_path / "root" / "doc.txt").read_text() == "old"
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["audit", "doc.txt", "meta"]
