"""The Definable memory-store adapter (``adapters.definable``), on local disk and moto S3, without Definable
installed (duck-typed entries): the protocol as Definable documents it, what lands in storage (checked
through a new handle and the backend itself), user and session isolation, hostile ids, and two processes
adding to one key at once. The real framework drives the adapter in the slow test at the end, in a
Python 3.12 virtualenv (`.venv-definable/`, made once)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import textwrap
import urllib.parse

import pytest

from flyteplugins_memory import (
    ConcurrencyError,
    InvalidArgument,
    MemoryStore,
    StorageError,
    StoreDeleted,
    UnsavedChanges,
)
from flyteplugins_memory.adapters.definable import (
    DefinableMemoryStore,
    DuplicateMemoryId,
    MemoryEntry,
    encode_id,
)
from helpers import RaceBefore, caller_with_a_conflicting_edit, race_children, run_python, scan
from repo import REPO, SUPPORT

HOSTILE_IDS = ["../bob", "a/b", "..", ".", "%2e%2e", "x\x00y", "ALICE", "alice\u2024", " ", "a" * 300, "~/x"]
#: an empty session or user id is refused (`InvalidArgument`), not encoded (test_bad_entries_are_typed_errors)


@dataclasses.dataclass
class CallerEntry:
    """A caller's own entry type with Definable's fields (duck typing)."""

    session_id: str
    memory_id: str | None = None
    user_id: str = "default"
    role: str = "user"
    content: str = ""
    message_data: dict | None = None
    created_at: float | None = None
    updated_at: float | None = None


async def opened(key: str, **kwargs) -> DefinableMemoryStore:
    adapter = DefinableMemoryStore(key, **kwargs)
    await adapter.initialize()
    return adapter


def entry_files(backend, key: str) -> dict[str, dict]:
    """The adapter's entry files as the backend itself holds them."""
    return {n: json.loads(d) for n, d in backend.objects(key).items() if n.startswith("definable/users/")}


def claim_files(backend, key: str) -> dict[str, dict]:
    """The ids' claims (``definable/ids/``) as the backend itself holds them."""
    return {n: json.loads(d) for n, d in backend.objects(key).items() if n.startswith("definable/ids/")}


def committed(backend, key: str, files: dict[str, dict]) -> dict[str, dict]:
    """Those of `files` that a commit holds: with their sidecar, which is written after the commit point.
    A save that conflicts leaves the new files it created in place, unreferenced and without a sidecar
    (docs/decisions/0041-new-files-are-uploaded-in-place.md)."""
    names = set(backend.objects(key))
    return {n: f for n, f in files.items() if f"meta/{urllib.parse.quote(n, safe='')}.json" in names}


