"""Storage that fails, times out, loses replies or returns short data: every public call completes or
raises a typed error, no committed state is ever partial, and a retried save commits nothing twice."""

from __future__ import annotations

import json
import os
from collections import Counter

import fsspec
import pytest

from faults import Faults, FaultyFileSystem, at_call, at_random, from_call
from flyteplugins_memory import (
    UNVERIFIED_BACKENDS_ENV,
    MemoryStore,
    MemoryStoreError,
    RetryPolicy,
    StorageError,
    get_retry_policy,
    set_retry_policy,
)
from flyteplugins_memory.storage import _fsspec as _storage
from reports import report

#: seeds of the random-fault soak; FLYTEPLUGINS_MEMORY_STRESS raises it for a long run
SOAK_SEEDS = int(os.environ.get("FLYTEPLUGINS_MEMORY_STRESS_SEEDS", "0")) or (
    40 if os.environ.get("FLYTEPLUGINS_MEMORY_STRESS") else 4
)
FAST = RetryPolicy(attempts=5, initial_delay=0.0, max_delay=0.0, jitter=False)
NO_RETRY = RetryPolicy(attempts=1)

OLD = ({"a.txt": "old a", "b.txt": "old b", "c.txt": "old c"}, ["old"])
NEW = ({"a.txt": "new a", "c.txt": "old c", "d.txt": "new d"}, ["old", "new"])


ALL_FAULTS: list[Faults] = []


@pytest.fixture(scope="module", autouse=True)
def fault_report():
    """After the module: how many storage calls were made under a plan, and how many faults of each kind."""
    yield
    totals = sum((f.totals for f in ALL_FAULTS), Counter())
    report("faults", {"plans": len(ALL_FAULTS), **dict(sorted(totals.items()))})


def install(backend, monkeypatch) -> tuple:
    """Route every storage call of the store through one `Faults` plan (disarmed until a test arms it)."""
    faults = Faults()
    ALL_FAULTS.append(faults)
    real = _storage.filesystem_for
    monkeypatch.setattr(_storage, "filesystem_for", lambda uri: FaultyFileSystem(real(uri), faults))
    # the wrapper is no verified class; its create-only write is the real backend's create_exclusive
    monkeypatch.setenv(UNVERIFIED_BACKENDS_ENV, fsspec.utils.get_protocol(backend.raw_data_path))
    return backend, faults


@pytest.fixture(autouse=True)
def fast_retries():
    previous = set_retry_policy(FAST)
    yield
    set_retry_policy(previous)


@pytest.fixture(params=["local_backend", "memory_backend", "s3_backend"])
def faulty(request, monkeypatch):
    return install(request.getfixturevalue(request.param), monkeypatch)


@pytest.fixture
def faulty_shared(durable_backend, monkeypatch):
    """Backends that upstream's store can also write (it has no memory:// storage)."""
    return install(durable_backend, monkeypatch)


def arm(faults: Faults, plan) -> None:
    faults.calls, faults.injected, faults.plan = 0, [], plan


def prepare(key: str) -> None:
    store = MemoryStore.create(key=key)
    for path, text in OLD[0].items():
        store.write_text(path, text)
    store.append({"role": "user", "content": "old"})
    store.save()


def change(key: str) -> MemoryStore:
    """A handle holding a write, a new file, a delete and an append (the save under test)."""
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "new a")
    store.write_text("d.txt", "new d")
    store.delete("b.txt")
    store.append({"role": "user", "content": "new"})
    return store


def snapshot(key: str) -> tuple:
    store = MemoryStore.get_or_create(key=key)
    return {p: store.read_text(p) for p in store.list_paths()}, [m["content"] for m in store.messages]


def assert_saved_once(backend, key: str) -> None:
    """The store holds NEW, each change audited exactly once, and upstream's view agrees."""
    assert snapshot(key) == NEW
    events = [(e["op"], e["path"]) for e in MemoryStore.get_or_create(key=key).audit_tail(0)]
    assert events[:3] == [("create", "a.txt"), ("create", "b.txt"), ("create", "c.txt")]
    assert sorted(events[3:]) == [("create", "d.txt"), ("delete", "b.txt"), ("update", "a.txt")], events
    assert [m["content"] for m in json.loads(backend.upstream_view(key)["messages.json"])] == NEW[1]


def calls_of_a_save(faults: Faults, key: str) -> int:
    prepare(f"{key}-probe")
    store = change(f"{key}-probe")
    arm(faults, lambda n, op, path: None)
    store.save()
    return faults.calls


