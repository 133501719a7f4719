"""`BackendConformance`: the store's contract as a pytest base class, run against any backend.

Subclass it and override one fixture, `store_root`::

    class TestMinio(BackendConformance):
        @pytest.fixture
        def store_root(self) -> StoreRoot:
            return StoreRoot("s3://memories", {"endpoint_url": "http://localhost:9000", "key": "k", "secret": "s"})

Every test checks what landed in storage through the backend's own fsspec filesystem (`Kit.objects`),
not only what the store answers. A test that needs a capability the backend does not declare (see
`Capabilities`) is skipped with a reason naming it; nothing else is skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from .._api.store import MemoryStore
from .._base.retry import RetryPolicy, set_retry_policy
from .._base.syncify import run_sync
from .._rules.journal_location import journal_root
from ..errors import (
    AccessDenied,
    ConcurrencyError,
    InvalidPath,
    MemoryStoreError,
    ReadOnlyPath,
    ReservedPath,
    StorageError,
    StoreAlreadyExists,
    UnsafeStoreContent,
)
from ..storage import _fsspec as _storage
from ..storage import _ranges
from ._kit import Kit, StoreRoot, at_once, bound
from .faults import Faults, FaultyFileSystem, at_call

__all__ = ["BackendConformance", "StoreRoot"]

#: Concurrent writers in the race tests.
WRITERS = 4
HOSTILE_PATHS = [
    ("../outside.txt", InvalidPath),
    ("notes/../../outside.txt", InvalidPath),
    ("/etc/passwd", InvalidPath),
    ("messages.json", ReservedPath),
    ("meta/a.txt.json", ReservedPath),
    ("audit/log.jsonl", ReservedPath),
    ("versions/a.txt/1.txt", ReservedPath),
]


class BackendConformance:
    """The store's contract on one backend: subclass, override `store_root`, run with pytest."""

    @pytest.fixture
    def store_root(self) -> StoreRoot:
        """Where the kit may create stores; override this (the one fixture a subclass must provide)."""
        raise NotImplementedError("Override the store_root fixture to return a StoreRoot")

    @pytest.fixture
    def kit(self, store_root: StoreRoot) -> Iterator[Kit]:
        if not isinstance(store_root, StoreRoot):
            raise TypeError(f"store_root must return a StoreRoot, got {type(store_root).__name__}")
        with bound(store_root):
            yield Kit(store_root)

    # -- layout and round trip ----------------------------------------------------------------------------

    def test_storage_options_reach_the_filesystem(self, kit: Kit) -> None:
        store = _storage.FsspecStorage(kit.uri("options"))
        assert {k: store.fs.storage_options.get(k) for k in kit.root.storage_options} == dict(kit.root.storage_options)

    def test_a_save_lands_in_upstream_layout_and_reopens(self, kit: Kit) -> None:
        store = kit.create("layout")
        assert store.remote_path == kit.uri("layout")
        assert kit.upstream_view("layout") == {"messages.json": b"[]"}
        assert MemoryStore.exists(key="layout", **kit.where()) and not MemoryStore.exists(key="other", **kit.where())
        meta = store.write_text("notes/a.md", "# hi", actor="kit", reason="first")
        store.write_json("state/plan.json", {"b": 1, "a": [1, 2]})
        store.append({"role": "user", "content": "q"})
        store.save()
        objects = kit.objects("layout")
        assert objects["notes/a.md"] == b"# hi" and json.loads(objects["state/plan.json"]) == {"a": [1, 2], "b": 1}
        assert json.loads(objects["meta/notes%2Fa.md.json"]) == {
            "path": "notes/a.md",
            "sha256": meta.sha256,
            "updated_at": meta.updated_at,
            "updated_by": "kit",
            "reason": "first",
            "bytes": 4,
        }
        assert json.loads(objects["messages.json"]) == [{"role": "user", "content": "q"}]
        assert any(name.startswith("log/") for name in kit.journal("layout"))  # the commit, outside the prefix
        store.compact()  # brings upstream's audit log up to date
        audit = kit.objects("layout")["audit/log.jsonl"].splitlines()
        assert [json.loads(line)["path"] for line in audit] == ["notes/a.md", "state/plan.json"]
        reopened = kit.open("layout")
        assert reopened.list_paths() == ["notes/a.md", "state/plan.json"]
        assert reopened.read_text("notes/a.md") == "# hi" and reopened.messages == store.messages
        assert reopened.get_meta("notes/a.md") == meta
        assert [e["op"] for e in reopened.audit_tail()] == ["create", "create"]

    def test_ranged_reads_and_streams_read_what_the_backend_holds(self, kit: Kit, monkeypatch) -> None:
        monkeypatch.setattr(_ranges, "PART_SIZE", 1024)  # "large" made small: 6 parts
        data = os.urandom(1024 * 5 + 3)
        store = kit.create("ranges")
        store.write_bytes("big.bin", data)
        store.save()
        assert kit.objects("ranges")["big.bin"] == data
        storage, end = _storage.FsspecStorage(kit.uri("ranges")), len(data)
        assert run_sync(storage.read_range, "big.bin", 1000, 2100) == data[1000:2100]
        assert run_sync(storage.read_range, "big.bin", end - 3, end + 50) == data[-3:]  # short at the end
        assert run_sync(storage.read_range, "big.bin", end + 10, end + 50) == b""  # past it: empty
        assert run_sync(storage.read_range, "absent.bin", 0, 10) is None
        reopened = kit.open("ranges")
        assert reopened.read_bytes("big.bin") == data
        with reopened.open_bytes("big.bin") as stream:
            assert stream.read(7) == data[:7] and stream.read() == data[7:]

    def test_deletes_propagate(self, kit: Kit) -> None:
        store = kit.create("deletes")
        store.write_text("gone.txt", "x")
        store.write_text("kept.txt", "y")
        store.save()
        assert store.delete("gone.txt")
        store.save()
        objects = kit.objects("deletes")
        assert "gone.txt" not in objects and "meta/gone.txt.json" not in objects and objects["kept.txt"] == b"y"
        assert kit.open("deletes").list_paths() == ["kept.txt"]

    # -- exclusivity, races and conflicts -----------------------------------------------------------------

    def test_create_of_an_existing_key_raises_and_changes_nothing(self, kit: Kit) -> None:
        store = kit.create("twice")
        store.write_text("a.txt", "kept")
        store.save()
        before = (kit.objects("twice"), kit.journal("twice"))
        with pytest.raises(StoreAlreadyExists):
            kit.create("twice")
        assert (kit.objects("twice"), kit.journal("twice")) == before

    def test_of_concurrent_creates_exactly_one_wins(self, kit: Kit) -> None:
        kit.need("atomic_create", "two creates could both succeed")
        results = at_once([lambda: kit.create("race")] * WRITERS)
        assert sum(not isinstance(r, BaseException) for r in results) == 1, results
        assert all(isinstance(r, StoreAlreadyExists) for r in results if isinstance(r, BaseException)), results
        assert [n for n in kit.journal("race") if n.startswith("log/")] == ["log/00000000000000000001.json"]

    def test_concurrent_saves_merge_and_lose_nothing(self, kit: Kit) -> None:
        kit.need("atomic_create", "two saves could both claim one commit")
        first = kit.create("merge")
        first.write_text("doomed.txt", "x")
        first.save()
        handles = [kit.open("merge") for _ in range(WRITERS)]
        for i, handle in enumerate(handles):
            handle.write_text(f"w{i}.txt", str(i))
            handle.append({"role": "user", "content": f"from {i}"})
        handles[0].delete("doomed.txt")
        assert not [r for r in at_once([h.save for h in handles]) if isinstance(r, BaseException)]
        objects = kit.objects("merge")
        assert {f"w{i}.txt" for i in range(WRITERS)} <= set(objects) and "doomed.txt" not in objects
        stored = sorted(m["content"] for m in json.loads(objects["messages.json"]))
        assert stored == sorted(f"from {i}" for i in range(WRITERS))
        assert len(kit.open("merge").audit_tail(0)) == 2 + WRITERS  # every change audited once

    def test_a_real_conflict_raises_and_keeps_the_loser_intact(self, kit: Kit) -> None:
        base = kit.create("conflict")
        base.write_text("doc.txt", "base")
        base.save()
        winner, loser = kit.open("conflict"), kit.open("conflict")
        winner.write_text("doc.txt", "winner")
        winner.save()
        loser.write_text("doc.txt", "loser")
        with pytest.raises(ConcurrencyError, match=r"doc\.txt"):
            loser.save()
        assert loser.read_text("doc.txt") == "loser" and loser.has_unsaved_changes()
        assert kit.objects("conflict")["doc.txt"] == b"winner"

    def test_expected_sha_lets_exactly_one_of_two_swaps_win(self, kit: Kit) -> None:
        kit.need("atomic_create", "two compare-and-swaps could both commit")
        created = kit.create("cas")
        created.write_text("counter.txt", "0")
        created.save()
        first, second = kit.open("cas"), kit.open("cas")
        read = first.current_sha("counter.txt")
        first.write_text("counter.txt", "1 by first", expected_sha=read)
        second.write_text("counter.txt", "1 by second", expected_sha=read)
        results = at_once([first.save, second.save])
        assert sum(isinstance(r, ConcurrencyError) for r in results) == 1, results
        assert kit.objects("cas")["counter.txt"] in (b"1 by first", b"1 by second")

    # -- failures and hostile input -----------------------------------------------------------------------

    def test_a_save_interrupted_at_any_storage_call_leaves_a_whole_state(
        self, kit: Kit, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        faults = Faults()
        real = _storage.filesystem_for
        monkeypatch.setattr(_storage, "filesystem_for", lambda uri: FaultyFileSystem(real(uri), faults))
        previous = set_retry_policy(RetryPolicy(attempts=1))
        try:
            _interrupt_every_call(kit, faults)
        finally:
            set_retry_policy(previous)

    def test_hostile_paths_are_refused_and_nothing_lands(self, kit: Kit) -> None:
        store = kit.create("paths", read_only_prefixes=("policy/",))
        for path, error in [*HOSTILE_PATHS, ("policy/rules.md", ReadOnlyPath)]:
            with pytest.raises(error):
                store.write_text(path, "x")
            assert issubclass(error, AccessDenied | ValueError)  # typed, and a builtin too
        store.save()
        assert kit.upstream_view("paths") == {"messages.json": b"[]"}

    def test_hostile_object_names_in_storage_are_refused(self, kit: Kit) -> None:
        kit.put("planted", "messages.json", b"[]")
        kit.put("planted", "meta/..%2F..%2Fescape.json", b"{}")
        with pytest.raises(UnsafeStoreContent):
            kit.open("planted")

    def test_symlinks_in_storage_are_refused(self, kit: Kit, tmp_path) -> None:
        kit.need("symlinks", "only a backend with symlinks can point a name outside the store")
        (tmp_path / "secret.txt").write_text("secret")
        kit.put("linked", "messages.json", b"[]")  # a store in upstream's layout: ours imports it by listing
        os.symlink(tmp_path / "secret.txt", f"{kit.prefix('linked')}/leak.txt")
        with pytest.raises(UnsafeStoreContent):
            kit.open("linked")
        ours = kit.create("blob")
        ours.write_text("a.txt", "first")  # a new file is stored at its own path where creates are atomic
        ours.save()
        meta = ours.write_text("a.txt", "secret")  # a rewrite goes to a content-addressed blob
        ours.save()
        blob = next(n for n in kit.journal("blob") if n.endswith(meta.sha256))
        path = f"{journal_root(kit.prefix('blob'))}/{blob}"
        os.unlink(path)
        os.symlink(tmp_path / "secret.txt", path)
        with pytest.raises(UnsafeStoreContent):
            kit.open("blob").read_text("a.txt")

    # -- upstream interop ---------------------------------------------------------------------------------

    def test_a_store_of_ours_opens_in_upstream(self, kit: Kit) -> None:
        _need_upstream(kit)
        ours = kit.create("ours", keep_versions=True)
        ours.write_text("notes/a.md", "first")
        ours.write_text("notes/a.md", "second")
        ours.write_text("data/x.json", '{"k": 1}')
        ours.extend([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        ours.save()
        upstream = kit.upstream("ours")
        assert upstream.list_paths() == ours.list_paths() == ["data/x.json", "notes/a.md"]
        assert {p: upstream.read_text(p) for p in ours.list_paths()} == {
            "data/x.json": '{"k": 1}',
            "notes/a.md": "second",
        }
        assert upstream.messages == ours.messages
        assert upstream.current_sha("notes/a.md") == ours.current_sha("notes/a.md")

    def test_a_store_of_upstream_opens_in_ours(self, kit: Kit) -> None:
        _need_upstream(kit)
        upstream = kit.upstream("theirs")
        upstream.write_text("notes/a.md", "from upstream", actor="up", reason="r")
        upstream.append({"role": "user", "content": "hi"})
        upstream.save()
        ours = kit.open("theirs")
        assert ours.list_paths() == ["notes/a.md"] and ours.read_text("notes/a.md") == "from upstream"
        assert ours.messages == [{"role": "user", "content": "hi"}]
        meta = ours.get_meta("notes/a.md")
        assert meta is not None and meta.updated_by == "up"
        ours.write_text("b.txt", "from ours")
        ours.save()
        assert kit.upstream("theirs").read_text("b.txt") == "from ours"


def _need_upstream(kit: Kit) -> None:
    if not kit.root.upstream_reachable():
        why = kit.root.why_not or "flyte.storage, which upstream's store writes through, cannot reach it"
        pytest.skip(f"upstream's MemoryStore cannot reach {kit.root.uri}: {why}")


def _interrupt_every_call(kit: Kit, faults: Faults) -> None:
    """For each storage call of a save in turn, fail that call (no retry): the save raises and no open
    sees any of it, or it returns and every open sees all of it; saving again then completes."""
    expected, total = _save_round(kit, faults, 0, {})
    for k in range(1, total + 1):
        expected, _ = _save_round(kit, faults, k, expected)


def _save_round(kit: Kit, faults: Faults, k: int, before: dict[str, str]) -> tuple[dict[str, str], int]:
    """One save that fails at storage call `k` (none if 0); the committed state after, and the calls made."""
    store = kit.open("crash") if k else kit.create("crash")
    store.write_text(f"round/{k}.txt", str(k))
    if before:
        store.delete(min(before))
    after = _whole_state(store)
    faults.arm(at_call(k, "permanent"))
    try:
        store.save()
        raised = False
    except (StorageError, MemoryStoreError):
        raised = True
    calls = faults.calls
    faults.clear()
    seen = _whole_state(kit.open("crash"))
    assert seen == (before if raised else after), (k, raised, seen)  # a save that raised is invisible
    if raised:
        store.save()  # the same handle, as a caller retrying after the error would
        assert _whole_state(kit.open("crash")) == after
    return after, calls


def _whole_state(store) -> dict[str, str]:
    return {p: store.read_text(p) for p in store.list_paths()}
