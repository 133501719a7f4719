"""Where history meets the other features (issue 23, defects 7 and 8): attribution per write when one save
commits writes of several actors, continuity of a path's history across deletes and restores (with other
commits between, another handle, a checkpoint), and history beside purge and scopes. Local disk and moto
S3; the commit records in storage are checked too."""

from __future__ import annotations

import json

import pytest

from flyteplugins_memory import MemoryStore, VersionNotFound


def records(backend, key: str) -> dict[int, dict]:
    """Every commit record in storage, by seq."""
    journal = backend.journal(key)
    names = [n for n in journal if n.startswith("meta/.journal/log/")]
    return {int(n[19:-5]): json.loads(journal[n]) for n in names if b'"info"' in journal[n]}


def who(store, path: str) -> list[tuple[str, str, str]]:
    """``(version, actor, reason)`` of `path`'s history, newest first (deleted ones as ``-``)."""
    return [("-" if h.deleted else h.sha256[:6], h.actor, h.reason) for h in store.history(path)]


# -- defect 7: attribution per write ----------------------------------------------------------------------


def test_history_names_each_writes_own_actor_and_reason(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("plan.md", "first plan", actor="editor", reason="first plan")
    store.save()
    store.write_text("plan.md", "second plan", actor="editor", reason="second plan")
    store.write_text("picture.md", "a picture", actor="painter", reason="unrelated")
    store.save()
    fresh = MemoryStore.open(key=key)
    assert [(h.actor, h.reason) for h in fresh.history("plan.md")] == [
        ("editor", "second plan"),
        ("editor", "first plan"),
    ]
    assert [(h.actor, h.reason) for h in fresh.history("picture.md")] == [("painter", "unrelated")]
    meta = fresh.get_meta("plan.md")
    assert (meta.updated_by, meta.reason) == ("editor", "second plan")
    events = [(e["path"], e["actor"], e["reason"]) for e in fresh.audit_tail(0)]
    assert ("plan.md", "editor", "second plan") in events and ("picture.md", "painter", "unrelated") in events
    commit = fresh.log(limit=1)[0]  # the commit itself still summarises every write it holds
    assert (commit.actor, commit.reason) == ("editor, painter", "second plan; unrelated")


def test_a_delete_saved_beside_other_writes_is_attributed_to_its_own_actor(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("old.md", "old", actor="writer")
    store.save()
    store.delete("old.md", actor="cleaner", reason="tidy up")
    store.write_text("new.md", "new", actor="writer", reason="new notes")
    store.save()
    fresh = MemoryStore.open(key=key)
    assert who(fresh, "old.md")[0] == ("-", "cleaner", "tidy up")
    seq = fresh.log(limit=1)[0].seq
    assert records(durable_backend, key)[seq]["info"]["ext"]["by"] == {"old.md": ["cleaner", "tidy up"]}


def test_save_actor_and_merged_concurrent_saves_keep_each_writes_attribution(durable_backend, key):
    MemoryStore.create(key=key).save()
    first, second = MemoryStore.open(key=key), MemoryStore.open(key=key)
    first.write_text("a.md", "a", actor="alice", reason="notes")
    second.write_text("b.md", "b", actor="bob", reason="draft")
    first.save(actor="ops", reason="nightly")
    second.save()  # rebased onto the first
    fresh = MemoryStore.open(key=key)
    assert who(fresh, "a.md")[0][1:] == ("alice", "notes")
    assert who(fresh, "b.md")[0][1:] == ("bob", "draft")
    assert fresh.log(limit=2)[1].actor == "ops"  # the commit names what save() was told


# -- defect 8: continuity across deletes and restores --------------------------------------------------


def test_restoring_a_path_deleted_before_other_commits_keeps_its_whole_history(durable_backend, key):
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("a.md", "v1", actor="w1")
    store.save()
    store.write_text("a.md", "v2", actor="w2")
    store.save()
    first = store.history("a.md")[-1].version_id
    store.delete("a.md", actor="d1")
    store.save()
    deleted_at = store.log(limit=1)[0].seq
    store.write_text("b.md", "unrelated")  # the handle's base is no longer the delete
    store.save()
    store.restore("a.md", first, actor="r1")
    store.save()
    restored_at = store.log(limit=1)[0].seq
    assert records(durable_backend, key)[restored_at]["info"]["wrote"] == {"a.md": deleted_at}
    assert who(MemoryStore.open(key=key), "a.md") == [
        (who(store, "a.md")[0][0], "r1", f"restore {first}"),
        ("-", "d1", ""),
        (who(store, "a.md")[2][0], "w2", ""),
        (who(store, "a.md")[3][0], "w1", ""),
    ]


def test_restores_by_other_handles_across_a_checkpoint_keep_the_history(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "v1", actor="w1")
    store.save()
    first = store.history("a.md")[0].version_id
    for round_ in range(3):
        deleter = MemoryStore.open(key=key)
        deleter.delete("a.md", actor=f"d{round_}")
        deleter.save()
        other = MemoryStore.open(key=key)
        other.write_text("b.md", f"b{round_}")
        other.save()
        other.compact()  # the delete is folded into a checkpoint now
        restorer = MemoryStore.open(key=key)
        restorer.restore("a.md", first, actor=f"r{round_}")
        restorer.save()
    actors = [h.actor for h in MemoryStore.open(key=key).history("a.md", limit=50)]
    assert actors == ["r2", "d2", "r1", "d1", "r0", "d0", "w1"]


def test_a_write_after_a_delete_since_the_checkpoint_continues_the_history(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "v1", actor="w1")
    store.save()
    store.compact()  # a.md is in the checkpoint; its delete below is in the records after it
    deleter = MemoryStore.open(key=key)
    deleter.delete("a.md", actor="d1")
    deleter.save()
    other = MemoryStore.open(key=key)
    other.write_text("b.md", "b")
    other.save()
    writer = MemoryStore.open(key=key)  # its base is not the delete
    writer.write_text("a.md", "v2", actor="w2")
    writer.save()
    assert [h.actor for h in MemoryStore.open(key=key).history("a.md")] == ["w2", "d1", "w1"]


def test_a_write_by_another_handle_after_a_create_and_delete_continues_the_history(durable_backend, key):
    """The path was created and deleted since the checkpoint: the records say so (``None``), so a write
    by a handle whose base is a later commit still reads back to the delete and the write before it."""
    store = MemoryStore.create(key=key)
    store.write_text("x.md", "v1", actor="w1")
    store.save()
    store.delete("x.md", actor="d1")
    store.save()
    store.write_text("y.md", "y")
    store.save()
    writer = MemoryStore.open(key=key)
    writer.write_text("x.md", "v2", actor="w2")
    writer.save()
    assert [h.actor for h in MemoryStore.open(key=key).history("x.md")] == ["w2", "d1", "w1"]
    deleted_at = next(c.seq for c in writer.log(limit=10) if "x.md" in c.deleted)
    assert records(durable_backend, key)[deleted_at + 1]["delta"]["files"]["x.md"] is None


# -- history x purge, history x scopes ---------------------------------------------------------------------


def test_history_after_a_purge_shows_the_versions_but_reads_none(durable_backend, key):
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("secret.md", "purged secret 91", actor="w1")
    store.save()
    version = store.history("secret.md")[0].version_id
    store.purge("secret.md", actor="dpo", reason="erasure request")
    fresh = MemoryStore.open(key=key)
    listed = fresh.history("secret.md")
    assert listed[0].deleted and listed[-1].version_id == version
    with pytest.raises(VersionNotFound):
        fresh.read_version("secret.md", version)
    with pytest.raises(VersionNotFound):
        fresh.restore("secret.md", version)
    assert not [n for n, d in durable_backend.stored(key).items() if b"purged secret 91" in d]


def test_a_scope_reads_history_restores_and_diffs_its_own_files(durable_backend, key):
    store = MemoryStore.create(key=key)
    alice = store.scope("users/alice")
    alice.write_text("note.md", "one\n", actor="alice", reason="first")
    store.write_text("users/bob/note.md", "bob\n", actor="bob", reason="his")
    store.save()
    alice.write_text("note.md", "two\n", actor="alice", reason="second")
    store.save()
    listed = alice.history("note.md")
    assert [(h.actor, h.reason) for h in listed] == [("alice", "second"), ("alice", "first")]
    assert "-one\n+two\n" in alice.diff("note.md", listed[1].version_id, listed[0].version_id)
    alice.delete("note.md")
    store.save()
    store.write_text("other.md", "x")
    store.save()
    meta = alice.restore("note.md", listed[1].version_id, actor="alice")
    assert meta.path == "note.md"
    store.save()
    assert [h.actor for h in alice.history("note.md")] == ["alice", "agent", "alice", "alice"]
    assert alice.read_text("note.md") == "one\n"