async def test_the_protocol_end_to_end_and_what_lands_in_storage(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    adapter = await opened(key)
    assert await adapter.get_entries("s1") == [] and await adapter.count("s1") == 0
    assert await adapter.get_entry("nope") is None
    await adapter.add(MemoryEntry(session_id="s1", memory_id="m3", content="third", created_at=30.0))
    await adapter.add(MemoryEntry(session_id="s1", memory_id="m1", content="first", created_at=10.0))
    await adapter.add(MemoryEntry(session_id="s1", memory_id="m2", content="tie-a", created_at=20.0))
    await adapter.add(MemoryEntry(session_id="s1", memory_id="m0", content="tie-b", created_at=20.0))
    await adapter.add(
        MemoryEntry(session_id="s1", memory_id="m4", role="assistant", content="x", message_data={"tool_calls": [1]})
    )
    assert not adapter.store.has_unsaved_changes()  # every call committed

    fresh = await opened(key)  # a new handle sees exactly what was stored
    entries = await fresh.get_entries("s1")
    assert [e.memory_id for e in entries] == ["m1", "m2", "m0", "m3", "m4"]  # created_at, ties by insertion
    assert all(isinstance(e, MemoryEntry) for e in entries)
    assert entries[-1].role == "assistant" and entries[-1].message_data == {"tool_calls": [1]}
    assert [e.memory_id for e in await fresh.get_entries("s1", limit=2)] == ["m1", "m2"]
    assert await fresh.count("s1") == 5
    assert (await fresh.get_entry("m1")).content == "first"

    files = entry_files(backend, key)
    assert len(files) == 5
    assert all(n.startswith("definable/users/default/sessions/s1/") for n in files)
    assert {f["entry"]["memory_id"] for f in files.values()} == {"m0", "m1", "m2", "m3", "m4"}

    await fresh.update(MemoryEntry(session_id="elsewhere", memory_id="m1", content="edited", created_at=99.0))
    got = await (await opened(key)).get_entry("m1")
    assert (got.content, got.session_id, got.created_at) == ("edited", "s1", 10.0)  # never moves
    await fresh.delete("m3")
    await adapter.delete("m3")  # missing: no-op
    await adapter.update(MemoryEntry(session_id="s1", memory_id="ghost", content="?"))  # missing: no-op
    assert await adapter.get_entry("ghost") is None and await adapter.get_entry("m3") is None
    assert [e.memory_id for e in await adapter.get_entries("s1")] == ["m1", "m2", "m0", "m4"]
    assert {c["memory_id"] for c in claim_files(backend, key).values()} == {"m0", "m1", "m2", "m4"}
    await adapter.delete_session("s1")
    await adapter.close()
    assert await (await opened(key)).count("s1") == 0 and entry_files(backend, key) == {}
    assert claim_files(backend, key) == {}  # deleted with their entries: the ids can be added again


async def test_users_and_sessions_are_isolated(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    adapter = await opened(key)
    for user in ("alice", "bob"):
        for session in ("s1", "s2"):
            await adapter.add(MemoryEntry(session_id=session, user_id=user, content=f"{user}:{session}"))
    fresh = await opened(key)
    assert [e.content for e in await fresh.get_entries("s1", "alice")] == ["alice:s1"]
    assert [e.content for e in await fresh.get_entries("s2", "bob")] == ["bob:s2"]
    assert await fresh.get_entries("s1") == [] and await fresh.count("s1", "carol") == 0
    await fresh.delete_session("s1", "alice")
    assert await fresh.count("s1", "alice") == 0 and await fresh.count("s1", "bob") == 1
    await fresh.delete_session("s2")  # no user: every user's s2, as Definable's stores
    assert await fresh.count("s2", "alice") == 0 and await fresh.count("s2", "bob") == 0
    assert [n.split("/")[2:5] for n in entry_files(backend, key)] == [["bob", "sessions", "s1"]]
    assert [c["path"] for c in claim_files(backend, key).values()] == list(entry_files(backend, key))


async def test_hostile_ids_stay_in_their_own_directory(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    adapter = await opened(key)
    for i, hostile in enumerate(HOSTILE_IDS):
        await adapter.add(MemoryEntry(session_id=hostile, user_id=hostile, memory_id=f"{hostile}#{i}", content=str(i)))
    await adapter.add(MemoryEntry(session_id="bob", user_id="bob", content="plain"))
    fresh = await opened(key)
    for i, hostile in enumerate(HOSTILE_IDS):
        assert [e.content for e in await fresh.get_entries(hostile, hostile)] == [str(i)]
        assert (await fresh.get_entry(f"{hostile}#{i}")).user_id == hostile
    assert [e.content for e in await fresh.get_entries("bob", "bob")] == ["plain"]
    names = list(entry_files(backend, key))
    assert len(names) == len(HOSTILE_IDS) + 1
    assert all(n.startswith("definable/users/") and ".." not in n.split("/") for n in names)
    assert len({n.split("/")[2] for n in names}) == len(names)  # no two ids share a user directory
    assert len({encode_id(h) for h in HOSTILE_IDS}) == len(HOSTILE_IDS)


async def test_duck_typed_entries_come_back_as_the_callers_type(local_backend, key):
    adapter = await opened(key)
    await adapter.add(CallerEntry(session_id="s", memory_id="m", content="hi", created_at=1.0, updated_at=1.0))
    got = await adapter.get_entries("s")
    assert got == [CallerEntry(session_id="s", memory_id="m", content="hi", created_at=1.0, updated_at=1.0)]
    assert isinstance(await (await opened(key)).get_entry("m"), MemoryEntry)  # a new adapter: ours
    assert isinstance(await (await opened(key, entry_class=CallerEntry)).get_entry("m"), CallerEntry)


async def test_bad_input_changes_nothing(local_backend, key):
    adapter = await opened(key)
    await adapter.add(MemoryEntry(session_id="s", memory_id="m"))
    with pytest.raises(DuplicateMemoryId):
        await adapter.add(MemoryEntry(session_id="other", memory_id="m"))
    with pytest.raises(InvalidArgument):
        await adapter.add(CallerEntry(session_id=None, memory_id="n"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        DefinableMemoryStore(42)  # type: ignore[arg-type]
    assert await adapter.count("s") == 1 and await adapter.count("other") == 0
    assert not adapter.store.has_unsaved_changes()


async def test_racing_adds_of_one_id_one_wins_the_other_is_a_duplicate(durable_backend_and_endpoint, key, monkeypatch):
    """Two handles adding one memory_id (other user, other created_at: other paths) both succeeded and
    the journal merged two entries; then delete left one behind."""
    backend, _ = durable_backend_and_endpoint
    winner, loser = await opened(key), await opened(key)
    won = MemoryEntry(session_id="s", user_id="alice", memory_id="m", content="winner", created_at=1.0)
    monkeypatch.setattr(loser.store, "save", RaceBefore(loser.store, lambda: winner.add(won)))
    with pytest.raises(DuplicateMemoryId):
        await loser.add(MemoryEntry(session_id="t", user_id="bob", memory_id="m", content="loser", created_at=2.0))

    files = committed(backend, key, entry_files(backend, key))
    assert [f["entry"]["content"] for f in files.values()] == ["winner"]
    assert [c["path"] for c in claim_files(backend, key).values()] == list(files)
    assert await loser.count("t", "bob") == 0  # the loser's handle keeps nothing of its entry either
    await loser.add(MemoryEntry(session_id="t", user_id="bob", memory_id="other", content="later"))
    assert not any("/sessions/t/" in p and p.endswith("-m.json") for p in loser.store.log(limit=1)[0].wrote)
    assert [f["entry"]["memory_id"] for f in committed(backend, key, entry_files(backend, key)).values()] == [
        "m",
        "other",
    ]
    await loser.delete("m")
    assert await (await opened(key)).get_entry("m") is None
    assert [c["memory_id"] for c in claim_files(backend, key).values()] == ["other"]
    await winner.add(MemoryEntry(session_id="s", memory_id="m", content="again"))  # a deleted id is free
    assert (await (await opened(key)).get_entry("m")).content == "again"


async def test_racing_updates_of_one_entry_both_apply_in_turn(durable_backend_and_endpoint, key, monkeypatch):
    """The retry of a conflicting update had no test: the second update reapplies on top of the first."""
    backend, _ = durable_backend_and_endpoint
    first, second = await opened(key), await opened(key)
    await first.add(MemoryEntry(session_id="s", memory_id="m", content="v0", created_at=1.0))
    assert (await second.get_entry("m")).content == "v0"
    race = lambda: first.update(MemoryEntry(session_id="s", memory_id="m", content="v1", message_data={"a": 1}))  # noqa: E731
    monkeypatch.setattr(second.store, "save", RaceBefore(second.store, race))
    await second.update(MemoryEntry(session_id="s", memory_id="m", content="v2", message_data={"b": 2}))

    [stored] = entry_files(backend, key).values()
    assert (stored["entry"]["content"], stored["entry"]["message_data"]) == ("v2", {"b": 2})
    assert stored["entry"]["created_at"] == 1.0  # kept through both
    reasons = [c.reason for c in MemoryStore.open(key=key).log(limit=10)]
    assert reasons[:3] == ["definable update", "definable update", "definable add"]  # both landed, in turn


BAD_TIMES = ["5", "abc", float("nan"), float("inf"), -float("inf"), -1.0, True, False, 1e300, [1.0], {"t": 1}]


@pytest.mark.parametrize("field", ["created_at", "updated_at"])
async def test_times_that_are_not_epoch_seconds_are_refused_before_anything_is_written(
    durable_backend_and_endpoint, key, field
):
    """created_at="5" used to be stored, and every later get_entries of the session raised TypeError
    (a str sorted against floats); NaN, inf, "abc" and bools raised ValueError or OverflowError."""
    backend, _ = durable_backend_and_endpoint
    adapter = await opened(key)
    await adapter.add(MemoryEntry(session_id="s", memory_id="kept", content="v1", created_at=1.0))
    before = backend.stored(key)
    for bad in BAD_TIMES:
        with pytest.raises(InvalidArgument, match=field):
            await adapter.add(CallerEntry(session_id="s", memory_id="new", **{field: bad}))
        with pytest.raises(InvalidArgument, match=field):
            await adapter.update(CallerEntry(session_id="s", memory_id="kept", content="v2", **{field: bad}))
    assert backend.stored(key) == before  # nothing reached storage: no entry, no commit
    assert not adapter.store.has_unsaved_changes()
    await adapter.add(MemoryEntry(session_id="s", memory_id="zero", created_at=0))  # int seconds are seconds
    await adapter.add(CallerEntry(session_id="s", memory_id="none", created_at=2.5, updated_at=None))
    fresh = await opened(key)
    assert [e.memory_id for e in await fresh.get_entries("s")] == ["zero", "kept", "none"]
    assert (await fresh.get_entry("kept")).content == "v1"


async def test_a_time_stored_before_times_were_checked_does_not_break_the_session(local_backend, key):
    adapter = await opened(key)
    await adapter.add(MemoryEntry(session_id="s", memory_id="good", created_at=1.0))
    labels = {"memory_id": "old", "user_id": "default", "session_id": "s"}  # as the unchecked adapter wrote it
    entry = {"session_id": "s", "memory_id": "old", "user_id": "default", "content": "", "created_at": "5"}
    body = {"format": 1, "added_ns": 0, "entry": entry}
    await adapter.store.write_json.aio("definable/users/default/sessions/s/old.json", body, metadata=labels)
    await adapter.store.save.aio()
    assert [e.memory_id for e in await (await opened(key)).get_entries("s")] == ["old", "good"]  # sorts as 0


async def test_an_adapter_over_an_open_handle(local_backend, key):
    store = await MemoryStore.get_or_create.aio(key=key)
    adapter = DefinableMemoryStore(store)
    await adapter.initialize()
    await adapter.add(MemoryEntry(session_id="s", content="x"))
    assert adapter.store is store
    reopened = await MemoryStore.open.aio(key=key)
    assert reopened.list_paths("definable/users")[0].startswith("definable/users/default/")


ADD_WORKER = textwrap.dedent(
    """
    import asyncio, json, os, sys, time
    sys.path.insert(0, {tests!r})
    from workers import setup
    config = json.loads(sys.argv[1])
    setup(config)
    from flyteplugins_memory.adapters.definable import DefinableMemoryStore, MemoryEntry

    async def main():
        adapter = DefinableMemoryStore(config["key"])
        await adapter.initialize()
        while not os.path.exists(config["go"]):
            time.sleep(0.01)
        for i in range(config["n"]):
            user = "alice" if i % 2 else "bob"
            await adapter.add(MemoryEntry(session_id="shared", user_id=user, content=f"{{config['worker']}}:{{i}}"))
        await adapter.close()

    asyncio.run(main())
    """
)


def test_two_processes_adding_to_one_key_lose_nothing(durable_backend_and_endpoint, key, tmp_path):
    backend, endpoint = durable_backend_and_endpoint
    MemoryStore.create(key=key)
    go = tmp_path / "go"
    script = ADD_WORKER.format(tests=str(SUPPORT))
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "go": str(go), "n": 6}
    race_children(script, config, timeout=240)
    store = MemoryStore.open(key=key)
    adapter = DefinableMemoryStore(store)
    both = asyncio.run(_contents(adapter))
    assert sorted(both) == sorted(f"{w}:{i}" for w in range(2) for i in range(6))
    assert len(entry_files(backend, key)) == 12


RACE_WORKER = textwrap.dedent(
    """
    import asyncio, json, os, pathlib, sys, time
    sys.path.insert(0, {tests!r})
    from workers import setup
    config = json.loads(sys.argv[1])
    setup(config)
    from flyteplugins_memory.adapters.definable import DefinableMemoryStore, DuplicateMemoryId, MemoryEntry

    async def main():
        worker = config["worker"]
        adapter = DefinableMemoryStore(config["key"])
        await adapter.initialize()
        while not os.path.exists(config["go"]):
            time.sleep(0.01)
        outcomes = {{}}
        for i in range(config["n"]):  # the same ids, each under the worker's own user and session
            scope = dict(session_id=f"s{{worker}}", user_id=f"u{{worker}}")
            entry = MemoryEntry(**scope, memory_id=f"r{{i}}", content=str(worker))
            try:
                await adapter.add(entry)
                outcomes[entry.memory_id] = "added"
            except DuplicateMemoryId:
                outcomes[entry.memory_id] = "duplicate"
        for i in range(config["n"]):  # the same entry, updated by both
            await adapter.update(MemoryEntry(session_id="x", memory_id="shared", content=f"{{worker}}:{{i}}"))
        await adapter.close()
        pathlib.Path(config["out"] + str(worker)).write_text(json.dumps(outcomes))

    asyncio.run(main())
    """
)


def test_two_processes_adding_and_updating_the_same_ids(durable_backend_and_endpoint, key, tmp_path):
    """Racing adds of one id: exactly one process adds it, the other gets DuplicateMemoryId; racing
    updates of one entry: every update commits (retried on conflict), none raises."""
    backend, endpoint = durable_backend_and_endpoint
    n = 5
    asyncio.run(_add_shared(key))
    script = RACE_WORKER.format(tests=str(SUPPORT))
    out = str(tmp_path / "out")
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "go": str(tmp_path / "go"), "n": n}
    race_children(script, {**config, "out": out}, timeout=240)

    outcomes = [json.loads(pathlib.Path(out + str(w)).read_text()) for w in range(2)]
    added = {i: [w for w in range(2) if outcomes[w][i] == "added"] for i in outcomes[0]}
    assert all(len(workers) == 1 for workers in added.values()), outcomes
    files = committed(backend, key, entry_files(backend, key))
    stored = {f["entry"]["memory_id"]: f["entry"] for f in files.values()}
    assert len(files) == n + 1 and set(stored) == {f"r{i}" for i in range(n)} | {"shared"}
    assert all(stored[i]["content"] == str(workers[0]) for i, workers in added.items())  # the winner's
    assert len(committed(backend, key, claim_files(backend, key))) == n + 1
    assert stored["shared"]["content"] in {f"0:{n - 1}", f"1:{n - 1}"}
    reasons = [c.reason for c in MemoryStore.open(key=key).log(limit=100)]
    assert reasons.count("definable update") == 2 * n  # nothing lost


async def _add_shared(key: str) -> None:
    adapter = await opened(key)
    await adapter.add(MemoryEntry(session_id="x", memory_id="shared", content="start"))


async def _contents(adapter: DefinableMemoryStore) -> list[str]:
    return [e.content for user in ("alice", "bob") for e in await adapter.get_entries("shared", user)]


# -- the real framework, in a Python 3.12 virtualenv ----------------------------------------------------

VENV = REPO / ".venv-definable"
REAL_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import flyte
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath
    from definable.memory import Memory, MemoryEntry
    from definable.memory.store.base import MemoryStore as Protocol
    from flyteplugins_memory.adapters.definable import DefinableMemoryStore

    config = json.loads(sys.argv[1])
    flyte.init(org="acme", project="research", domain="development")
    internal_ctx().new_raw_data_path(RawDataPath(path=config["raw"])).__enter__()

    async def main():
        store = DefinableMemoryStore(config["key"])
        assert isinstance(store, Protocol)
        memory = Memory(store=store)
        await store.initialize()
        await store.add(MemoryEntry(session_id="s", user_id="alice", content="b", created_at=2.0, memory_id="m2"))
        await store.add(MemoryEntry(session_id="s", user_id="alice", content="a", created_at=1.0, memory_id="m1",
                                    keywords=["tea"], importance=0.9))
        await store.add(MemoryEntry(session_id="s", user_id="bob", content="bob's", memory_id="m3"))
        entries = await memory.get_entries("s", "alice")
        assert [type(e) for e in entries] == [MemoryEntry, MemoryEntry], entries
        assert [e.content for e in entries] == ["a", "b"] and entries[0].keywords == ["tea"]
        assert entries[0].importance == 0.9
        await memory.update("m2", "b edited")
        assert (await store.get_entry("m2")).content == "b edited"
        assert await store.count("s", "alice") == 2 and await store.count("s", "bob") == 1
        await memory.delete("m1")
        assert await store.get_entry("m1") is None
        await store.add(MemoryEntry(session_id="gone", user_id="carol", content="x"))
        await memory.clear("gone")
        assert await store.count("gone", "carol") == 0
        # issue 25 review: Definable's own entries are checked as ours, and purge forgets an entry wholly
        from flyteplugins_memory import InvalidArgument, UnsavedChanges
        for bad in (MemoryEntry(session_id=""), MemoryEntry(session_id="s", content=None),
                    MemoryEntry(session_id="s", message_data={"tags": {1}}), {"session_id": "s"}):
            try:
                await store.add(bad)
            except InvalidArgument:
                pass
            else:
                raise AssertionError(f"stored {bad!r}")
        await store.add(MemoryEntry(session_id="x", user_id="dora", content="forget me", memory_id="m9"))
        assert [r.path.split("/")[1] for r in await store.purge("m9", reason="asked")] == ["users", "ids"]
        assert await store.get_entry("m9") is None
        caller = store.store
        await caller.write_text.aio("mine.md", "unsaved")
        try:
            await store.add(MemoryEntry(session_id="x", content="y"))
        except UnsavedChanges:
            pass
        else:
            raise AssertionError("committed the caller's change")
        await caller.revert.aio()
        await memory.close()

    asyncio.run(main())
    print("ok")
    """
)


def _python312() -> str:
    """A working Python 3.12: $DEFINABLE_PYTHON, python3.12 on PATH, or a pyenv install (a pyenv shim
    on PATH may not run, so each candidate is tried)."""
    candidates = [os.environ.get("DEFINABLE_PYTHON"), shutil.which("python3.12")]
    candidates += sorted(str(p) for p in pathlib.Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))
    check = "import sys; assert sys.version_info[:2] == (3, 12)"
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", check], capture_output=True, check=False).returncode == 0:
            return candidate
    pytest.fail(
        "the Definable test needs Python 3.12 (definable>=0.8 requires it): put python3.12 on PATH, or set "
        "DEFINABLE_PYTHON to one (e.g. `pyenv install 3.12` or `uv python install 3.12`), and run again"
    )


def _definable_venv() -> pathlib.Path:
    """`.venv-definable/` with definable>=0.8 and this package (editable), made once and reused until
    pyproject.toml changes (as the Makefile's venvs: a new dependency of ours must reach it)."""
    python = VENV / "bin" / "python"
    ready = VENV / ".ready"
    made_for = (REPO / "pyproject.toml").stat().st_mtime_ns
    if not ready.exists() or ready.stat().st_mtime_ns < made_for:
        subprocess.run([_python312(), "-m", "venv", "--clear", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "definable>=0.8", "-e", str(REPO)], check=True, timeout=1200)
        ready.touch()
    return python


@pytest.mark.slow
def test_the_real_definable_memory_drives_the_adapter(local_backend, key):
    python = _definable_venv()
    config = {"raw": local_backend.raw_data_path, "key": key}
    run_python(str(python), REAL_SCRIPT, config)

    files = entry_files(local_backend, key)  # the 3.11 side reads what Definable stored
    assert sorted(n.split("/")[2] for n in files) == ["alice", "bob"]
    entries = {f["entry"]["memory_id"]: f["entry"] for f in files.values()}
    assert entries["m2"]["content"] == "b edited" and entries["m3"]["user_id"] == "bob"
    assert MemoryStore.open(key=key).log(limit=50)[0].actor == "definable"
    assert not [n for n, d in local_backend.objects(key).items() if b"forget me" in d or b"dora" in d]


async def test_reads_interleaved_with_adds_on_one_adapter_lose_nothing(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    adapter = await opened(key)

    async def one(i: int) -> None:
        await adapter.add(MemoryEntry(session_id="s", user_id="ada", content=str(i), memory_id=f"m{i}"))
        assert (await adapter.get_entry(f"m{i}")).content == str(i)
        await adapter.count("s", "ada")

    await asyncio.gather(*(one(i) for i in range(8)))
    assert sorted(e.content for e in await adapter.get_entries("s", "ada")) == [str(i) for i in range(8)]
    assert len([n for n in entry_files(backend, key) if "/sessions/" in n]) == 8


async def test_an_add_whose_save_fails_leaves_nothing_behind(local_backend, key, storage_faults):
    adapter = await opened(key)
    await adapter.add(MemoryEntry(session_id="s", memory_id="first", content="x"))
    storage_faults.arm(lambda n, op, path: "permanent" if op == "write" else None)
    with pytest.raises(StorageError):
        await adapter.add(MemoryEntry(session_id="s", memory_id="m", content="failed"))
    storage_faults.clear()
    assert await adapter.get_entry("m") is None and await adapter.count("s") == 1  # nothing staged
    await adapter.add(MemoryEntry(session_id="s", memory_id="other", content="next"))  # commits only itself
    assert MemoryStore.open(key=key).log(limit=1)[0].wrote == (
        "definable/ids/other.json",
        next(n for n in entry_files(local_backend, key) if n.endswith("-other.json")),
    )
    await adapter.add(MemoryEntry(session_id="s", memory_id="m", content="retried"))  # not a duplicate
    assert (await opened(key)).store.read_json("definable/ids/m.json")["memory_id"] == "m"


async def test_a_huge_int_time_is_an_invalid_argument(local_backend, key):
    adapter = await opened(key)
    for name in ("created_at", "updated_at"):
        with pytest.raises(InvalidArgument):  # not an OverflowError from the finiteness check
            await adapter.add(MemoryEntry(session_id="s", memory_id="m", **{name: 10**400}))
    assert entry_files(local_backend, key) == {}


async def test_async_with_initializes_on_entry_and_closes_on_exit(durable_backend, key):
    """`async with Store(...) as s:`, as Definable's built-in stores: initialize on entry, the store itself
    as the target, close on exit (a handle opened from the key is released, a given one is kept)."""
    async with DefinableMemoryStore(key) as adapter:
        assert isinstance(adapter, DefinableMemoryStore) and isinstance(adapter.store, MemoryStore)
        await adapter.add(MemoryEntry(session_id="s", memory_id="m1", content="inside", created_at=1.0))
    with pytest.raises(InvalidArgument, match="initialize"):
        adapter.store  # noqa: B018 - released on exit
    assert await adapter.count("s") == 1  # a later call opens the store again, as Definable's re-initialize
    stored = entry_files(durable_backend, key)
    assert [f["entry"]["content"] for f in stored.values()] == ["inside"]
    assert list(claim_files(durable_backend, key)) == ["definable/ids/m1.json"]

    given = await MemoryStore.get_or_create.aio(key=key)
    async with DefinableMemoryStore(given) as adapter:
        assert adapter.store is given
    assert adapter.store is given  # the caller's handle stays the caller's
    assert given.log(limit=5)[0].actor == "definable"


async def test_async_with_closes_and_reraises_when_the_block_fails(durable_backend, key):
    """An exception in the block is never suppressed; what the finished calls stored stays, one commit each."""
    with pytest.raises(RuntimeError, match="boom"):
        async with DefinableMemoryStore(key) as adapter:
            await adapter.add(MemoryEntry(session_id="s", memory_id="kept", content="done", created_at=1.0))
            await adapter.store.write_text.aio("definable/stray.txt", "unsaved")  # a direct write: saved on close
            raise RuntimeError("boom")
    reopened = await MemoryStore.open.aio(key=key)
    assert reopened.read_text("definable/stray.txt") == "unsaved"
    assert {n.rsplit("-", 1)[-1] for n in entry_files(durable_backend, key)} == {"kept.json"}
    assert "definable/stray.txt" in durable_backend.objects(key)
    async with DefinableMemoryStore(key) as again:
        assert [e.memory_id for e in await again.get_entries("s")] == ["kept"]


async def test_closing_over_a_callers_handle_leaves_the_callers_unsaved_changes_alone(durable_backend, key):
    """Found by review: ``close`` saved the caller's own unsaved write under the adapter's actor."""
    handle = await MemoryStore.get_or_create.aio(key=key)
    await handle.write_text.aio("mine/draft.md", "my half-done edit")
    async with DefinableMemoryStore(handle):
        pass
    assert handle.has_unsaved_changes()
    fresh = await MemoryStore.open.aio(key=key)
    assert not await fresh.exists.aio("mine/draft.md")
    assert all(c.actor != "definable" for c in await fresh.log.aio())


# -- a handle the caller gave (docs/decisions/0138), purge, bad input --------------------------------------------


DEFINABLE_READS = {
    "count": lambda d: d.count("s"),
    "get_entries": lambda d: d.get_entries("s"),
    "get_entry": lambda d: d.get_entry("m"),
}


@pytest.mark.parametrize("read", list(DEFINABLE_READS))
async def test_a_read_over_a_callers_handle_keeps_its_unsaved_edit(durable_backend, key, read):
    """Found by review (d2.py): the adapter's refresh before a read dropped the caller's conflicting edit,
    and the caller's save then succeeded with nothing instead of raising ConcurrencyError."""
    caller = await caller_with_a_conflicting_edit(key)
    await DEFINABLE_READS[read](DefinableMemoryStore(caller))
    assert caller.has_unsaved_changes()
    assert await caller.read_text.aio("notes/plan.md") == "caller's unsaved v2"
    with pytest.raises(ConcurrencyError):
        await caller.save.aio()  # as without the adapter
    assert durable_backend.objects(key)["notes/plan.md"] == b"other's v2"


async def test_reads_over_a_clean_handle_still_see_other_tasks(durable_backend, key):
    handle = await MemoryStore.get_or_create.aio(key=key)
    adapter = DefinableMemoryStore(handle)
    assert await adapter.count("s") == 0
    await (await opened(key)).add(MemoryEntry(session_id="s", memory_id="m", content="from elsewhere"))
    assert [e.content for e in await adapter.get_entries("s")] == ["from elsewhere"]


DEFINABLE_WRITES = {
    "add": lambda d: d.add(MemoryEntry(session_id="s", memory_id="new", content="adapter's")),
    "update": lambda d: d.update(MemoryEntry(session_id="s", memory_id="m", content="changed")),
    "delete": lambda d: d.delete("m"),
    "delete_session": lambda d: d.delete_session("s"),
    "purge": lambda d: d.purge("m"),
}


@pytest.mark.parametrize("write", list(DEFINABLE_WRITES))
async def test_a_write_over_a_callers_handle_with_unsaved_changes_is_refused(durable_backend, key, write):
    """Found by review (cd1.py, cd1def.py): the adapter's save committed the caller's unrelated unsaved edit
    under the adapter's name. Now `UnsavedChanges` before anything is staged; the change stays the caller's."""
    await (await opened(key)).add(MemoryEntry(session_id="s", memory_id="m", content="seed"))
    caller = await MemoryStore.get_or_create.aio(key=key)
    await caller.write_text.aio("mine/draft.md", "half-done", actor="alice")
    objects, journal = durable_backend.objects(key), durable_backend.journal(key)

    async with DefinableMemoryStore(caller) as adapter:
        with pytest.raises(UnsavedChanges, match=r"save\(\) or revert\(\) them first.*the key"):
            await DEFINABLE_WRITES[write](adapter)
    assert durable_backend.objects(key) == objects and durable_backend.journal(key) == journal
    assert caller.has_unsaved_changes() and await caller.read_text.aio("mine/draft.md") == "half-done"
    assert not await caller.exists.aio("definable/ids/new.json")
    await caller.save.aio(actor="alice")
    newest = (await (await MemoryStore.open.aio(key=key)).log.aio(limit=1))[0]
    assert newest.actor == "alice" and list(newest.wrote) == ["mine/draft.md"]
    assert [e.content for e in await (await opened(key)).get_entries("s")] == ["seed"]


async def test_reads_see_a_purge_and_a_delete_store_by_another_handle(durable_backend, key):
    adapter = await opened(key)
    await adapter.add(MemoryEntry(session_id="s", memory_id="p1", content="my password is Zebra42"))
    security = await MemoryStore.get_or_create.aio(key=key)
    path = (await security.list_paths.aio("definable/users", where={"memory_id": "p1"}))[0]
    await security.purge.aio(path, actor="security", reason="leak")
    assert await adapter.get_entry("p1") is None and await adapter.get_entries("s") == []
    await MemoryStore.delete_store.aio(key=key, actor="admin", reason="offboarding")
    with pytest.raises(StoreDeleted):
        await adapter.get_entries("s")


async def test_purge_forgets_an_entry_and_its_claim(durable_backend, key):
    """Found by review (pc1.py): ``store.purge(path)`` of an entry left its id's claim, which names the id
    and the entry's path (user, session). `purge(memory_id)` purges both; also a claim left over that way."""
    adapter = await opened(key)
    carol = MemoryEntry(session_id="divorce-case", memory_id="note-carol-1", user_id="carol", content="secret-4711")
    await adapter.add(carol)
    await adapter.update(dataclasses.replace(carol, content="secret-4711 v2"))  # two versions of the entry
    dave = MemoryEntry(session_id="cardiology", memory_id="note-dave-1", user_id="dave", content="secret-0815")
    await adapter.add(dave)
    await adapter.add(MemoryEntry(session_id="s", memory_id="keep", content="unrelated"))
    handle = await MemoryStore.get_or_create.aio(key=key)
    dave_path = (await handle.list_paths.aio("definable/users", where={"memory_id": "note-dave-1"}))[0]
    await handle.purge.aio(dave_path, actor="sec")  # the entry alone: its claim stays (documented)
    assert "definable/ids/note-dave-1.json" in durable_backend.objects(key)

    purged = await adapter.purge("note-carol-1", actor="sec", reason="erase carol")
    assert [r.path.split("/", 2)[1] for r in purged] == ["users", "ids"]
    assert [r.path for r in await adapter.purge("note-dave-1", actor="sec")] == [
        dave_path,
        "definable/ids/note-dave-1.json",
    ]
    secrets = [b"secret-4711", b"note-carol-1", b"carol", b"divorce-case", b"secret-0815", b"note-dave-1", b"dave"]
    secrets.append(b"cardiology")
    assert scan(durable_backend, key, secrets) == {}
    journal = durable_backend.journal(key)
    assert not [n for n, d in journal.items() if b"secret-4711" in d or b"secret-0815" in d]
    fresh = await opened(key)
    assert await fresh.get_entry("note-carol-1") is None and await fresh.get_entries("divorce-case", "carol") == []
    assert [e.memory_id for e in await fresh.get_entries("s")] == ["keep"]
    assert await adapter.purge("note-carol-1") == []  # nothing left to forget
    audit = [c for c in await (await MemoryStore.open.aio(key=key)).log.aio(limit=4) if c.reason == "erase carol"]
    assert len(audit) == 2 and {c.actor for c in audit} == {"sec"}


BAD_ENTRIES = {
    "not an entry": object(),
    "a dict": {"session_id": "s"},
    "a class": MemoryEntry,
    "content None": MemoryEntry(session_id="s", content=None),  # type: ignore[arg-type]
    "role None": MemoryEntry(session_id="s", role=None),  # type: ignore[arg-type]
    "session_id ''": MemoryEntry(session_id=""),
    "user_id ''": MemoryEntry(session_id="s", user_id=""),
    "memory_id int": MemoryEntry(session_id="s", memory_id=5),  # type: ignore[arg-type]
    "message_data a set": MemoryEntry(session_id="s", message_data={1, 2}),  # type: ignore[arg-type]
    "message_data a list": MemoryEntry(session_id="s", message_data=[1]),  # type: ignore[arg-type]
    "a set inside message_data": MemoryEntry(session_id="s", message_data={"tags": {1, 2}}),
    "NaN inside message_data": MemoryEntry(session_id="s", message_data={"x": float("nan")}),
}


@pytest.mark.parametrize("bad", list(BAD_ENTRIES))
async def test_bad_entries_are_typed_errors(local_backend, key, bad):
    """Found by review (b1.py): objects and dicts raised AttributeError, None content or role and an empty
    session were stored, a set in message_data was stringified. All `InvalidArgument`, nothing written."""
    adapter = await opened(key)
    for call in (adapter.add, adapter.update):
        with pytest.raises(InvalidArgument, match="an entry"):
            await call(BAD_ENTRIES[bad])
    assert not adapter.store.has_unsaved_changes()
    assert not [n for n in local_backend.objects(key) if n.startswith("definable/")]


BAD_CALLS = {
    "get_entries(123)": lambda d: d.get_entries(123),
    "get_entries('')": lambda d: d.get_entries(""),
    "get_entries(user_id=None)": lambda d: d.get_entries("s", None),
    "get_entries(limit='x')": lambda d: d.get_entries("s", limit="x"),
    "get_entries(limit=-1)": lambda d: d.get_entries("s", limit=-1),
    "get_entries(limit=True)": lambda d: d.get_entries("s", limit=True),
    "get_entry(None)": lambda d: d.get_entry(None),
    "count(None)": lambda d: d.count(None),
    "delete(None)": lambda d: d.delete(None),
    "delete('')": lambda d: d.delete(""),
    "delete_session(None)": lambda d: d.delete_session(None),
    "delete_session('s', user_id=5)": lambda d: d.delete_session("s", 5),
    "purge(None)": lambda d: d.purge(None),
}


@pytest.mark.parametrize("call", list(BAD_CALLS))
async def test_bad_arguments_are_typed_errors(local_backend, key, call):
    adapter = await opened(key)
    await adapter.add(MemoryEntry(session_id="s", memory_id="m"))
    log = await adapter.store.log.aio()
    with pytest.raises(InvalidArgument) as raised:
        await BAD_CALLS[call](adapter)
    assert "where[" not in str(raised.value)  # not the store's internals (delete_session(None) was)
    assert await adapter.store.log.aio() == log and await adapter.count("s") == 1


BAD_PREFIXES = ["", "/", "../x", "a/../../x", "/abs", "meta", "audit/x", "x\x00y", "x\ud800", 3, None]


@pytest.mark.parametrize("prefix", BAD_PREFIXES)
def test_a_bad_prefix_is_refused_when_the_adapter_is_made(key, prefix):
    """Found by review (b1.py): ``prefix="../x"`` was accepted until the first write, ``""`` failed with an
    InvalidPath about an absolute entry path."""
    with pytest.raises(InvalidArgument, match="prefix"):
        DefinableMemoryStore(key, prefix=prefix)  # type: ignore[arg-type]


async def test_a_nested_prefix_is_kept_normalized(local_backend, key):
    adapter = await opened(key, prefix="agents//definable/")
    await adapter.add(MemoryEntry(session_id="s", memory_id="m"))
    assert adapter.prefix == "agents/definable"
    assert "agents/definable/ids/m.json" in local_backend.objects(key)
    assert [e.memory_id for e in await (await opened(key, prefix="agents/definable")).get_entries("s")] == ["m"]
