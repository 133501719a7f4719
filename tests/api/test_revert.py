"""`MemoryStore.revert`: dropping a handle's unsaved file changes, checked in storage after the next save,
on every backend."""

from __future__ import annotations

import pytest

from flyteplugins_memory import InvalidArgument, InvalidPath, MemoryStore


def test_reverted_changes_never_reach_storage_and_the_rest_does(backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("kept.md", "v1")
    store.write_text("edited.md", "v1")
    store.write_text("gone.md", "v1")
    store.save()

    store.write_text("edited.md", "v2", metadata={"tag": "x"})
    store.delete("gone.md")
    store.write_text("new.md", "fresh")
    store.write_text("also.md", "saved")
    store.append({"role": "user", "content": "kept too"})
    assert store.revert(["edited.md", "gone.md", "new.md", "never-changed.md"]) == ["edited.md", "gone.md", "new.md"]

    assert store.read_text("edited.md") == "v1" and store.get_meta("edited.md").metadata == {}
    assert store.read_text("gone.md") == "v1" and not store.exists("new.md")
    store.save()
    objects = backend.objects(key)
    assert objects["edited.md"] == b"v1" and objects["gone.md"] == b"v1"
    assert "new.md" not in objects and objects["also.md"] == b"saved"
    fresh = MemoryStore.open(key=key)
    assert fresh.read_text("edited.md") == "v1" and fresh.messages[-1]["content"] == "kept too"
    touched = {e["path"] for e in fresh.audit_tail(0)}
    assert "new.md" not in touched and fresh.log(limit=1)[0].wrote == ("also.md",)


def test_revert_everything_and_bad_input(local_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "a")
    store.write_text("b/c.md", "c")
    assert store.revert() == ["a.md", "b/c.md"] and not store.has_unsaved_changes()
    assert store.revert() == []
    for bad in ("a.md", 7):
        with pytest.raises(InvalidArgument):
            store.revert(bad)
    with pytest.raises(InvalidPath):
        store.revert([None])
    with pytest.raises(InvalidPath):
        store.revert(["../x"])
    store.save()
    assert MemoryStore.open(key=key).list_paths() == []
