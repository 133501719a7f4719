"""Item 13 of issue 8: our bookkeeping lives outside the store prefix, so upstream readers do not pay for
it, and stores whose journal is still inside the prefix open, then move on their next save, safely under
writers of the older version."""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import sys
import time

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import CorruptStore, InvalidPath, MemoryStore
from oldversion import old_version
from repo import SUPPORT

JOURNAL = "meta/.journal"
BIG = 200_000


# -- where the journal lives (pure) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("store", "journal"),
    [
        ("b/agents/memory-store/v0/o/p/d/k", "b/agents/memory-store/.journal/v0/o/p/d/k"),
        ("/tmp/raw/agents/memory-store/v0/o/p/d/k", "/tmp/raw/agents/memory-store/.journal/v0/o/p/d/k"),
        ("b/agents/memory-store/v0/o/p/d/.journal", "b/agents/memory-store/.journal/v0/o/p/d/.journal"),
        ("b/custom/place/mine", "b/custom/place/.journal/mine"),
        ("b/mine", "b/.journal/mine"),
        ("b", "b/meta/.journal"),  # a bucket-root store has no outside
        ("/mine", "/mine/meta/.journal"),
    ],
)
def test_the_journal_lives_beside_the_tree_of_stores(store, journal):
    from flyteplugins_memory._rules.journal_location import journal_root

    assert journal_root(store) == journal


def test_an_explicit_path_inside_a_journal_is_refused():
    from flyteplugins_memory._rules.journal_location import journal_root

    with pytest.raises(InvalidPath):
        journal_root("b/x/.journal/mine")
    with pytest.raises(InvalidPath):
        journal_root("b/agents/memory-store/.journal/v0/o/p/d/k")


def test_no_key_or_user_path_can_reach_a_journal():
    """Every journal of the standard layout is outside every store prefix, whatever the key."""
    from flyteplugins_memory._rules.journal_location import journal_root

    keys = ["k", ".journal", "meta", "v0", "agents"]
    stores = [f"b/agents/memory-store/v0/o/p/d/{k}" for k in keys]
    for store in stores:
        for other in stores:
            assert not journal_root(store).startswith(other + "/")
            assert not other.startswith(journal_root(store) + "/")


# -- in storage ------------------------------------------------------------------------------------


