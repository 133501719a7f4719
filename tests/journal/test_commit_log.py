"""`store.log()`: each commit's time, actor, reason, paths and appended messages, newest first, at one
read per commit shown; checked against the commit records in storage, on local disk and moto S3."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from backends import JOURNAL
from flyteplugins_memory import Commit, InvalidMessage, InvalidPath, MemoryStore
from flyteplugins_memory._rules.commit_info import MAX_SUMMARY
from flyteplugins_memory._rules.layout import log_name
from oldversion import old_version

MS_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")


def record(backend, key: str, seq: int) -> dict:
    backend.fs.invalidate_cache()
    return json.loads(backend.fs.cat_file(backend.location(key, log_name(seq))))


def seqs(commits: list[Commit]) -> list[int]:
    return [c.seq for c in commits]


def test_the_log_lists_commits_newest_first_with_what_each_did(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("notes/a.md", "a", actor="alice", reason="draft")
    store.extend([{"role": "user", "content": "1"}, {"role": "assistant", "content": "2"}])
    store.save()
    store.write_text("b.txt", "b", actor="bob", reason="add b")
    store.write_text("notes/a.md", "a2", actor="alice", reason="edit")
    store.save()
    store.delete("b.txt", actor="carol", reason="cleanup")
    store.save(actor="release-bot", reason="weekly cleanup")

    log = MemoryStore.get_or_create(key=key).log()
    assert seqs(log) == [4, 3, 2, 1] and [c.kind for c in log] == ["save", "save", "save", "create"]
    cleanup, edit, draft, created = log
    assert (cleanup.actor, cleanup.reason, cleanup.wrote, cleanup.deleted) == (
        "release-bot", "weekly cleanup", (), ("b.txt",)
    )  # fmt: skip
    assert (edit.actor, edit.reason, edit.wrote, edit.appended) == (
        "alice, bob",
        "add b; edit",
        ("b.txt", "notes/a.md"),
        0,
    )
    assert (draft.actor, draft.reason, draft.wrote, draft.appended) == ("alice", "draft", ("notes/a.md",), 2)
    assert (created.actor, created.wrote, created.appended, created.rewrote) == ("agent", (), 0, False)
    assert all(MS_UTC.fullmatch(c.time) for c in log)
    times = [datetime.fromisoformat(c.time) for c in log]
    assert times == sorted(times, reverse=True) and times[0].tzinfo == UTC
    for commit in log:  # what the log says is what the records in storage hold
        stored = record(durable_backend, key, commit.seq)
        assert stored["delta"]["commits"][-1] == commit.id and stored["info"]["actor"] == commit.actor
        assert sorted(stored["info"]["wrote"]) == list(commit.wrote) and stored["info"]["time"] == commit.time
    assert store.log(limit=2) == log[:2] and store.log(limit=0) == []


def test_who_and_why_come_from_the_writes_unless_save_says(local_backend, key):
    store = MemoryStore.create(key=key)
    store.append({"role": "user", "content": "no writes"})
    store.save()
    assert (store.log(limit=1)[0].actor, store.log(limit=1)[0].reason) == ("agent", "")
    for i in range(60):
        store.write_text(f"f{i}.txt", "x", actor=f"actor-{i:02d}-{'x' * 10}", reason=f"reason {i:02d}")
    store.save()
    many = store.log(limit=1)[0]
    assert many.actor.startswith("actor-00-") and many.actor.endswith(" more)") and "actor-59" not in many.actor
    assert len(many.actor) <= MAX_SUMMARY + 20 and many.reason.startswith("reason 00; reason 01")
    store.write_text("g.txt", "g", actor="someone")
    store.save(actor="", reason="explicit, even empty")
    assert (store.log(limit=1)[0].actor, store.log(limit=1)[0].reason) == ("", "explicit, even empty")
    store.write_text("h.txt", "h")
    for bad in ({"actor": 5}, {"reason": "\ud800"}):
        with pytest.raises(InvalidMessage):
            store.save(**bad)
    assert store.has_unsaved_changes()


def test_a_rewritten_transcript_is_marked(local_backend, key):
    store = MemoryStore.create(key=key)
    store.extend([{"role": "user", "content": "secret"}, {"role": "user", "content": "b"}])
    store.save()
    store.messages[0]["content"] = "[redacted]"
    store.append({"role": "user", "content": "c"})
    store.save()
    newest, appended = store.log(limit=2)
    assert (newest.rewrote, newest.appended) == (True, 1) and (appended.rewrote, appended.appended) == (False, 2)


def test_the_log_of_a_path_follows_its_commits(durable_backend, key):
    store = MemoryStore.create(key=key)  # 1
    for i in range(6):  # 2..7; p.txt written by 2, 4, 6
        store.write_text("other.txt", str(i))
        if i % 2 == 0:
            store.write_text("p.txt", str(i), actor=f"w{i}")
        store.save()
    assert seqs(store.log(path="p.txt")) == [6, 4, 2] and seqs(store.log(path="p.txt", limit=2)) == [6, 4]
    assert [c.actor for c in store.log(path="p.txt")] == ["agent, w4", "agent, w2", "agent, w0"]  # other.txt too
    store.delete("p.txt")
    store.save()  # 8
    assert seqs(store.log(path="p.txt")) == [8, 6, 4, 2]  # a deleted path: found by reading back, then its links
    assert store.log(path="p.txt")[0].deleted == ("p.txt",)
    store.write_text("p.txt", "again")
    store.save()  # 9: written again on top of the delete the handle saw, so linked to it
    assert seqs(store.log(path="p.txt")) == [9, 8, 6, 4, 2]
    assert record(durable_backend, key, 9)["info"]["wrote"] == {"p.txt": 8}
    assert store.log(path="never.txt") == [] and store.log(path="meta/x.json") == []
    assert seqs(store.log(path="./other.txt", limit=3)) == [7, 6, 5]
    with pytest.raises(InvalidPath):
        store.log(path="../escape")
    with pytest.raises(ValueError):
        store.log(limit=-1)


def test_merged_concurrent_saves_appear_with_their_own_info(durable_backend, key):
    MemoryStore.create(key=key)
    first, second = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    first.write_text("shared.txt", "from alice", actor="alice", reason="mine")
    first.append({"role": "user", "content": "alice"})
    second.write_text("b.txt", "b", actor="bob", reason="yours")
    second.extend([{"role": "user", "content": "bob"}, {"role": "user", "content": "bob again"}])
    first.save()
    second.save()  # rebased onto first's commit
    bob, alice, _ = MemoryStore.get_or_create(key=key).log()
    assert (bob.seq, bob.actor, bob.reason, bob.wrote, bob.appended) == (3, "bob", "yours", ("b.txt",), 2)
    assert (alice.seq, alice.actor, alice.reason, alice.wrote, alice.appended) == (
        2, "alice", "mine", ("shared.txt",), 1
    )  # fmt: skip
    assert record(durable_backend, key, 3)["info"]["wrote"] == {"b.txt": None}


def links(backend, key: str, path: str, newest: int) -> dict[int, tuple[str, int | None]]:
    """What each commit in storage says it did to `path` (``wrote`` or ``deleted``) and its link."""
    out = {}
    for seq in range(newest, 0, -1):
        info = record(backend, key, seq)["info"]
        out.update((seq, (kind, info[kind][path])) for kind in ("wrote", "deleted") if path in info[kind])
    return out


def test_a_path_keeps_its_history_across_concurrent_deletes_and_writes(durable_backend, key):
    store = MemoryStore.create(key=key)  # 1
    for text in ("v1", "v2"):  # 2, 3
        store.write_text("p.txt", text)
        store.save()
    first, second = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    first.delete("p.txt")
    first.save()  # 4
    second.delete("p.txt")
    second.save()  # 5: rebased onto the delete it repeats; linked to it, and not shown (changed nothing)
    assert seqs(MemoryStore.get_or_create(key=key).log(path="p.txt")) == [4, 3, 2]
    after, racer = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    after.write_text("p.txt", "v3")  # on top of the repeated delete
    racer.write_text("q.txt", "q")
    racer.save()  # 6
    after.save()  # 7: lands on 6, linked to the delete 4 its map of deleted paths names (5 repeated it)
    late, twin = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    late.delete("p.txt")
    late.save()  # 8
    writer = MemoryStore.get_or_create(key=key)  # stands on the delete
    twin.delete("p.txt")  # from 7, like `late`; lands on 9 (below), not on the delete it repeats
    racer.write_text("r.txt", "r")
    racer.save()  # 9
    twin.save()  # 10: linked to 8, the delete the map of deleted paths of the state it lands on names
    writer.write_text("p.txt", "v4")
    racer.write_text("s.txt", "s")
    racer.save()  # 11
    writer.save()  # 12: lands on 11, linked through its base to the delete 8
    same_a, same_b = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    for handle in (same_a, same_b):  # concurrent writes of the same bytes merge
        handle.write_text("p.txt", "v5")
        handle.save()  # 13, 14
    assert links(durable_backend, key, "p.txt", 14) == {
        14: ("wrote", 13), 13: ("wrote", 12), 12: ("wrote", 8), 10: ("deleted", 8), 8: ("deleted", 7),
        7: ("wrote", 4), 5: ("deleted", 4), 4: ("deleted", 3), 3: ("wrote", 2), 2: ("wrote", None),
    }  # fmt: skip
    changed = [14, 13, 12, 8, 7, 4, 3, 2]  # every commit that changed p.txt; 5 and 10 repeated a delete
    assert seqs(MemoryStore.get_or_create(key=key).log(path="p.txt")) == changed
    assert seqs(MemoryStore.get_or_create(key=key).log(path="p.txt", limit=3)) == changed[:3]
    assert seqs(twin.log(path="p.txt", limit=4)) == changed[:4]  # the repeated delete 10 is passed over
    assert [c.seq for c in MemoryStore.get_or_create(key=key).log() if "p.txt" in c.deleted] == [10, 8, 5, 4]


def test_an_imported_upstream_store_starts_with_one_import_commit(durable_backend, key):
    upstream = UpstreamStore.get_or_create(key=key)
    upstream.write_text("u.txt", "u", actor="upstream-agent")
    upstream.write_text("v.txt", "v", actor="upstream-agent")
    upstream.append({"role": "user", "content": "before the journal"})
    upstream.save()

    ours = MemoryStore.get_or_create(key=key)
    (imported,) = ours.log()  # before our first save too
    assert (imported.seq, imported.kind, imported.id, imported.wrote) == (0, "import", "", ("u.txt", "v.txt"))
    assert (imported.actor, imported.appended) == ("upstream-agent", 1) and MS_UTC.fullmatch(imported.time)
    ours.write_text("v.txt", "ours", actor="me")
    ours.save()
    fresh = MemoryStore.get_or_create(key=key)
    assert [c.kind for c in fresh.log()] == ["save", "import"] and fresh.log()[1] == imported
    assert seqs(fresh.log(path="u.txt")) == [0] and seqs(fresh.log(path="v.txt")) == [1, 0]


def test_log_reads_the_same_on_200_commits_as_on_20(durable_backend, io_counter):
    reads = {}
    for commits in (20, 200):
        key = f"agent-{uuid.uuid4().hex[:8]}"
        store = MemoryStore.create(key=key)
        for i in range(commits):  # distinct files, so the history crosses a checkpoint
            store.write_text(f"f{i}.txt", "x" * 100)
            if i % 4 == 0:
                store.write_text("tracked.txt", str(i))
            store.save()
        reader = MemoryStore.get_or_create(key=key)
        io_counter.reset()
        assert seqs(reader.log(limit=5)) == list(range(commits + 1, commits - 4, -1))
        reads[commits, "all"] = io_counter.count()
        io_counter.reset()
        assert len(reader.log(limit=5, path="tracked.txt")) == 5
        reads[commits, "path"] = io_counter.count()
    assert reads[200, "all"] == reads[20, "all"] <= 5 + 2, reads  # the records, the head hint, one probe
    assert reads[200, "path"] == reads[20, "path"] <= 5 + 2, reads


def test_the_log_ends_where_gc_collected_the_history(durable_backend, key):
    store = MemoryStore.create(key=key)
    for i in range(4):  # 2..5
        store.write_text("p.txt", str(i))
        store.save()
    store.write_text("q.txt", "q")
    store.save()  # 6
    store.gc(window=timedelta(0))
    assert seqs(store.log()) == [6]
    assert store.log(path="p.txt") == [] and seqs(store.log(path="q.txt")) == [6]
    assert record(durable_backend, key, 5) == {"collected": True}


def test_commits_of_earlier_versions_show_with_empty_fields(local_backend, key):
    store = MemoryStore.create(key=key)
    for i in (2, 3):
        store.write_text("a.txt", str(i))
        store.save()
    for seq in (2, 3):  # as versions before commit info wrote them
        old = record(local_backend, key, seq)
        del old["info"], old["writer"]
        old["delta"]["files"]["a.txt"].pop("commit")
        local_backend.put(key, log_name(seq), json.dumps(old).encode())
    log = MemoryStore.get_or_create(key=key).log()
    assert [(c.seq, c.kind, c.time, c.actor, c.wrote) for c in log[:2]] == [(3, "", "", "", ()), (2, "", "", "", ())]
    assert log[0].id and log[2].kind == "create"
    assert MemoryStore.get_or_create(key=key).log(path="a.txt") == []  # no links to follow


def test_the_log_of_a_store_still_in_the_old_layout(local_backend, key):
    with old_version():
        old = MemoryStore.create(key=key)
        old.write_text("a.txt", "a")
        old.save()
    store = MemoryStore.get_or_create(key=key)  # read in place, not moved yet
    assert seqs(store.log()) == [2, 1] and not any("/log/" in n for n in local_backend.journal(key))
    assert any(n.startswith(f"{JOURNAL}/log/") for n in local_backend.old_journal(key))


async def test_the_log_has_an_aio_twin(local_backend, key):
    store = await MemoryStore.create.aio(key=key)
    store.write_text("a.txt", "a")
    await store.save.aio(actor="async", reason="awaited")
    (newest, _) = await store.log.aio(limit=2)
    assert (newest.actor, newest.reason) == ("async", "awaited")


def test_long_actors_and_reasons_are_shortened_not_dropped(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "x", actor="A" * 300, reason="R" * 300)
    store.save()
    logged = MemoryStore.get_or_create(key=key).log(limit=1)[0]
    assert logged.actor.startswith("A" * 150) and len(logged.actor) <= 200
    assert logged.reason.startswith("R" * 150) and len(logged.reason) <= 200
    store.write_text("b.txt", "y")
    store.save(actor="B" * 5_000_000, reason="why " * 1_000_000)
    logged = MemoryStore.get_or_create(key=key).log(limit=1)[0]
    assert logged.actor.startswith("BBB") and len(logged.actor) <= 200 and len(logged.reason) <= 200