@pytest.mark.parametrize("kind", ["fail", "timeout", "lost_reply"])
def test_a_transient_fault_at_any_call_of_a_save_is_retried_and_saved_once(faulty, key, kind):
    backend, faults = faulty
    total = calls_of_a_save(faults, key)
    assert total >= 6
    for k in range(1, total + 1):
        name = f"{key}-{k}"
        prepare(name)
        store = change(name)
        arm(faults, at_call(k, kind))
        store.save()
        faults.clear()
        assert [f[0] for f in faults.injected] == [k]
        assert_saved_once(backend, name)


@pytest.mark.parametrize("kind", ["permanent", "timeout", "lost_reply"])
def test_a_save_failing_at_any_call_is_invisible_or_complete_and_saving_again_commits_once(faulty, key, kind):
    backend, faults = faulty
    total = calls_of_a_save(faults, key)
    set_retry_policy(NO_RETRY)
    outcomes = []
    for k in range(1, total + 1):
        name = f"{key}-{k}"
        prepare(name)
        store = change(name)
        arm(faults, at_call(k, kind))
        try:
            store.save()
        except StorageError:
            raised = True
        else:
            raised = False
        faults.clear()
        state = snapshot(name)
        assert state == (OLD if raised else NEW), (k, raised, state)  # a save that raised is invisible
        outcomes.append(state == NEW)
        store.save()  # the same handle, as a caller retrying after the error would
        assert_saved_once(backend, name)
        assert not store.has_unsaved_changes()
    # the commit point lies in between: a failure before it raised (a failed in-place create of a new file
    # does not: that file falls back to a blob), every failure after it left the save complete
    assert False in outcomes and outcomes[-1] is True


def test_an_outage_exhausts_the_retries_then_raises_a_typed_error(faulty, key):
    backend, faults = faulty
    prepare(key)
    store = change(key)
    arm(faults, from_call(1, "timeout"))
    with pytest.raises(StorageError, match=f"after {FAST.attempts} attempts"):
        store.save()
    # bounded: each upload of the first wave (the two new files created in place, then, after those failed,
    # their blobs; beside them the changed file's blob and the search segment, decision 0144) tried
    # `attempts` times, then the failed save's cleanup looks for a deletion or a purge (the head and one
    # probe past it, decision 0160), tried as often, and nothing after it
    tried = Counter(path for _, _, path, _ in faults.injected)
    assert 2 <= len(tried) <= 8 and set(tried.values()) == {FAST.attempts}, faults.injected
    written = {path for _, op, path, _ in faults.injected if op == "write"}
    assert not [p for p in written if "/log/" in p], tried  # no commit was attempted
    faults.clear()
    assert snapshot(key) == OLD
    store.save()
    assert_saved_once(backend, key)


def test_short_reads_never_pass_for_content(faulty, key):
    backend, faults = faulty
    prepare(key)
    change(key).save()
    before = backend.stored(key)
    set_retry_policy(NO_RETRY)

    def read_everything() -> tuple:
        store = MemoryStore.get_or_create(key=key)
        files = {p: store.read_text(p) for p in store.list_paths()}
        return files, [m["content"] for m in store.messages], len(store.audit_tail(0))

    arm(faults, lambda n, op, path: None)
    expected = read_everything()
    total = faults.calls
    refused = 0
    for k in range(1, total + 1):
        arm(faults, at_call(k, "truncate"))
        try:
            assert read_everything() == expected
        except MemoryStoreError:
            refused += 1
    faults.clear()
    assert refused > 0
    assert backend.stored(key) == before


def test_importing_an_upstream_store_under_short_reads_commits_only_whole_content(faulty_shared, key):
    _, faults = faulty_shared
    from flyte.ai.agents import MemoryStore as UpstreamStore

    upstream = UpstreamStore.get_or_create(key=key)
    upstream.write_text("notes/a.md", "written by upstream")
    upstream.append({"role": "user", "content": "from upstream"})
    upstream.save()
    set_retry_policy(NO_RETRY)
    refused = 0
    for k in range(1, 12):
        arm(faults, at_call(k, "truncate"))
        try:
            store = MemoryStore.get_or_create(key=key)
            store.write_text(f"ours/{k}.txt", str(k))
            store.save()
        except MemoryStoreError:
            refused += 1
        faults.clear()
        opened = MemoryStore.get_or_create(key=key)
        assert opened.read_text("notes/a.md") == "written by upstream"
        assert opened.messages == [{"role": "user", "content": "from upstream"}]
        assert opened.current_sha("notes/a.md") == upstream.current_sha("notes/a.md")
    assert refused > 0