def test_the_journal_is_outside_the_store_prefix(backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    for i in range(5):
        store.write_text("notes/a.md", f"version {i}")
        store.append({"role": "user", "content": str(i)})
        store.save()
    store.compact()
    journal = backend.journal(key)
    assert any("/log/" in n for n in journal) and any("/blobs/" in n for n in journal)
    assert any("/checkpoints/" in n for n in journal)
    inside = backend.old_journal(key)
    # a new store leaves one small fence in the old location, so that older versions refuse it
    assert list(inside) == [f"{JOURNAL}/log/00000000000000000001.json"]
    assert len(inside[f"{JOURNAL}/log/00000000000000000001.json"]) < 600
    assert not backend.fs.exists(f"{backend.prefix(key)}/.journal")
    assert MemoryStore.get_or_create(key=key).read_text("notes/a.md") == "version 4"


def _downloaded(upstream) -> int:
    root = pathlib.Path(upstream.root)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _big(i: int) -> str:
    return f"save {i}\n" + ("abcdefghij" * (BIG // 10))


def test_upstream_downloads_no_more_than_for_a_store_it_wrote(durable_backend, key):
    """A ~200 KB file saved 30 times: upstream's open of our store downloads at most 1.2x what it
    downloads for the same content written by upstream itself."""
    ours = MemoryStore.get_or_create(key=key)
    theirs = UpstreamStore.get_or_create(key=key + "-up")
    for i in range(30):
        for store in (ours, theirs):
            store.write_text("data/big.txt", _big(i), actor="agent", reason=f"save {i}")
            store.append({"role": "user", "content": f"turn {i}"})
            store.save()
    ours_bytes = _downloaded(UpstreamStore.get_or_create(key=key))
    theirs_bytes = _downloaded(UpstreamStore.get_or_create(key=key + "-up"))
    assert ours_bytes <= 1.2 * theirs_bytes, (ours_bytes, theirs_bytes)
    # and what upstream downloads is what is under the store prefix: our history is not there
    assert sum(len(d) for d in durable_backend.objects(key).values()) <= 1.2 * theirs_bytes
    assert sum(len(d) for d in durable_backend.journal(key).values()) > 20 * BIG  # the history is kept, elsewhere


def test_exists_sees_stores_of_either_layout(backend, key):
    with old_version():
        MemoryStore.create(key=key + "-old")
    MemoryStore.create(key=key + "-new")
    assert MemoryStore.exists(key=key + "-old") and MemoryStore.exists(key=key + "-new")
    assert not MemoryStore.exists(key=key + "-none")
    # a first save that died after its commit point wrote no transcript: its commit still counts
    for suffix in ("-old", "-new"):
        backend.remove(key + suffix, "messages.json")
        assert MemoryStore.exists(key=key + suffix)


# -- stores in the old layout ----------------------------------------------------------------------


def _old_store(key: str, commits: int = 3) -> None:
    with old_version():
        store = MemoryStore.create(key=key, keep_versions=True)
        for i in range(commits):
            store.write_text(f"notes/{i}.md", f"note {i}", actor="old", reason=f"r{i}")
            store.write_text("shared.txt", f"shared {i}")
            store.append({"role": "user", "content": f"old {i}"})
            store.save()
        store.delete("notes/0.md")
        store.save()


def _view(store: MemoryStore) -> dict:
    return {
        "files": {p: store.read_text(p) for p in store.list_paths()},
        "meta": {p: store.get_meta(p) for p in store.list_paths()},
        "messages": store.messages,
        "audit": store.audit_tail(0),
        "versions": {p: store.list_versions(p) for p in store.list_paths()},
    }


def test_an_old_layout_store_opens_then_moves_on_its_next_save(backend, key):
    _old_store(key)
    with old_version():
        before = _view(MemoryStore.get_or_create(key=key, keep_versions=True))
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    assert _view(store) == before
    assert backend.journal(key) == {}  # opening moves nothing
    store.save()  # no change: the move alone
    assert _view(MemoryStore.get_or_create(key=key, keep_versions=True)) == before
    left = backend.old_journal(key)
    # left behind: the fence, the moved head, and (for an hour) empty tombstones in the old log slots
    assert all(len(d) < 600 for d in left.values()), sorted(left)
    assert not any("/blobs/" in n or "/checkpoints/" in n or "/audit/" in n for n in left)
    assert any("/blobs/" in n for n in backend.journal(key))
    store.write_text("after.txt", "moved")
    store.save()
    reopened = MemoryStore.get_or_create(key=key, keep_versions=True)
    assert reopened.read_text("after.txt") == "moved" and reopened.messages == before["messages"]


def test_older_versions_refuse_a_moved_or_new_store_and_change_nothing(backend, key):
    _old_store(key)
    MemoryStore.get_or_create(key=key).save()  # moves it
    MemoryStore.create(key=key + "-new").write_text("x", "y")
    for k in (key, key + "-new"):
        stored = backend.stored(k)
        with old_version():
            with pytest.raises(CorruptStore):
                MemoryStore.get_or_create(key=k)
            with pytest.raises(CorruptStore):
                MemoryStore(key=k, remote_path=backend.store_uri(k)).save()
        assert backend.stored(k) == stored


def test_a_handle_of_an_older_version_cannot_commit_after_the_move(backend, key):
    _old_store(key)
    with old_version():
        stale = MemoryStore.get_or_create(key=key)
        newest = MemoryStore.get_or_create(key=key)
        newest.write_text("one-more.txt", "1")
        newest.save()  # `stale` is now one commit behind: its next slot is taken
    MemoryStore.get_or_create(key=key).save()  # moves it
    for handle in (stale, newest):
        handle.write_text("lost?.txt", "no")
        with old_version(), pytest.raises(CorruptStore):
            handle.save()
    final = MemoryStore.get_or_create(key=key)
    assert "one-more.txt" in final.list_paths() and "lost?.txt" not in final.list_paths()


def test_a_handle_on_an_old_layout_store_sees_what_older_writers_commit(backend, key):
    _old_store(key)
    ours = MemoryStore.get_or_create(key=key)
    with old_version():
        old = MemoryStore.get_or_create(key=key)
        old.write_text("later.txt", "from an older writer")
        old.save()
    assert "later.txt" not in ours.list_paths()
    assert ours.refresh() == []
    assert ours.read_text("later.txt") == "from an older writer"
    ours.write_text("mine.txt", "mine")
    ours.save()  # moves it, with the older writer's commit
    assert MemoryStore.get_or_create(key=key).list_paths() == [
        "later.txt",
        "mine.txt",
        "notes/1.md",
        "notes/2.md",
        "shared.txt",
    ]


async def test_two_handles_moving_one_store_at_once_lose_nothing(backend, key):
    if "exclusive_create" not in backend.capabilities:
        pytest.skip(f"{backend.name}: racing creates are not atomic on this backend")
    _old_store(key)
    first = await MemoryStore.get_or_create.aio(key=key)
    second = await MemoryStore.get_or_create.aio(key=key)
    await first.write_text.aio("first.txt", "1")
    await second.write_text.aio("second.txt", "2")
    first.append({"role": "user", "content": "first"})
    second.append({"role": "user", "content": "second"})
    await asyncio.gather(first.save.aio(), second.save.aio())
    final = await MemoryStore.get_or_create.aio(key=key)
    assert {"first.txt", "second.txt", "shared.txt"} <= set(await final.list_paths.aio())
    assert sorted(m["content"] for m in final.messages[3:]) == ["first", "second"]
    assert not any("/blobs/" in n for n in backend.old_journal(key))


def test_a_task_input_pinned_before_the_move_still_opens(backend, key):
    _old_store(key)
    with old_version():
        payload = MemoryStore.get_or_create(key=key)._serialize()
    mover = MemoryStore.get_or_create(key=key)
    mover.write_text("shared.txt", "changed after the move")
    mover.save()
    received = MemoryStore._deserialize(payload)
    assert received.read_text("shared.txt") == "shared 2"
    assert received.list_paths() == ["notes/1.md", "notes/2.md", "shared.txt"]


class Crash(BaseException):
    """A process dying in the middle of a storage call (not retried, not caught)."""


def _crash_at(monkeypatch, k: int) -> list[int]:
    from flyteplugins_memory.storage._fsspec import FsspecStorage

    calls = [0]
    original = FsspecStorage._call

    async def counted(self, fn, *args, **kwargs):
        calls[0] += 1
        if calls[0] == k:
            raise Crash
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(FsspecStorage, "_call", counted)
    return calls


@pytest.mark.parametrize("backend_name", ["local_backend", "memory_backend", "s3_backend"])
def test_a_move_that_dies_at_any_step_leaves_an_openable_store(request, backend_name, key, monkeypatch):
    """The move of an old-layout store is killed before each of its storage calls in turn; every time
    the store opens to the old or the new state, older versions see that same state or refuse, and the
    next save completes the move."""
    backend = request.getfixturevalue(backend_name)
    old_files = {"notes/1.md": "note 1", "shared.txt": "shared 1"}
    k, outcomes = 1, []
    while True:
        name = f"{key}-{k}"
        _old_store(name, commits=2)
        store = MemoryStore.get_or_create(key=name)
        store.write_text("new.txt", "new")
        store.append({"role": "user", "content": "new"})
        with monkeypatch.context() as patch:
            _crash_at(patch, k)
            try:
                store.save()
                finished = True
            except Crash:
                finished = False
        reopened = MemoryStore.get_or_create(key=name)
        files = {p: reopened.read_text(p) for p in reopened.list_paths()}
        new = files == {**old_files, "new.txt": "new"}
        assert new or files == old_files, (k, files)
        assert [m["content"] for m in reopened.messages] == ["old 0", "old 1"] + (["new"] if new else [])
        with old_version():
            try:
                seen = MemoryStore.get_or_create(key=name)
                assert not new and {p: seen.read_text(p) for p in seen.list_paths()} == old_files, k
            except CorruptStore:
                pass  # fenced: an older version refuses rather than fork
        reopened.write_text("after.txt", str(k))
        reopened.save()
        final = MemoryStore.get_or_create(key=name)
        assert final.read_text("after.txt") == str(k) and set(old_files) <= set(final.list_paths())
        final.gc()  # finishes the cleaning of the old location a crash cut short
        assert not any("/blobs/" in n for n in backend.old_journal(name)), k
        outcomes.append(new)
        if finished:
            break
        k += 1
    assert k > 10 and outcomes.count(True) >= 1 and outcomes.count(False) >= 5


def test_older_writers_saving_during_the_move_lose_nothing(durable_backend_and_endpoint, key, tmp_path):
    """Three processes of the older version keep saving while this version moves the store: every save
    that returned is in the moved store, and each older writer's first save after the move fails."""
    backend, endpoint = durable_backend_and_endpoint
    _old_store(key)
    ready = tmp_path / "ready"
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "rounds": 80, "pause": 0.05}
    script = str(SUPPORT / "oldversion.py")
    procs = [
        subprocess.Popen(
            [sys.executable, script, "writer", json.dumps({**config, "worker": w, "ready": str(ready)})],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(3)
    ]
    deadline = time.time() + 120
    while not all(pathlib.Path(f"{ready}.{w}").exists() for w in range(3)) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    mover = MemoryStore.get_or_create(key=key)
    for i in range(3):
        mover.write_text(f"new/{i}.txt", str(i))
        mover.save()
    saved, failed = [], 0
    for w, proc in enumerate(procs):
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        rounds = [json.loads(line) for line in out.splitlines()]
        saved += [f"old{w}/r{r['round']}.txt" for r in rounds if not r["error"]]
        failed += sum(1 for r in rounds if r["error"])
        assert all(r["error"] in ("", "CorruptStore") for r in rounds), rounds
    final = MemoryStore.get_or_create(key=key)
    paths = set(final.list_paths())
    assert set(saved) <= paths, sorted(set(saved) - paths)
    assert {f"new/{i}.txt" for i in range(3)} <= paths
    assert failed == 3  # every older writer was stopped by the fence, none forked the store
    messages = [m["content"] for m in final.messages]
    assert all(f"old{p[3]}:{p.split('/r')[1][:-4]}" in messages for p in saved)
