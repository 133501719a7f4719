"""Incremental, lazy, atomic and concurrency-safe sync, on every backend (checked in storage itself)."""

from __future__ import annotations

import asyncio
import json

import pytest

from flyteplugins_memory import (
    ConcurrencyError,
    InvalidPath,
    MemoryStore,
    ReadOnlyPath,
    ReservedPath,
    StoreAlreadyExists,
)
from helpers import commit, handles, saved


def needs(backend, capability: str, why: str) -> None:
    if capability not in backend.capabilities:
        pytest.skip(f"{backend.name}: {why}")


def fill(store: MemoryStore, n: int) -> None:
    for i in range(n):
        store.write_text(f"files/{i:04d}.txt", f"content {i}")
    store.save()


def test_save_after_one_change_moves_only_that_change(backend, key, io_counter):
    store = MemoryStore.get_or_create(key=key)
    fill(store, 40)
    io_counter.reset()
    store.write_text("files/0007.txt", "changed")
    store.save()
    # the file was created in place (`_journal.inplace`): its first change also copies its old bytes into a blob
    # (one write: this handle holds them, `WorkingCopy.held`) so that older states still read them; that save
    # leaves the head hint one commit behind (`_journal.commit.write_head`), the next one moves it
    # where create-only writes are not atomic (the GCS emulator) the file is in a blob, and the commit
    # checks its log slot first and reads it back after writing (`_journal.commit._claim`); each save that changes
    # files also writes one search index segment (docs/decisions/0064: content never sits in a record)
    in_place = "exclusive_create" in backend.capabilities
    gets = io_counter.names("get")
    assert gets == [] if in_place else [g for g in gets if "/log/" in g] == gets, io_counter.ops
    assert io_counter.count() == (6 if in_place else 5 + 2), io_counter.ops
    io_counter.reset()
    store.write_text("files/0007.txt", "changed again")
    store.save()
    puts = sorted(io_counter.names("put"))
    # where create-only writes are not atomic, the commit checks its log slot first and reads it back
    # after writing (`FsspecStorage.create_exclusive`, `_journal.commit._claim`)
    verify = 0 if "exclusive_create" in backend.capabilities else 2
    assert len(puts) == 6 and io_counter.count() == 6 + verify, io_counter.ops  # 5 + its search segment
    assert {"files/0007.txt", "meta/files%2F0007.txt.json", "meta/.journal/head.json"} <= set(puts)
    assert backend.upstream_view(key)["files/0007.txt"] == b"changed again"


def test_open_is_constant_in_the_number_of_files_and_reads_are_lazy(backend, key, io_counter):
    fill(MemoryStore.get_or_create(key=key, keep_versions=True), 60)
    io_counter.reset()
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    assert io_counter.count() <= 5, io_counter.ops
    io_counter.reset()
    assert len(store.list_paths()) == 60 and store.exists("files/0001.txt")
    assert store.get_meta("files/0002.txt").bytes == len("content 2")
    assert io_counter.count() == 0
    assert store.read_text("files/0003.txt") == "content 3"
    assert io_counter.count("get") == 1
    assert store.read_text("files/0003.txt") == "content 3"
    assert io_counter.count("get") == 1  # a hydrated file touches no storage
    io_counter.reset()
    assert store.prefetch("files") == 59
    assert io_counter.count("get") == 59
    io_counter.reset()
    store.write_text("files/0004.txt", "local only")
    assert store.read_text("files/0004.txt") == "local only"
    assert io_counter.count() == 0


def test_delete_propagates_and_never_comes_back(backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True, read_only_prefixes=("ro/",))
    store.write_text("a.txt", "a")
    store.write_text("b.txt", "b")
    store.save()
    assert store.delete("a.txt", actor="janitor", reason="stale") is True
    assert store.delete("a.txt") is False and store.delete("never.txt") is False
    with pytest.raises(ReadOnlyPath):
        store.delete("ro/x.txt")
    with pytest.raises(ReservedPath):
        store.delete("messages.json")
    assert store.list_paths() == ["b.txt"] and not store.exists("a.txt")
    store.save()
    view = backend.upstream_view(key)
    assert "a.txt" not in view and "meta/a.txt.json" not in view and view["b.txt"] == b"b"
    tombstones = [n for n in view if n.startswith("versions/a.txt/") and "_deleted_" in n.rsplit("/", 1)[-1]]
    assert len(tombstones) == 1 and view[tombstones[0]] == b""
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.list_paths() == ["b.txt"] and reopened.read_text("a.txt", default="gone") == "gone"
    last = reopened.audit_tail(1)[0]
    assert (last["op"], last["path"], last["actor"], last["new_sha"]) == ("delete", "a.txt", "janitor", "")
    assert last["version_file"] == tombstones[0]