@pytest.mark.parametrize("seed", range(SOAK_SEEDS))
def test_random_faults_lose_nothing_that_was_acknowledged(faulty, key, seed):
    """One handle makes random changes and saves under random faults of every kind; each call completes
    or raises a typed error; each open sees the acknowledged state or a later one; in the end every
    change is committed exactly once."""
    import random

    _, faults = faulty
    rng = random.Random(seed)
    store = MemoryStore.create(key=key)
    acknowledged: tuple = ({}, [])
    expected_files: dict[str, str] = {}
    expected_messages: list[str] = []
    changes = 0
    failures: list[str] = []
    arm(faults, at_random(seed, 0.25))
    for step in range(60):
        action = rng.choice(["write", "write", "delete", "append", "save", "save", "read"])
        path = f"f{rng.randrange(6)}.txt"
        try:
            if action == "write":
                store.write_text(path, f"{seed}:{step}")
                expected_files[path] = f"{seed}:{step}"
                changes += 1
            elif action == "delete":
                if store.delete(path):
                    del expected_files[path]
                    changes += 1
            elif action == "append":
                store.append({"role": "user", "content": f"{step}"})
                expected_messages.append(f"{step}")
            elif action == "save":
                store.save()
                acknowledged = (dict(expected_files), list(expected_messages))
            elif path in expected_files:
                assert store.read_text(path) == expected_files[path]
        except MemoryStoreError as exc:  # typed; the handle's view must be unchanged by it
            failures.append(type(exc).__name__)
        assert store.list_paths() == sorted(expected_files)
    faults.clear()
    assert faults.injected and set(failures) <= {"StorageError", "CorruptStore"}
    committed = snapshot(key)
    assert committed[1][: len(acknowledged[1])] == acknowledged[1]  # never behind what save() acknowledged
    store.save()
    assert snapshot(key) == (expected_files, expected_messages)
    assert len(MemoryStore.get_or_create(key=key).audit_tail(0)) == changes


def test_retry_policy_bounds_and_validation():
    policy = RetryPolicy(attempts=4, initial_delay=0.5, max_delay=1.5, multiplier=2.0, jitter=False)
    assert [policy.delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 1.5]
    assert policy.max_wait == 3.0
    jittered = RetryPolicy(initial_delay=1.0, max_delay=1.0)
    assert all(0 <= jittered.delay(1) <= 1.0 for _ in range(50))
    for bad in ({"attempts": 0}, {"initial_delay": -1}, {"multiplier": 0.5}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)
    with pytest.raises(TypeError):
        set_retry_policy(3)  # type: ignore[arg-type]
    assert get_retry_policy() == FAST  # a refused policy changes nothing


def test_transient_failures_are_told_apart_from_permanent_ones():
    import errno

    from flyteplugins_memory._base.retry import is_transient

    class HttpError(Exception):
        def __init__(self, code: int):
            super().__init__(code)
            self.code = code

    wrapped = OSError("wrapped")
    wrapped.__cause__ = ConnectionResetError()
    transient = [TimeoutError(), ConnectionResetError(), OSError(errno.EBUSY, "SlowDown"), HttpError(503), wrapped]
    permanent = [FileNotFoundError(), PermissionError(), FileExistsError(), HttpError(404), ValueError(), OSError()]
    assert all(is_transient(e) for e in transient)
    assert not any(is_transient(e) for e in permanent)


def test_retries_wait_as_the_policy_says(faulty, key):
    _, faults = faulty
    waits: list[int] = []

    class Recording(RetryPolicy):
        def delay(self, retry: int) -> float:
            waits.append(retry)
            return 0.0

    prepare(key)
    set_retry_policy(Recording(attempts=4))
    arm(faults, lambda n, op, path: "fail" if n <= 3 else None)
    assert snapshot(key) == OLD
    assert waits == [1, 2, 3]


def once_on_commit(kind: str, *, then_unreachable: bool = True):
    """A plan that misbehaves on the first create of a commit record only; with `then_unreachable`, the
    save's own check of whether that create landed fails too, so the outcome stays unknown to it."""
    done: list[str] = []

    def plan(n: int, op: str, path: str) -> str | None:
        if op == "write" and "/.journal/" in path and "/meta/.journal/" not in path and "/log/" in path and not done:
            done.append(path)
            return kind
        if then_unreachable and len(done) == 1 and op == "read" and path == done[0]:
            done.append("checked")
            return "permanent"
        return None

    return plan


def test_a_lost_reply_on_the_commit_is_recognised_at_once(faulty, key):
    backend, faults = faulty
    prepare(key)
    store = change(key)
    set_retry_policy(NO_RETRY)
    arm(faults, once_on_commit("lost_reply", then_unreachable=False))
    store.save()  # landed: the save finds its own commit and returns normally
    assert [f[3] for f in faults.injected] == ["lost_reply"]
    faults.clear()
    assert_saved_once(backend, key)
    assert not store.has_unsaved_changes()


