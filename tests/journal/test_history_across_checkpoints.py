"""A path's history across checkpoints and purges (issue 23, found by the model of the whole store): a delete
folded into a checkpoint two or more checkpoints back (purges write checkpoints, so purges of other paths
fold it) still links the next write of the path to it, whichever base the writing handle had; a purge of a
path the store never held is no version of it, also once gc() collected the history around it. Local disk
and moto S3; the commit records and checkpoints in storage are checked too."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._journal import commit as _commit
from flyteplugins_memory._rules import commit_info as _commit_info

#: the store-level ``ext`` key of the recently deleted paths (`_rules.commit_info.DELETED_EXT`)
DELETED_EXT = "deleted"
LOG = "meta/.journal/log/"
CHECKPOINTS = "meta/.journal/checkpoints/"


@pytest.fixture
def often(monkeypatch) -> None:
    """A checkpoint every other commit (as the model runs): each purge below lands on a new one."""
    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 2)


def stored(where, key: str, folder: str) -> dict[int, dict]:
    """Every commit record (or checkpoint) of `key` in storage, by seq (tombstones left out)."""
    journal = where.journal(key)
    found = {int(n[len(folder) : -5]): json.loads(d) for n, d in journal.items() if n.startswith(folder)}
    return {seq: obj for seq, obj in found.items() if "collected" not in obj}


def who(store: MemoryStore, path: str) -> list[tuple[str, bool]]:
    """``(actor, deleted)`` of each version of `path`, newest first."""
    return [(h.actor, h.deleted) for h in store.history(path, limit=50)]


def fold_with_purges(key: str, times: int) -> None:
    """`times` purges of another path, each committed by a handle of its own (with `often`, each lands on
    a checkpoint of its own)."""
    for i in range(times):
        other = MemoryStore.open(key=key)
        other.write_text(f"other{i}.md", f"other {i}")
        other.save()
        other.purge(f"other{i}.md", actor="sec")


def test_a_write_after_a_delete_folded_by_several_purges_continues_the_history(durable_backend, key, often):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "v1", actor="w1")
    store.save()
    store.delete("a.md", actor="d1")
    store.save()
    deleted_at = store.log(limit=1)[0].seq
    fold_with_purges(key, 3)  # the delete is three checkpoints back now
    writer = MemoryStore.open(key=key)  # its base knows nothing of the delete
    writer.write_text("a.md", "v2", actor="w2")
    writer.save()

    fresh = MemoryStore.open(key=key)
    assert who(fresh, "a.md") == [("w2", False), ("d1", True), ("w1", False)]
    assert [c.actor for c in fresh.log(path="a.md")] == ["w2", "d1", "w1"]
    records, checkpoints = stored(durable_backend, key, LOG), stored(durable_backend, key, CHECKPOINTS)
    newest = max(records)
    assert records[newest]["info"]["wrote"] == {"a.md": deleted_at}  # linked in storage, not guessed on read
    folded = [c for seq, c in checkpoints.items() if deleted_at < seq < newest]
    assert len(folded) >= 3
    assert all(c["ext"][DELETED_EXT]["a.md"] == deleted_at for c in folded)  # carried checkpoint to checkpoint
    assert "a.md" not in records[newest]["ext"][DELETED_EXT]  # written again: no longer a deleted path


def test_a_write_after_a_delete_folded_by_compactions_continues_the_history(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "v1", actor="w1")
    store.write_text("b.md", "b")
    store.save()
    store.delete("a.md", actor="d1")
    store.save()
    for i in range(3):
        other = MemoryStore.open(key=key)
        other.write_text("b.md", f"b{i}")
        other.save()
        other.compact()
    writer = MemoryStore.open(key=key)
    writer.write_text("a.md", "v2", actor="w2")
    writer.save()
    assert who(MemoryStore.open(key=key), "a.md") == [("w2", False), ("d1", True), ("w1", False)]


def test_a_stale_handles_write_links_to_the_newest_delete_not_its_own(durable_backend, key, often):
    """Its base is the first delete; another handle wrote and deleted the path again since: the write
    follows the newest delete, so every version shows (it linked past them before)."""
    stale = MemoryStore.create(key=key)
    stale.write_text("a.md", "v1", actor="w1")
    stale.save()
    stale.delete("a.md", actor="d1")
    stale.save()
    other = MemoryStore.open(key=key)
    other.write_text("a.md", "v2", actor="w2")
    other.save()
    other.delete("a.md", actor="d2")
    other.save()
    fold_with_purges(key, 2)
    stale.write_text("a.md", "v3", actor="w3")
    stale.save()
    expected = [("w3", False), ("d2", True), ("w2", False), ("d1", True), ("w1", False)]
    assert who(MemoryStore.open(key=key), "a.md") == expected


def test_a_purge_of_a_path_deleted_several_checkpoints_back_is_its_newest_deletion(durable_backend, key, often):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "secret 4471", actor="w1")
    store.save()
    store.delete("a.md", actor="d1")
    store.save()
    fold_with_purges(key, 3)
    result = MemoryStore.open(key=key).purge("a.md", actor="sec", reason="gdpr")
    writer = MemoryStore.open(key=key)
    writer.write_text("a.md", "v2", actor="w2")
    writer.save()
    fresh = MemoryStore.open(key=key)
    assert who(fresh, "a.md") == [("w2", False), ("sec", True), ("d1", True), ("w1", False)]
    assert [c.seq for c in fresh.log(path="a.md")][1] == result.commit
    assert stored(durable_backend, key, LOG)[max(stored(durable_backend, key, LOG))]["info"]["wrote"] == {
        "a.md": result.commit
    }
    assert not [n for n, d in durable_backend.journal(key).items() if b"secret 4471" in d]


def test_a_purge_of_a_path_never_held_stays_no_version_of_it_after_gc(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "a")
    store.save()
    writer = MemoryStore.open(key=key)
    writer.write_text("never.md", "not saved yet", actor="w1")  # held by no commit
    result = store.purge("never.md", actor="sec", reason="just in case")
    assert store.history("never.md") == [] and store.log(path="never.md") == []
    store.gc(window=timedelta(0))  # only the purge's state is kept: nothing older to read back to
    fresh = MemoryStore.open(key=key)
    assert fresh.history("never.md") == []
    assert fresh.log(path="never.md") == []
    purge = stored(durable_backend, key, LOG)[result.commit]
    assert "never.md" not in json.dumps(purge["info"])  # no path of the commit: it changed none
    assert purge["delta"]["audit"][-1]["op"] == "purge"  # the audit still names it
    writer.save()  # the write lands after the purge: the path's first version
    fresh = MemoryStore.open(key=key)
    assert who(fresh, "never.md") == [("w1", False)]
    assert len(fresh.log(path="never.md")) == 1


def test_the_map_of_deleted_paths_is_bounded_newest_first(local_backend, key, monkeypatch):
    monkeypatch.setattr(_commit_info, "DELETED_MAX_BYTES", 200)
    store = MemoryStore.create(key=key)
    for i in range(30):
        store.write_text(f"dir/f{i:02}.md", str(i))
    store.write_text("late.md", "late")
    store.save()
    store.delete_prefix("dir")
    store.save()
    store.delete("late.md")
    store.save()
    late = store.log(limit=1)[0].seq
    kept = stored(local_backend, key, LOG)[late]["ext"][DELETED_EXT]
    assert len(json.dumps(kept)) <= 200
    assert kept["late.md"] == late and len(kept) < 31  # the newest delete first, then as many as fit


def test_a_malformed_map_of_deleted_paths_is_ignored(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "v1", actor="w1")
    store.save()
    store.delete("a.md", actor="d1")
    store.save()
    seq = store.log(limit=1)[0].seq
    name = f"{LOG}{seq:020}.json"
    record = json.loads(durable_backend.journal(key)[name])
    record["ext"][DELETED_EXT] = {"a.md": "not a commit", "b.md": 10**6, "c.md": -1}
    durable_backend.put(key, name, json.dumps(record).encode())
    writer = MemoryStore.open(key=key)
    writer.write_text("a.md", "v2", actor="w2")
    writer.save()
    assert who(MemoryStore.open(key=key), "a.md") == [("w2", False), ("d1", True), ("w1", False)]
    newest = stored(durable_backend, key, LOG)[writer.log(limit=1)[0].seq]
    assert newest["ext"][DELETED_EXT] == {}  # nothing valid left to carry


def test_a_purge_of_a_path_deleted_past_the_map_reads_its_delete_back(durable_backend, key, monkeypatch):
    """A delete the map does not hold (past its bound, or made by an older version): the purge finds it in
    the retained history and is still the path's newest deletion."""
    monkeypatch.setattr(_commit_info, "DELETED_MAX_BYTES", 0)
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "v1", actor="w1")
    store.save()
    store.delete("a.md", actor="d1")
    store.save()
    store.write_text("b.md", "b")
    store.save()
    assert stored(durable_backend, key, LOG)[store.log(limit=1)[0].seq]["ext"].get(DELETED_EXT, {}) == {}
    result = MemoryStore.open(key=key).purge("a.md", actor="sec")
    fresh = MemoryStore.open(key=key)
    assert who(fresh, "a.md") == [("sec", True), ("d1", True), ("w1", False)]
    assert stored(durable_backend, key, LOG)[result.commit]["info"]["ext"]["purged"] == ["a.md"]