def test_concurrent_handles_merge_without_losing_anything(backend, key):
    first = MemoryStore.get_or_create(key=key)
    first.write_text("shared.txt", "base")
    first.write_text("doomed.txt", "x")
    first.append({"role": "system", "content": "base"})
    first.save()
    second = MemoryStore.get_or_create(key=key)

    first.write_text("one.txt", "1")
    first.append({"role": "user", "content": "from first"})
    first.save()
    second.write_text("two.txt", "2")
    second.delete("doomed.txt")
    second.append({"role": "user", "content": "from second"})
    second.save()

    for store in (second, MemoryStore.get_or_create(key=key)):
        assert store.list_paths() == ["one.txt", "shared.txt", "two.txt"]
        assert [m["content"] for m in store.messages] == ["base", "from first", "from second"]
        assert [(e["op"], e["path"]) for e in store.audit_tail(0)] == [
            ("create", "shared.txt"),
            ("create", "doomed.txt"),
            ("create", "one.txt"),
            ("create", "two.txt"),
            ("delete", "doomed.txt"),
        ]
    stored = json.loads(backend.upstream_view(key)["messages.json"])
    assert [m["content"] for m in stored] == ["base", "from first", "from second"]


def test_real_conflicts_name_every_path_and_keep_the_loser_intact(backend, key):
    first = saved(key, {"a.txt": "base", "b.txt": "base"})
    second = MemoryStore.get_or_create(key=key)
    commit(first, {"a.txt": "first"}, deleted=["b.txt"])

    second.write_text("a.txt", "second")
    second.write_text("b.txt", "second")
    second.write_text("c.txt", "no conflict")
    with pytest.raises(ConcurrencyError) as info:
        second.save()
    assert info.value.paths == ("a.txt", "b.txt")
    assert second.read_text("a.txt") == "second" and second.has_unsaved_changes()
    assert MemoryStore.get_or_create(key=key).read_text("a.txt") == "first"

    assert second.refresh() == ["a.txt", "b.txt"]
    assert second.read_text("a.txt") == "first" and not second.exists("b.txt")
    assert second.read_text("c.txt") == "no conflict"  # kept: it did not conflict
    second.write_text("a.txt", "second, retried")
    second.save()
    assert MemoryStore.get_or_create(key=key).list_paths() == ["a.txt", "c.txt"]
    assert backend.upstream_view(key)["a.txt"] == b"second, retried"


def test_same_content_on_both_sides_is_not_a_conflict(backend, key):
    first = MemoryStore.get_or_create(key=key)
    second = MemoryStore.get_or_create(key=key)
    first.write_text("a.txt", "same")
    first.save()
    second.write_text("a.txt", "same")
    second.save()
    assert MemoryStore.get_or_create(key=key).read_text("a.txt") == "same"