def test_a_landed_save_is_recognised_after_many_later_commits(faulty, key):
    _, faults = faulty
    prepare(key)
    store = change(key)
    set_retry_policy(NO_RETRY)
    arm(faults, once_on_commit("lost_reply"))
    with pytest.raises(StorageError):
        store.save()
    other = MemoryStore.get_or_create(key=key)
    for i in range(70):  # more than the 64 commit ids a record remembers
        other.write_text(f"later/{i}.txt", str(i))
        other.save()
    store.save()
    reopened = MemoryStore.get_or_create(key=key)
    assert [m["content"] for m in reopened.messages] == ["old", "new"]
    assert [e["path"] for e in reopened.audit_tail(0)].count("d.txt") == 1


def test_a_delete_after_a_landed_failed_save_is_kept(faulty, key):
    _, faults = faulty
    store = MemoryStore.create(key=key)
    store.write_text("new.txt", "created")
    set_retry_policy(NO_RETRY)
    arm(faults, once_on_commit("lost_reply"))
    with pytest.raises(StorageError):
        store.save()
    faults.clear()
    assert store.delete("new.txt")
    store.save()
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.list_paths() == []
    assert [(e["op"], e["path"]) for e in reopened.audit_tail(0)] == [("create", "new.txt"), ("delete", "new.txt")]


def test_a_lost_reply_with_a_commit_in_between_keeps_the_newer_content(faulty, key):
    backend, faults = faulty
    prepare(key)
    store = change(key)

    def commit_in_between() -> None:  # a writer that opens the store after our commit landed
        faults.clear()
        other = MemoryStore.get_or_create(key=key)
        other.write_text("d.txt", "rewritten by the other")
        other.write_text("x.txt", "other")
        other.save()

    faults.meanwhile = commit_in_between
    arm(faults, once_on_commit("lost_reply"))
    store.save()  # retried: finds its own commit in the slot it tried, under the other's newer one
    assert snapshot(key)[0] == {**NEW[0], "d.txt": "rewritten by the other", "x.txt": "other"}
    assert store.read_text("d.txt") == "new d"  # this handle stands on its own commit, not the newer one
    store.refresh()
    assert store.read_text("d.txt") == "rewritten by the other"
    assert backend.upstream_view(key)["x.txt"] == b"other"


def test_upstream_audit_log_is_rebuilt_after_a_short_read(faulty, key):
    backend, faults = faulty
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "1")
    store.compact()
    store.write_text("b.txt", "2")
    set_retry_policy(NO_RETRY)
    arm(faults, lambda n, op, path: "truncate" if path.endswith("audit/log.jsonl") else None)
    store.compact()  # cannot trust what it read, so leaves upstream's log as it was
    faults.clear()
    for name in ("c.txt", "d.txt"):
        store.write_text(name, "3")
        store.compact()
    lines = backend.upstream_view(key)["audit/log.jsonl"].decode().splitlines()
    assert [json.loads(line)["path"] for line in lines] == ["a.txt", "b.txt", "c.txt", "d.txt"]


def test_a_short_read_never_tears_an_imported_audit_line(faulty, key):
    backend, faults = faulty
    backend.put(key, "messages.json", b"[]")
    backend.put(key, "audit/log.jsonl", b'{"op": "create", "path": "p1"}\n{"op": "create", "path": "p2"}\n')
    store = MemoryStore.get_or_create(key=key)
    store.write_text("f.txt", "1")
    store.save()
    set_retry_policy(NO_RETRY)
    arm(faults, lambda n, op, path: "truncate" if path.endswith("audit/log.jsonl") else None)
    store.compact()
    faults.clear()
    store.write_text("g.txt", "2")
    store.compact()
    lines = backend.upstream_view(key)["audit/log.jsonl"].decode().splitlines()
    assert [json.loads(line)["path"] for line in lines] == ["p1", "p2", "f.txt", "g.txt"]


def test_only_a_real_precondition_failure_means_the_slot_is_taken():
    from flyteplugins_memory.storage._conditional import _is_precondition_failure

    class ClientError(Exception):
        def __init__(self, code: str, status: int):
            super().__init__(f"An error occurred ({code})")
            self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}

    class HttpError(Exception):
        def __init__(self, code: int):
            super().__init__(f"HTTP {code}")
            self.code = code

    taken = OSError("wrapped")
    taken.__cause__ = ClientError("PreconditionFailed", 412)
    assert _is_precondition_failure(taken)
    assert _is_precondition_failure(HttpError(412))
    forbidden = PermissionError("Access denied to meta/.journal/log/00000000000000000412.json")
    forbidden.__cause__ = ClientError("AccessDenied", 403)
    assert not _is_precondition_failure(forbidden)
    assert not _is_precondition_failure(HttpError(503))
