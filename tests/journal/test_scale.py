"""Partitioned checkpoints: a large store opens without reading its file index, a save reads only the
parts it needs, and a checkpoint rewrites only the parts that changed (checked in storage).

Part sizes are lowered (`small_index_parts`) so that a store of a thousand files has about a hundred parts.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from datetime import timedelta

import pytest

from flyteplugins_memory import CorruptStore, MemoryStore, StateCollected, StoreFormatTooNew, UnsafeStoreContent
from flyteplugins_memory._base.version import WRITER
from flyteplugins_memory._rules.entries import PartRef
from flyteplugins_memory._rules.index import CheckpointFiles, Files, PartNotLoaded
from flyteplugins_memory._rules.journal_objects import Checkpoint
from flyteplugins_memory._rules.layout import HEAD_NAME, checkpoint_name, log_name, part_name
from released import BEFORE_PARTS, released_source, run_released

FILES = 1000


def path_of(i: int) -> str:
    return f"d{i // 100:02d}/f{i:05d}.txt"


def seeded(key: str, count: int = FILES) -> MemoryStore:
    """A store of `count` files written by one save, folded into a (partitioned) checkpoint: commit 2."""
    store = MemoryStore.create(key=key)
    for i in range(count):
        store.write_text(path_of(i), f"content {i}")
    store.append({"role": "user", "content": "hello"})
    store.save()
    store.compact()
    return store


def load(backend, key: str, name: str) -> dict:
    backend.fs.invalidate_cache()
    return json.loads(backend.fs.cat_file(backend.location(key, name)))


def put(backend, key: str, name: str, data: bytes) -> None:
    backend.put(key, name, data)


def stored_parts(backend, key: str) -> dict[str, bytes]:
    return {n: d for n, d in backend.journal(key).items() if "/parts/" in n}


def part_reads(io_counter) -> list[str]:
    return [n for n in io_counter.names("get") if "/parts/" in n]


# -- opening and reading ------------------------------------------------------------------------------------


def test_a_large_checkpoint_names_parts_instead_of_files(local_backend, key, small_index_parts):
    seeded(key)
    checkpoint = load(local_backend, key, checkpoint_name(2))
    assert checkpoint["format"] == 2 and "files" not in checkpoint and checkpoint["writer"] == WRITER
    refs = checkpoint["parts"]
    assert len(refs) > 50 and sum(r["count"] for r in refs) == FILES
    assert all(a["last"] < b["first"] for a, b in itertools.pairwise(refs))
    stored = stored_parts(local_backend, key)
    assert set(stored) == {part_name(r["sha256"]) for r in refs}
    for ref in refs:  # content-addressed, sorted, exactly the range named
        data = stored[part_name(ref["sha256"])]
        assert hashlib.sha256(data).hexdigest() == ref["sha256"] and len(data) == ref["bytes"]
        paths = list(json.loads(data)["files"])
        assert paths == sorted(paths) and (paths[0], paths[-1], len(paths)) == (ref["first"], ref["last"], ref["count"])


def test_opening_reads_no_part_and_lookups_read_only_theirs(local_backend, key, small_index_parts, io_counter):
    seeded(key)
    io_counter.reset()
    store = MemoryStore.get_or_create(key=key)
    assert store.messages == [{"role": "user", "content": "hello"}]
    assert part_reads(io_counter) == [] and io_counter.count() <= 5, io_counter.ops

    io_counter.reset()
    assert store.exists(path_of(555)) and not store.exists("d05/missing.txt")
    assert store.read_text(path_of(555)) == "content 555"
    lookups = len(part_reads(io_counter))
    assert 1 <= lookups <= 3, part_reads(io_counter)

    assert store.list_paths("d07") == [path_of(i) for i in range(700, 800)]
    listed = len(part_reads(io_counter)) - lookups
    total = len(load(local_backend, key, checkpoint_name(2))["parts"])
    assert 0 < listed < total / 5, (listed, total)  # the parts overlapping d07/, not the store

    assert store.list_paths() == sorted(path_of(i) for i in range(FILES))
    every = part_reads(io_counter)
    assert len(every) == len(set(every)) == total  # in all, each part read once
    assert store.exists("d07") and store.get_meta(path_of(1)).sha256 == hashlib.sha256(b"content 1").hexdigest()


def test_a_one_file_save_reads_at_most_the_parts_it_needs(local_backend, key, small_index_parts, io_counter):
    seeded(key)
    store = MemoryStore.get_or_create(key=key)
    io_counter.reset()
    store.write_text("d03/new.txt", "new")
    store.append({"role": "assistant", "content": "wrote it"})
    store.save()
    assert len(part_reads(io_counter)) <= 2 and io_counter.count() <= 8, io_counter.ops
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("d03/new.txt") == "new" and len(fresh.list_paths()) == FILES + 1


# -- writing checkpoints ---------------------------------------------------------------------------------


def test_a_checkpoint_after_a_one_file_change_rewrites_one_part(local_backend, key, small_index_parts, io_counter):
    seeded(key)
    before = stored_parts(local_backend, key)
    mtimes = {n: local_backend.fs.modified(local_backend.location(key, n)) for n in before}
    old_refs = load(local_backend, key, checkpoint_name(2))["parts"]

    store = MemoryStore.get_or_create(key=key)
    store.write_text(path_of(500), "changed")
    store.save()
    io_counter.reset()
    store.compact()
    written = [n for n in io_counter.names("put") if "/parts/" in n]
    assert len(written) == 1, written

    new_refs = load(local_backend, key, checkpoint_name(3))["parts"]
    assert len(new_refs) == len(old_refs)
    changed = [(a, b) for a, b in zip(old_refs, new_refs, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][0]["first"] <= path_of(500) <= changed[0][0]["last"]
    after = stored_parts(local_backend, key)
    assert set(after) == set(before) | {part_name(changed[0][1]["sha256"])}
    assert all(after[n] == before[n] for n in before)  # byte-identical ...
    assert all(local_backend.fs.modified(local_backend.location(key, n)) == mtimes[n] for n in before)  # not rewritten
    assert MemoryStore.get_or_create(key=key).read_text(path_of(500)) == "changed"


def test_parts_split_when_they_grow_and_merge_when_they_shrink(local_backend, key, small_index_parts):
    seeded(key)
    store = MemoryStore.get_or_create(key=key)
    for i in range(60):
        store.write_text(f"d04/g{i:03d}.txt", "grown")
    store.save()
    store.compact()
    grown = load(local_backend, key, checkpoint_name(3))["parts"]
    assert all(r["bytes"] <= 2 * 4096 for r in grown) and sum(r["count"] for r in grown) == FILES + 60
    for path in [path_of(i) for i in range(200, 300)]:
        store.delete(path)
    store.save()
    store.compact()
    shrunk = load(local_backend, key, checkpoint_name(4))["parts"]
    assert sum(r["count"] for r in shrunk) == FILES + 60 - 100
    assert all(r["bytes"] >= 512 for r in shrunk)  # no part left tiny: merged with a neighbour
    expected = sorted(
        [path_of(i) for i in range(FILES) if not 200 <= i < 300] + [f"d04/g{i:03d}.txt" for i in range(60)]
    )
    assert MemoryStore.get_or_create(key=key).list_paths() == expected


def test_a_small_store_keeps_its_files_inline_for_older_readers(local_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "a")
    store.save()
    store.compact()
    checkpoint = load(local_backend, key, checkpoint_name(2))
    assert checkpoint["format"] == 1 and "parts" not in checkpoint and list(checkpoint["files"]) == ["a.txt"]
    assert stored_parts(local_backend, key) == {}


# -- gc and purge ----------------------------------------------------------------------------------------


def test_gc_keeps_the_parts_kept_checkpoints_name_and_removes_the_rest(local_backend, key, small_index_parts):
    seeded(key)
    store = MemoryStore.get_or_create(key=key)
    store.write_text(path_of(10), "changed")
    store.save()
    store.compact()
    refs = load(local_backend, key, checkpoint_name(3))["parts"]
    assert len(stored_parts(local_backend, key)) == len(refs) + 1
    store.write_text("elsewhere.txt", "x")
    store.save()  # record 4 is built on checkpoint 3: checkpoint 2 and the part only it names can go
    store.gc(window=timedelta(0))
    assert set(stored_parts(local_backend, key)) == {part_name(r["sha256"]) for r in refs}
    fresh = MemoryStore.get_or_create(key=key)
    assert len(fresh.list_paths()) == FILES + 1 and fresh.read_text(path_of(10)) == "changed"
    assert fresh.read_text(path_of(999)) == "content 999"  # its blob or in-place copy is still there


def test_purge_finds_content_named_only_in_a_part(local_backend, key, small_index_parts):
    seeded(key)
    store = MemoryStore.get_or_create(key=key)
    store.write_text(path_of(20), "second")
    store.save()
    store.compact()  # the first content is now named only by checkpoint 2's part
    result = store.purge(path_of(20))
    assert set(result.shas) == {hashlib.sha256(b"content 20").hexdigest(), hashlib.sha256(b"second").hexdigest()}
    assert not MemoryStore.get_or_create(key=key).exists(path_of(20))


# -- hostile parts ---------------------------------------------------------------------------------------


def _retarget(backend, key: str, index: int, files: dict, *, sha_from: bytes | None = None) -> None:
    """Replace part `index` of checkpoint 2 by a part holding `files` (the reference updated to match,
    unless `sha_from` gives other bytes to name)."""
    checkpoint = load(backend, key, checkpoint_name(2))
    data = json.dumps({"format": 1, "writer": WRITER, "files": files}).encode()
    named = data if sha_from is None else sha_from
    sha = hashlib.sha256(named).hexdigest()
    put(backend, key, part_name(sha), data)
    paths = sorted(files)
    ref = {"first": min(paths), "last": max(paths), "count": len(paths), "sha256": sha, "bytes": len(data)}
    checkpoint["parts"][index] = ref
    put(backend, key, checkpoint_name(2), json.dumps(checkpoint).encode())


def _part(backend, key: str, index: int) -> dict:
    ref = load(backend, key, checkpoint_name(2))["parts"][index]
    return load(backend, key, part_name(ref["sha256"]))["files"]


def _tamper(backend, key: str, how: str) -> str:
    """Damage part 5 of checkpoint 2 `how`; returns a path whose lookup must read it."""
    files = _part(backend, key, 5)
    paths = list(files)
    if how == "wrong sha":
        ref = load(backend, key, checkpoint_name(2))["parts"][5]
        data = json.dumps({"format": 1, "writer": WRITER, "files": {**files, paths[1]: files[paths[0]]}}).encode()
        put(backend, key, part_name(ref["sha256"]), data)
    elif how == "outside its range":
        moved = {**files, "d99/zzz.txt": files[paths[0]]}
        checkpoint = load(backend, key, checkpoint_name(2))
        _retarget(backend, key, 5, moved)
        checkpoint = load(backend, key, checkpoint_name(2))
        checkpoint["parts"][5]["last"] = paths[-1]  # the reference keeps the range; the part leaves it
        put(backend, key, checkpoint_name(2), json.dumps(checkpoint).encode())
    elif how == "unsorted":
        _retarget(backend, key, 5, dict(reversed(list(files.items()))))
    elif how == "unsafe path":
        _retarget(
            backend,
            key,
            5,
            {paths[0]: files[paths[0]], paths[1] + "/../../../x": files[paths[1]], paths[2]: files[paths[2]]},
        )
    elif how == "clash across parts":
        following = _part(backend, key, 6)
        first = next(iter(following))
        _retarget(backend, key, 6, {paths[-1] + "/z": following.pop(first), **following})
        return paths[-1]
    return paths[1]


@pytest.mark.parametrize(
    ("how", "error"),
    [
        ("wrong sha", CorruptStore),
        ("outside its range", CorruptStore),
        ("unsorted", CorruptStore),
        ("unsafe path", UnsafeStoreContent),
        ("clash across parts", UnsafeStoreContent),
    ],
)
def test_a_hostile_part_is_refused_and_nothing_is_written(local_backend, key, small_index_parts, how, error):
    seeded(key)
    path = _tamper(local_backend, key, how)
    before = {**local_backend.objects(key), **local_backend.journal(key)}
    store = MemoryStore.get_or_create(key=key)  # opening reads no part
    with pytest.raises(error):
        store.exists(path)
    with pytest.raises(error):
        store.list_paths()
    writer = MemoryStore.get_or_create(key=key)
    with pytest.raises(error):
        writer.write_text(path, "over it")
        writer.save()
    assert {**local_backend.objects(key), **local_backend.journal(key)} == before


def test_a_path_under_a_file_that_a_hostile_part_also_holds_as_a_directory_is_refused(
    local_backend, key, small_index_parts
):
    """A new path under the file `f` of a store whose next part holds `f/...`: the store is damaged, which
    is said as such (not as the caller's mistake of writing under a file), and nothing is written."""
    seeded(key)
    file = _tamper(local_backend, key, "clash across parts")
    before = {**local_backend.objects(key), **local_backend.journal(key)}
    for look in (lambda s: s.write_text(f"{file}/new", "x"), lambda s: s.exists(f"{file}/new")):
        with pytest.raises(UnsafeStoreContent):
            look(MemoryStore.get_or_create(key=key))
    assert {**local_backend.objects(key), **local_backend.journal(key)} == before


def test_touching_a_part_that_is_not_loaded_is_a_loud_bug():
    ref = PartRef(first="a", last="c", count=2, sha256="0" * 64, bytes=10)
    files = Files(CheckpointFiles(Checkpoint(seq=3, format=2, parts=[ref]), None))
    assert files.get("0-before-every-part") is None  # no part's range holds it: nothing to load
    with pytest.raises(PartNotLoaded):
        files.get("b")
    with pytest.raises(AssertionError):
        list(files)


# -- versions --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def main_release(tmp_path_factory):
    return released_source(BEFORE_PARTS, tmp_path_factory.mktemp("before-parts"))


def test_a_store_the_previous_version_wrote_opens_and_saves_here(local_backend, key, main_release, small_index_parts):
    writes = {f"r{i:03d}.txt": str(i) for i in range(30)}
    run_released(main_release, "write", {"key": key, "raw": local_backend.raw_data_path, "writes": writes})
    store = MemoryStore.get_or_create(key=key)
    assert {p: store.read_text(p) for p in store.list_paths()} == writes
    store.write_text("ours.txt", "ours")
    store.save()
    store.compact()  # its inline index grows into parts here
    assert load(local_backend, key, checkpoint_name(32))["format"] == 2
    assert MemoryStore.get_or_create(key=key).list_paths() == sorted([*writes, "ours.txt"])


def test_the_previous_version_refuses_a_partitioned_store_as_too_new(
    local_backend, key, main_release, small_index_parts
):
    seeded(key, 100)
    before = local_backend.journal(key)
    seen = run_released(main_release, "read", {"key": key, "raw": local_backend.raw_data_path})
    assert seen["error"] == StoreFormatTooNew.__name__ and WRITER in seen["message"], seen
    assert local_backend.journal(key) == before


# -- store-level extensions ------------------------------------------------------------------------------


def test_extensions_only_the_checkpoint_holds_survive_the_next_save_and_checkpoint(local_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "a")
    store.save()
    store.compact()  # checkpoint 2
    store.write_text("b.txt", "b")
    store.save()  # record 3, on checkpoint 2, without extensions of its own
    checkpoint = load(local_backend, key, checkpoint_name(2))
    put(local_backend, key, checkpoint_name(2), json.dumps({**checkpoint, "ext": {"future": 1}}).encode())
    # this version's records always carry the search index's ext: drop it, as a record of a writer without
    # extensions of its own would be
    record = {k: v for k, v in load(local_backend, key, log_name(3)).items() if k != "ext"}
    put(local_backend, key, log_name(3), json.dumps(record).encode())
    assert load(local_backend, key, HEAD_NAME)["seq"] == 2  # a small save leaves it; an open probes record 3

    other = MemoryStore.get_or_create(key=key)
    other.write_text("c.txt", "c")
    other.save()
    assert load(local_backend, key, log_name(4))["ext"].get("future") == 1
    other.compact()
    assert load(local_backend, key, checkpoint_name(4))["ext"].get("future") == 1


def test_a_handle_whose_checkpoint_gc_collected_gets_state_collected_for_its_parts(
    local_backend, key, small_index_parts
):
    seeded(key)
    stale = MemoryStore.get_or_create(key=key)  # on checkpoint 2, no part loaded
    writer = MemoryStore.get_or_create(key=key)
    writer.write_text(path_of(500), "changed")
    writer.save()
    writer.compact()
    writer.write_text("elsewhere.txt", "x")
    writer.save()
    writer.gc(window=timedelta(0))  # checkpoint 2 goes, and the one part only it named
    assert stale.read_text(path_of(10)) == "content 10"  # a part checkpoint 3 still names: shared, still there
    with pytest.raises(StateCollected):
        stale.exists(path_of(500))
    stale.refresh()
    assert stale.read_text(path_of(500)) == "changed"


def test_a_refresh_racing_a_lookup_never_meets_an_unloaded_part(local_backend, key, small_index_parts):
    """A lookup loads its parts and looks under the handle's lock: a refresh that moves the handle to a newer
    checkpoint while the parts load cannot leave it looking at a base whose parts are not loaded."""
    seeded(key)

    async def race(handle: MemoryStore) -> None:
        await asyncio.gather(handle.prefetch.aio(""), handle.list_paths.aio("d03"), handle.refresh.aio())

    for trial in range(3):
        handle = MemoryStore.get_or_create(key=key)
        handle.read_text(path_of(1))
        other = MemoryStore.get_or_create(key=key)
        for i in range(0, FILES, 5):
            other.write_text(path_of(i), f"newer {trial}")
        other.save()
        other.compact()
        asyncio.run(race(handle))
        assert handle.read_text(path_of(300)) == f"newer {trial}"  # the refresh landed
        handle.prefetch("d03")  # what the racing refresh made stale is fetched again
        assert (handle.root / path_of(300)).read_text() == f"newer {trial}"
        assert handle.list_paths("d03") == [path_of(i) for i in range(300, 400)]


def past_on_parts(key: str):
    """A past state read from the partitioned checkpoint (commit 3, one save after it)."""
    store = seeded(key)
    store.write_text("later.txt", "later")
    store.save()
    store.write_text("later.txt", "even later")
    store.save()
    return MemoryStore.get_or_create(key=key).at(3)


def test_concurrent_reads_of_a_past_state_read_each_part_once(local_backend, key, small_index_parts, io_counter):
    """``store.at(commit)`` has no lock of its own: lookups at once share the reads of the parts they need
    (a report reading many past files read each part once per lookup)."""
    past = past_on_parts(key)
    io_counter.reset()

    async def read_all_at_once() -> list[str]:
        return await asyncio.gather(*(past.read_text.aio(path_of(i)) for i in range(0, FILES, 3)))

    assert asyncio.run(read_all_at_once()) == [f"content {i}" for i in range(0, FILES, 3)]
    reads = part_reads(io_counter)
    assert reads and len(reads) == len(set(reads)), sorted(reads)


def test_a_part_read_that_fails_leaves_its_waiters_to_read_it(local_backend, key, small_index_parts):
    files = past_on_parts(key)._state.files.base
    assert isinstance(files, CheckpointFiles) and files.partitioned
    source, calls = files.source, []

    class FailsOnce:
        async def read_many(self, names):
            calls.append(names)
            await asyncio.sleep(0.01)  # the others join while this one reads
            if len(calls) == 1:
                raise OSError("injected: the first read fails")
            return await source.read_many(names)

    files.source = FailsOnce()  # type: ignore[assignment]

    async def three() -> list[BaseException | None]:
        return await asyncio.gather(*(files.load([0]) for _ in range(3)), return_exceptions=True)

    outcomes = asyncio.run(three())
    assert [type(o).__name__ for o in outcomes] == ["OSError", "NoneType", "NoneType"]
    assert 0 in files.loaded and len(calls) == 2  # one failed read, then one read shared by both waiters