def test_a_path_is_never_a_file_and_a_directory(backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("x", "file")
    with pytest.raises(InvalidPath, match="is a file"):
        store.write_text("x/y", "below a file")
    store.delete("x")
    store.write_text("x/y", "now x is a directory")
    with pytest.raises(InvalidPath, match="is a directory"):
        store.write_text("x", "over a directory")
    store.save()

    first, second = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    first.write_text("d", "file")
    first.save()
    second.write_text("d/e", "under what is now a file")
    second.write_text("other.txt", "fine")
    with pytest.raises(ConcurrencyError) as refused:
        second.save()
    assert refused.value.paths == ("d/e",)
    assert second.refresh() == ["d/e"]
    second.save()
    assert MemoryStore.get_or_create(key=key).list_paths() == ["d", "other.txt", "x/y"]


def test_transcript_rewrite_conflicts_with_concurrent_appends(backend, key):
    first = MemoryStore.get_or_create(key=key)
    first.extend([{"content": "1"}, {"content": "2"}])
    first.save()
    second = MemoryStore.get_or_create(key=key)
    first.append({"content": "3"})
    first.save()
    second.messages[:] = [{"content": "summary"}]
    with pytest.raises(ConcurrencyError) as info:
        second.save()
    assert info.value.paths == ("messages.json",)
    assert second.messages == [{"content": "summary"}]
    assert second.refresh() == ["messages.json"]
    assert [m["content"] for m in second.messages] == ["1", "2", "3"]
    second.messages[:] = [{"content": "summary"}]
    second.save()  # a rewrite with no concurrent change is fine
    assert MemoryStore.get_or_create(key=key).messages == [{"content": "summary"}]


def test_expected_sha_is_checked_against_the_committed_state_at_save(backend, key):
    first = MemoryStore.get_or_create(key=key)
    base = first.write_text("doc.txt", "v1")
    first.save()
    second = MemoryStore.get_or_create(key=key)
    first.write_text("doc.txt", "v2", expected_sha=base.sha256)
    first.save()
    second.write_text("doc.txt", "v2 from second", expected_sha=base.sha256)  # matches its stale copy
    with pytest.raises(ConcurrencyError):
        second.save()
    assert backend.upstream_view(key)["doc.txt"] == b"v2"


async def test_exactly_one_of_many_concurrent_creates_wins(backend, key):
    needs(backend, "exclusive_create", "create-only writes are not atomic here")
    results = await asyncio.gather(*(MemoryStore.create.aio(key=key) for _ in range(8)), return_exceptions=True)
    winners = [r for r in results if isinstance(r, MemoryStore)]
    assert len(winners) == 1
    assert all(isinstance(r, StoreAlreadyExists) for r in results if r not in winners)
    assert [n for n in backend.journal(key) if "/log/" in n] == ["meta/.journal/log/00000000000000000001.json"]


async def test_racing_get_or_create_returns_handles_of_one_store(backend, key):
    needs(backend, "exclusive_create", "create-only writes are not atomic here")
    handles = await asyncio.gather(*(MemoryStore.get_or_create.aio(key=key) for _ in range(6)))
    for i, handle in enumerate(handles):
        await handle.write_text.aio(f"h{i}.txt", str(i))
    await asyncio.gather(*(h.save.aio() for h in handles))
    assert MemoryStore.get_or_create(key=key).list_paths() == [f"h{i}.txt" for i in range(6)]


def test_received_store_sees_exactly_the_commit_it_was_sent_at(backend, key):
    sender = MemoryStore.get_or_create(key=key)
    sender.write_text("a.txt", "as sent")
    sender.append({"content": "sent"})
    sender.save()
    payload = sender._serialize()
    sender.write_text("a.txt", "changed later")
    sender.write_text("b.txt", "later")
    sender.save()
    received = MemoryStore._deserialize(payload)
    assert received.list_paths() == ["a.txt"] and received.read_text("a.txt") == "as sent"
    received.write_text("c.txt", "from receiver")
    received.save()  # merges onto the newest state
    assert MemoryStore.get_or_create(key=key).list_paths() == ["a.txt", "b.txt", "c.txt"]


def test_checkpoints_keep_history_exact_and_reads_bounded(backend, key, monkeypatch, io_counter):
    from flyteplugins_memory._journal import commit as _commit

    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 3)
    store = MemoryStore.get_or_create(key=key)
    for i in range(10):
        store.write_text(f"f{i % 4}.txt", f"v{i}")
        store.append({"content": str(i)})
        store.save()
    assert any("/checkpoints/" in n for n in backend.journal(key))
    io_counter.reset()
    reopened = MemoryStore.get_or_create(key=key)
    assert io_counter.count() <= 5
    assert reopened.list_paths() == ["f0.txt", "f1.txt", "f2.txt", "f3.txt"]
    assert reopened.read_text("f1.txt") == "v9" and [m["content"] for m in reopened.messages] == list("0123456789")
    io_counter.reset()
    assert [e["new_sha"] != "" for e in reopened.audit_tail(2)] == [True, True]
    assert io_counter.count("get") <= 1  # only the newest segment, not the whole history
    assert len(reopened.audit_tail(0)) == 10
    log = backend.upstream_view(key)["audit/log.jsonl"].decode().splitlines()
    assert len(log) == 8 and json.loads(log[0])["path"] == "f0.txt"  # events up to the newest checkpoint, seq 9


def test_refresh_drops_what_a_dropped_conflict_leaves_clashing(backend, key):
    saved(key, {"x": "base"})
    mine, theirs = handles(key, 2)
    commit(theirs, {"x": "theirs"})
    mine.delete("x")
    mine.write_text("x/y", "under x")  # fine here, but x is theirs again once the delete is dropped
    with pytest.raises(ConcurrencyError):
        mine.save()
    assert mine.refresh() == ["x", "x/y"]
    mine.save()
    assert MemoryStore.get_or_create(key=key).list_paths() == ["x"]


