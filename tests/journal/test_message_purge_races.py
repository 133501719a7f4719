"""A message purge racing other handles (issue 23, defect 13; the lead's notes of the last session): the
purged text comes back in no stored object, whatever another handle's save writes meanwhile, and that
save's acknowledged changes stay. The interleavings are made deterministic by running the purge inside a
hook of the other save; every check scans every object under the storage root (local disk, moto S3)."""

from __future__ import annotations

import json

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._journal import commit as _commit
from helpers import holding
from repo import SUPPORT

SECRET = "race-pasted-key-5b0e"


def _pasted(key: str) -> MemoryStore:
    store = MemoryStore.get_or_create(key=key)
    store.append({"role": "user", "content": f"my key {SECRET}"})
    store.append({"role": "user", "content": "ok"})
    store.save()
    return store


def _purge_before_the_checkpoint(monkeypatch, key: str) -> list[int]:
    """Every save checkpoints; the first checkpoint a save writes waits for a whole `purge_message(0)` of
    another handle, made between that save's commit and its checkpoint."""
    real = _commit.checkpoint
    ran: list[int] = []

    async def purge_first(remote, state):
        if not ran:
            ran.append(state.seq)
            purger = await MemoryStore.open.aio(key=key)
            await purger.purge_message.aio(0, actor="sec", reason="pasted a key")
        return await real(remote, state)

    monkeypatch.setattr(_commit, "checkpoint", purge_first)
    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 1)
    return ran


def test_a_purge_between_a_saves_commit_and_its_checkpoint_leaves_no_copy(durable_backend, key, monkeypatch):
    _pasted(key)
    other = MemoryStore.open(key=key)  # holds the pasted message in its state
    other.write_text("notes.md", "acknowledged")
    ran = _purge_before_the_checkpoint(monkeypatch, key)
    other.save()

    assert ran and holding(durable_backend, SECRET) == []
    fresh = MemoryStore.open(key=key)
    assert fresh.read_text("notes.md") == "acknowledged"
    assert [m["content"] for m in fresh.messages] == ["[redacted]", "ok"]
    other.append({"role": "user", "content": "next"})
    other.write_text("more.md", "more")
    other.save()  # on the purge's commit: its next checkpoint holds the redacted transcript
    assert holding(durable_backend, SECRET) == []
    fresh = MemoryStore.open(key=key)
    assert [m["content"] for m in fresh.messages] == ["[redacted]", "ok", "next"]
    assert fresh.read_text("notes.md") == "acknowledged" and fresh.read_text("more.md") == "more"


def test_a_stale_save_after_a_purge_checkpoints_no_purged_text(durable_backend, key, monkeypatch):
    _pasted(key)
    stale = MemoryStore.open(key=key)
    stale.list_paths()
    MemoryStore.open(key=key).purge_message(0)
    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 1)
    stale.append({"role": "user", "content": "from the stale handle"})
    stale.write_text("stale.md", "acknowledged")
    stale.save()  # loses its slot to the purge, rebases onto it, commits and checkpoints

    assert holding(durable_backend, SECRET) == []
    fresh = MemoryStore.open(key=key)
    assert [m["content"] for m in fresh.messages] == ["[redacted]", "ok", "from the stale handle"]
    assert fresh.read_text("stale.md") == "acknowledged"


CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
from workers import setup
config = json.loads(sys.argv[1])
setup(config)
from flyteplugins_memory import MemoryStore
store = MemoryStore.open(key=config["key"])
if config.get("path"):
    store.purge(config["path"], actor="other process")
else:
    store.purge_message(config["index"], actor="other process")
"""


def test_two_purges_in_different_processes_keep_each_others_rewrites(durable_backend_and_endpoint, key, monkeypatch):
    """A purge's rewrite pass reads the journal's records and checkpoints, then writes back those holding
    its message. Another process's purge (its own loop: `_journal.redact.rewriting` does not serialize it) that runs
    all its passes in between is written over; the first pass sees that purge committed meanwhile and
    reads again, redacting its message too (the purge's audit event names it by hash: `purge_ledger`)."""
    import asyncio
    import subprocess
    import sys

    from flyteplugins_memory._journal import redact as _redact

    backend, endpoint = durable_backend_and_endpoint
    store = MemoryStore.get_or_create(key=key)
    store.messages += [{"role": "user", "content": f"first {SECRET}"}, {"role": "user", "content": "second-key-c4d1"}]
    store.append({"role": "user", "content": "ok"})
    store.save()
    store.compact()  # both in a checkpoint and the record before it
    config = {"key": key, "index": 1, "raw": backend.raw_data_path, "endpoint": endpoint}
    child = CHILD.format(tests=str(SUPPORT))
    real = _redact.read_all
    ran: list[bool] = []

    async def the_other_purge_in_between(journal, names):
        read = await real(journal, names)
        if not ran and any("/checkpoints/" in n for n in names):
            ran.append(True)  # this pass waits: the other process runs every pass of its purge now
            command = [sys.executable, "-c", child, json.dumps(config)]
            done = await asyncio.to_thread(subprocess.run, command, check=False, capture_output=True, timeout=120)
            assert done.returncode == 0, done.stderr[-3000:]
        return read

    monkeypatch.setattr(_redact, "read_all", the_other_purge_in_between)
    store.purge_message(0, actor="sec")

    assert ran and holding(backend, SECRET) == [] and holding(backend, "second-key-c4d1") == []
    assert [m["content"] for m in MemoryStore.open(key=key).messages] == ["[redacted]", "[redacted]", "ok"]
    actors = [e["actor"] for e in MemoryStore.open(key=key).audit_tail(5) if e["op"] == "purge"]
    assert sorted(actors) == ["other process", "sec"]


def test_a_path_purge_in_another_process_keeps_its_rewrite_under_a_message_purge(
    durable_backend_and_endpoint, key, monkeypatch
):
    """As above, the other process purging a path (its labels inline in the record and checkpoint the
    message purge rewrites): the pass reads again and redacts the path's entries too (`purge_ledger`)."""
    import asyncio
    import subprocess
    import sys

    from flyteplugins_memory._journal import redact as _redact

    backend, endpoint = durable_backend_and_endpoint
    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes/ssn.md", "ssn text", metadata={"ssn": "label-078-05-1120"})
    store.messages += [{"role": "user", "content": f"first {SECRET}"}, {"role": "user", "content": "ok"}]
    store.save()
    store.compact()
    config = {"key": key, "path": "notes/ssn.md", "raw": backend.raw_data_path, "endpoint": endpoint}
    child = CHILD.format(tests=str(SUPPORT))
    real = _redact.read_all
    ran: list[bool] = []

    async def the_other_purge_in_between(journal, names):
        read = await real(journal, names)
        if not ran and any("/checkpoints/" in n for n in names):
            ran.append(True)
            command = [sys.executable, "-c", child, json.dumps(config)]
            done = await asyncio.to_thread(subprocess.run, command, check=False, capture_output=True, timeout=120)
            assert done.returncode == 0, done.stderr[-3000:]
        return read

    monkeypatch.setattr(_redact, "read_all", the_other_purge_in_between)
    store.purge_message(0, actor="sec")

    assert ran and holding(backend, SECRET) == []
    assert holding(backend, "label-078-05-1120") == [] and holding(backend, "ssn text") == []
    fresh = MemoryStore.open(key=key)
    assert not fresh.exists("notes/ssn.md") and [m["content"] for m in fresh.messages] == ["[redacted]", "ok"]
