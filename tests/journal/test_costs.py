"""What opening, listing and saving cost in storage requests (counts and bytes, never times), on local disk
and moto S3: an open plus a full listing of a 1,000-file store is 5 requests (its index is one part, which
the head names: the open reads it with the checkpoint), a 100,000-file store opens in at most 5 requests and
1 MiB read, and the first one-file save after a bulk save is at most 6 requests. (Round trips, the other
half of an open's cost, are counted in test_round_trips_open.py.)

Every storage operation of ours goes through `FsspecStorage`; the `costs` fixture wraps it and counts one
request per object touched (a listing is one), and the bytes of what reads return.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import uuid
from dataclasses import dataclass, field

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._rules import parts as _parts
from flyteplugins_memory._rules.layout import HEAD_NAME, checkpoint_name
from repo import REPO

KIB = 1024
MIB = 1024 * KIB


@dataclass
class Costs:
    """The object operations the store asked of storage: (kind, name, bytes read)."""

    ops: list[tuple[str, str, int]] = field(default_factory=list)

    def reset(self) -> None:
        self.ops.clear()

    @property
    def requests(self) -> int:
        return len(self.ops)

    @property
    def read_bytes(self) -> int:
        return sum(n for _, _, n in self.ops)

    def names(self, kind: str | None = None) -> list[str]:
        return [name for k, name, _ in self.ops if kind is None or k == kind]

    def parts_read(self) -> list[str]:
        return [n for n in self.names("get") if "/parts/" in n]


_inside_bulk = contextvars.ContextVar("inside_bulk", default=False)


@pytest.fixture
def costs(monkeypatch) -> Costs:
    from flyteplugins_memory.storage._fsspec import FsspecStorage
    from helpers import logical_names

    counter = Costs()

    def wrap(method: str, kind: str, names_of, bulk: bool = False):
        original = getattr(FsspecStorage, method)

        async def counted(self, *args, **kwargs):
            nested = _inside_bulk.get()
            token = _inside_bulk.set(True) if bulk else None
            try:
                result = await original(self, *args, **kwargs)
            finally:
                if token is not None:
                    _inside_bulk.reset(token)
            if kind == "copy" and result is None:  # no such copy on this backend: it reads and writes instead
                return result
            if not nested:
                local = names_of(*args, **kwargs)
                names = logical_names(self, local)
                if kind == "get":
                    found = result if isinstance(result, dict) else {local[0]: result}
                    counter.ops += [(kind, n, len(found.get(at) or b"")) for n, at in zip(names, local, strict=True)]
                else:
                    counter.ops += [(kind, n, 0) for n in names]
            return result

        monkeypatch.setattr(FsspecStorage, method, counted)

    wrap("read", "get", lambda name: [name])
    wrap("read_many", "get", list)
    wrap("write_many", "put", list)
    wrap("create_exclusive", "put", lambda name, data: [name], bulk=True)
    wrap("create_many", "put", list, bulk=True)
    wrap("exists", "head", lambda name: [name])
    wrap("copy_checked", "copy", lambda name, target, sha256: [name])  # one request, where the bytes lie
    wrap("stat", "list", lambda under="": [under])
    wrap("remove_many", "delete", list, bulk=True)
    wrap("remove_all", "delete", list, bulk=True)
    return counter


def journal_json(backend, key: str, name: str) -> dict:
    backend.fs.invalidate_cache()
    return json.loads(backend.journal(key)[name])


def bulk_saved(key: str, count: int) -> MemoryStore:
    """A store of `count` new 1 KiB-ish files written by one save (commit 2; with 1,000 files that save also
    folds them into checkpoint 2: its record passes 32 KiB)."""
    store = MemoryStore.create(key=key)
    for i in range(count):
        store.write_text(f"files/{i:05d}.txt", f"content {i} " * 80)
    store.save()
    return store


# -- part sizes ----------------------------------------------------------------------------------------------


def test_parts_are_sized_by_bytes_about_one_mib():
    assert _parts.INLINE_MAX_BYTES == 64 * KIB  # what an open reads of the index, at most
    assert _parts.PART_MAX_BYTES == 1 * MIB
    assert _parts.PART_MIN_BYTES < _parts.PART_TARGET_BYTES < _parts.PART_MAX_BYTES


def test_open_and_full_listing_of_a_1000_file_store_is_5_requests(durable_backend, key, costs):
    bulk_saved(key, 1000)
    checkpoint = journal_json(durable_backend, key, checkpoint_name(2))
    assert checkpoint["format"] == 2 and len(checkpoint["parts"]) == 1  # one part of about 250 KiB
    assert journal_json(durable_backend, key, HEAD_NAME)["seq"] == 2

    costs.reset()
    store = MemoryStore.get_or_create(key=key)
    opened = costs.names()
    assert len(store.list_paths()) == 1000
    # the head hint; then at once the two probes past it, checkpoint 2 and the one part the head names
    # (decision 0147: one request more than when the probes went one by one, two round trips fewer)
    assert costs.requests == 5 and len(opened) == 5 and len(costs.parts_read()) == 1, costs.ops
    assert costs.read_bytes < 400 * KIB

    store.write_text("notes/one.txt", "one more")  # a commit past the checkpoint: the open reads its record too
    store.save()
    costs.reset()
    assert len(MemoryStore.get_or_create(key=key).list_paths()) == 1001
    assert costs.requests == 5 and len(costs.parts_read()) == 1, costs.ops


def test_a_store_of_small_parts_an_older_version_cut_becomes_one_part_at_its_next_checkpoint(
    local_backend, key, monkeypatch, costs
):
    with monkeypatch.context() as older:  # the 32 KiB parts of version 0.4
        older.setattr(_parts, "PART_TARGET_BYTES", 32 * KIB)
        older.setattr(_parts, "PART_MAX_BYTES", 64 * KIB)
        older.setattr(_parts, "PART_MIN_BYTES", 8 * KIB)
        bulk_saved(key, 1000)
    old_refs = journal_json(local_backend, key, checkpoint_name(2))["parts"]
    assert len(old_refs) > 5

    costs.reset()
    store = MemoryStore.get_or_create(key=key)  # parts of the old size still load
    assert len(store.list_paths()) == 1000 and len(costs.parts_read()) == len(old_refs)
    store.write_text("files/00500.txt", "changed")
    store.save()
    store.compact()
    refs = journal_json(local_backend, key, checkpoint_name(3))["parts"]
    assert len(refs) == 1 and refs[0]["count"] == 1000
    costs.reset()
    fresh = MemoryStore.get_or_create(key=key)
    assert len(fresh.list_paths()) == 1000 and fresh.read_text("files/00500.txt") == "changed"
    assert len(costs.parts_read()) == 1, costs.ops


# -- a large store, built directly ---------------------------------------------------------------------------


def seeded_directly(key: str, count: int) -> None:
    """A store of `count` files built in-process with the store's own code, as `benchmarks/scale_bench.py`
    does (saving them through `save()` takes minutes): its first commits, then one adding `count` files of
    one content (one blob), folded into a checkpoint by the function saves use (parts, checkpoint, head)."""
    store = MemoryStore.create(key=key)
    store.append({"role": "user", "content": "hello"})
    store.save()
    asyncio.run(_commit_files(store.remote_path or "", count))


async def _commit_files(remote_path: str, count: int) -> None:
    from flyteplugins_memory._journal.commit import checkpoint
    from flyteplugins_memory._journal.journal_storage import JournalStorage
    from flyteplugins_memory._journal.opening import latest_state
    from flyteplugins_memory._rules.journal_objects import FileEntry, encode
    from flyteplugins_memory._rules.layout import blob_name, log_name
    from flyteplugins_memory._rules.merge import Changes, rebase

    payload = b"x" * 1024
    remote = JournalStorage.at(remote_path)
    base = await latest_state(remote)
    assert base is not None
    sha = hashlib.sha256(payload).hexdigest()
    entry = FileEntry(sha256=sha, bytes=len(payload), updated_at="2026-01-01T00:00:00Z", updated_by="seed")
    changes = Changes(files={f"files/{i:06d}.txt": entry for i in range(count)})
    await remote.write_many({blob_name(sha): payload})
    state = rebase(base, base, changes, base.messages, uuid.uuid4().hex)
    assert await remote.create_exclusive(log_name(state.seq), encode(state.record()))
    await checkpoint(remote, state)


@pytest.mark.parametrize("count", [10_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_a_large_store_opens_in_at_most_5_requests_and_1_mib(durable_backend, key, costs, count):
    seeded_directly(key, count)
    head = journal_json(durable_backend, key, HEAD_NAME)
    assert head["seq"] == head["checkpoint"]
    refs = journal_json(durable_backend, key, checkpoint_name(head["seq"]))["parts"]
    assert sum(r["count"] for r in refs) == count
    assert all(r["bytes"] <= _parts.PART_MAX_BYTES for r in refs)
    assert len(refs) <= count // 2000  # pieces of about 768 KiB (3,000-odd files each)

    costs.reset()
    store = MemoryStore.get_or_create(key=key)
    assert store.messages == [{"role": "user", "content": "hello"}]
    assert costs.requests <= 5 and costs.read_bytes <= MIB and costs.parts_read() == [], costs.ops
    assert costs.requests == 4  # the head hint, the checkpoint (its part references), two probes
    costs.reset()
    assert store.exists(f"files/{count // 2:06d}.txt")
    assert len(costs.parts_read()) == 1 and costs.read_bytes <= MIB, costs.ops


# -- the first one-file save after a bulk save ----------------------------------------------------------------


def blobs_of(backend, key: str) -> dict[str, bytes]:
    return {n: d for n, d in backend.journal(key).items() if "/blobs/" in n}


def test_the_first_one_file_save_after_a_bulk_save_is_6_requests(durable_backend, key, costs):
    store = bulk_saved(key, 40)  # files created in place (`_journal.inplace`): their bytes only at their paths
    old = durable_backend.upstream_view(key)["files/00007.txt"]
    head = journal_json(durable_backend, key, HEAD_NAME)["seq"]

    costs.reset()
    store.write_text("files/00007.txt", "changed")
    store.save()
    # the old bytes into a blob (held since the bulk save: not fetched again), the new bytes' blob, the
    # search segment, the commit, the file and its sidecar; the head hint is left one commit behind
    puts = costs.names("put")
    assert costs.requests == 6 and len(puts) == 6 and costs.names("get") == [], costs.ops
    assert {"files/00007.txt", "meta/files%2F00007.txt.json"} <= set(puts) and HEAD_NAME not in puts
    assert journal_json(durable_backend, key, HEAD_NAME)["seq"] == head  # one behind: the next save moves it
    assert old in blobs_of(durable_backend, key).values()  # older states still read the replaced bytes
    assert MemoryStore.get_or_create(key=key).at(head).read_text("files/00007.txt") == old.decode()

    costs.reset()
    store.write_text("files/00007.txt", "changed again")
    store.save()
    puts = costs.names("put")
    assert costs.requests == 6 and HEAD_NAME in puts, costs.ops  # the new blob, segment, commit, file, sidecar, head
    assert journal_json(durable_backend, key, HEAD_NAME)["seq"] == head + 2

    costs.reset()
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("files/00007.txt") == "changed again"


def test_a_fresh_handle_s_first_change_of_an_in_place_file_copies_its_old_bytes_once(durable_backend, key, costs):
    bulk_saved(key, 40)
    old = durable_backend.upstream_view(key)["files/00007.txt"]
    handle = MemoryStore.get_or_create(key=key)
    handle.write_text("files/00007.txt", "changed")
    costs.reset()
    handle.save()
    # a handle that never read the file has no copy of the bytes it replaces: local disk copies them into
    # their blob where they lie (checked against their sha256, one call: 0143); object storage reads them
    # and writes the blob (0160)
    copied = ["files/00007.txt"] if durable_backend.name == "local" else []
    assert costs.names("copy") == copied and costs.names("get") == ["files/00007.txt"][len(copied) :], costs.ops
    assert costs.requests == 6 + (not copied), costs.ops
    assert old in blobs_of(durable_backend, key).values()
    assert HEAD_NAME not in costs.names("put")


def test_a_hint_left_one_commit_behind_costs_an_open_nothing(durable_backend, key, costs):
    store = bulk_saved(key, 40)
    store.write_text("notes/a.txt", "a")
    store.save()  # commit 3 leaves the hint at commit 2
    assert journal_json(durable_backend, key, HEAD_NAME)["seq"] == 2
    costs.reset()
    opened = MemoryStore.get_or_create(key=key)
    # the hint, then at once the two probes past it (record 3, and the empty slot 4) and the record it
    # names (2, read in case nothing followed it): what an open costs when the hint names its newest commit
    # too; record 3 is on checkpoint 0, which has no object (the head says so)
    log = "meta/.journal/log/0000000000000000000"
    assert costs.names()[0] == HEAD_NAME and sorted(costs.names()[1:]) == [
        log + s for s in ("2.json", "3.json", "4.json")
    ]
    assert opened.read_text("notes/a.txt") == "a" and len(opened.list_paths()) == 41

    other = MemoryStore.get_or_create(key=key)
    other.write_text("notes/b.txt", "b")
    other.save()  # commit 4: its handle knows the hint names 2, so it brings it up to date
    assert journal_json(durable_backend, key, HEAD_NAME)["seq"] == 4
    store.write_text("notes/c.txt", "c")
    store.save()  # rebased onto 4, commit 5: one past the hint, left
    assert journal_json(durable_backend, key, HEAD_NAME)["seq"] == 4
    costs.reset()
    assert MemoryStore.get_or_create(key=key).list_paths()[-3:] == ["notes/a.txt", "notes/b.txt", "notes/c.txt"]


def test_a_handle_holds_only_small_in_place_files_it_replaces_and_their_old_bytes_stay_readable(
    durable_backend, key, costs
):
    store = MemoryStore.create(key=key)
    big = b"B" * (1024 * 1024 + 1)  # over `HOLD_MAX_BYTES`: fetched again by the save, not held in memory
    store.write_bytes("big.bin", big)
    store.write_text("small.txt", "small")
    store.save()
    first = store.log(limit=1)[0].seq
    costs.reset()
    store.write_bytes("big.bin", b"smaller now")
    store.delete("small.txt")  # a delete replaces the in-place bytes as a write does
    store.save()
    copied = ["big.bin"] if durable_backend.name == "local" else []  # where they lie (0143), else read (0160)
    assert costs.names("copy") == copied and costs.names("get") == ["big.bin"][len(copied) :], costs.ops
    stored = set(blobs_of(durable_backend, key).values())
    assert {big, b"small"} <= stored  # both copied before the commit that replaced them
    past = MemoryStore.get_or_create(key=key).at(first)
    assert past.read_bytes("big.bin") == big and past.read_text("small.txt") == "small"


def test_the_costs_benchmark_prints_its_table(tmp_path):
    import subprocess
    import sys

    script = REPO / "benchmarks" / "costs_bench.py"
    out = tmp_path / "costs.md"
    done = subprocess.run(
        [sys.executable, str(script), "--sizes", "30", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| 30 ")]
    rows = {cells[1]: cells[2] for cells in lines}
    assert rows["first one-file save after the bulk save, same handle"] == "6"
    assert rows["first one-file save after the bulk save, fresh handle"] == "7"  # the old bytes: read, written
    assert rows["open + full listing"] == "4"  # 30 files: the index is inline in the record; two probes


def test_the_issue_9_release_reads_and_saves_a_store_of_one_mib_parts_and_a_hint_one_behind(
    local_backend, key, tmp_path
):
    from released import ISSUE_9_RELEASE, released_source, run_released

    store = bulk_saved(key, 1000)  # checkpoint 2: one part of about 250 KiB (0.4.0 cut parts of 32 KiB)
    store.write_text("notes/a.txt", "a")
    store.save()  # commit 3 leaves the hint at 2
    assert journal_json(local_backend, key, HEAD_NAME)["seq"] == 2
    released = released_source(ISSUE_9_RELEASE, tmp_path / "released")
    config = {"key": key, "raw": local_backend.raw_data_path, "endpoint": None}
    seen = run_released(released, "read", config)
    assert seen["error"] == "" and len(seen["result"]) == 1001 and seen["result"]["notes/a.txt"] == "a"
    run_released(released, "write", {**config, "writes": {"notes/b.txt": "from 0.4"}})
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("notes/b.txt") == "from 0.4" and len(fresh.list_paths()) == 1002


def test_held_bytes_of_a_file_another_handle_purged_are_not_stored_again(durable_backend, key, costs):
    from flyteplugins_memory import ConcurrencyError

    secret = b"the secret the user asked to forget " * 4
    store = MemoryStore.create(key=key)
    store.write_bytes("secret.txt", secret)  # created in place: its bytes only at its path
    store.save()
    MemoryStore.get_or_create(key=key).purge("secret.txt", reason="asked to forget")
    store.write_text("secret.txt", "rewritten")  # the stale handle holds the purged bytes (`WorkingCopy.held`)
    costs.reset()
    with contextlib.suppress(ConcurrencyError):  # a rewrite of a path purged meanwhile may conflict:
        store.save()  # either way nothing purged is stored
    assert "secret.txt" not in costs.names("get")  # it copied what it held, not what storage had left
    durable_backend.fs.invalidate_cache()
    assert not [name for name, data in durable_backend.stored(key).items() if secret in data]