def test_a_file_can_become_a_directory_and_back(backend, key):
    store = MemoryStore.get_or_create(key=key)
    reader = MemoryStore.get_or_create(key=key)
    for step, (gone, path) in enumerate([(None, "x/y"), ("x/y", "x"), ("x", "x/y")]):
        if gone:
            store.delete(gone)
        store.write_text(path, str(step))
        store.append({"role": "user", "content": str(step)})
        store.save()
        reader.refresh()
        assert reader.read_text(path) == str(step)  # its cached copy of the old shape is out of the way
        view = backend.upstream_view(key)
        assert view[path] == str(step).encode() and (gone is None or gone not in view)
        assert len(json.loads(view["messages.json"])) == step + 1


async def test_a_message_appended_while_saving_is_kept(backend, key, monkeypatch):
    from flyteplugins_memory._journal import commit as _commit

    store = await MemoryStore.get_or_create.aio(key=key)
    original = _commit.update_upstream_layout

    async def slow_project(*args, **kwargs):
        await asyncio.sleep(0.3)
        return await original(*args, **kwargs)

    monkeypatch.setattr(_commit, "update_upstream_layout", slow_project)

    async def append_meanwhile() -> None:
        await asyncio.sleep(0.1)
        store.append({"role": "user", "content": "during"})

    store.append({"role": "user", "content": "before"})
    await asyncio.gather(store.save.aio(), append_meanwhile())
    assert [m["content"] for m in store.messages] == ["before", "during"]
    assert store.has_unsaved_changes()
    await store.save.aio()
    reopened = await MemoryStore.get_or_create.aio(key=key)
    assert [m["content"] for m in reopened.messages] == ["before", "during"]


def test_imported_audit_lines_survive_malformed_ones_and_checkpoints(backend, key):
    backend.put(key, "messages.json", b"[]")
    log = b'{"op": "create", "path": "p1"}\n{"op": "cre\n{"op": "create", "path": "p3"}\n'
    backend.put(key, "audit/log.jsonl", log)
    store = MemoryStore.get_or_create(key=key)
    store.write_text("f.txt", "ours")
    store.compact()
    assert [e["path"] for e in MemoryStore.get_or_create(key=key).audit_tail(0)] == ["p1", "p3", "f.txt"]
    assert backend.upstream_view(key)["audit/log.jsonl"].startswith(log)


def test_a_store_exists_from_its_first_commit_even_without_a_transcript(backend, key):
    MemoryStore.create(key=key)
    prefix = backend.fs._strip_protocol(backend.store_uri(key)).rstrip("/")
    backend.fs.rm_file(f"{prefix}/messages.json")  # as if the creating save died after its commit point
    assert MemoryStore.exists(key=key)
    with pytest.raises(StoreAlreadyExists):
        MemoryStore.create(key=key)
    assert MemoryStore.get_or_create(key=key).messages == []


def test_the_root_drops_copies_other_writers_changed_or_deleted(local_backend, key):
    mine = saved(key, {"notes.md": "v1", "gone.md": "bye"})
    theirs = commit(MemoryStore.get_or_create(key=key), {"notes.md": "v2"}, deleted=["gone.md"])
    mine.refresh()
    assert not (mine.root / "gone.md").exists() and not (mine.root / "meta" / "gone.md.json").exists()
    assert mine.read_text("notes.md") == "v2" and (mine.root / "notes.md").read_text() == "v2"
    theirs.write_text("notes.md", "v3")
    theirs.save()
    mine.write_text("other.md", "x")
    mine.save()  # rebased onto theirs: the root's copy of notes.md is stale now
    assert not (mine.root / "notes.md").exists() or (mine.root / "notes.md").read_text() == "v3"


async def test_a_fetch_racing_a_write_never_puts_old_bytes_back_in_the_root(local_backend, key):
    seed = await MemoryStore.get_or_create.aio(key=key)
    for i in range(30):
        await seed.write_text.aio(f"f{i}.md", "old")
    await seed.save.aio()
    store = await MemoryStore.get_or_create.aio(key=key)

    async def write_all() -> None:
        for i in range(30):
            await store.write_text.aio(f"f{i}.md", "new")
            await asyncio.sleep(0)

    await asyncio.gather(store.prefetch.aio(), write_all(), *(store.read_text.aio(f"f{i}.md") for i in range(30)))
    await store.save.aio()
    root = store.root
    assert [(root / f"f{i}.md").read_text() for i in range(30)] == ["new"] * 30
