"""Separate processes saving one key lose nothing, and a save killed at any point leaves a whole state."""

from __future__ import annotations

import json

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import MemoryStore
from reports import report
from workers import child


def test_eight_processes_saving_one_key_lose_nothing(durable_backend_and_endpoint, key, tmp_path):
    backend, endpoint = durable_backend_and_endpoint
    MemoryStore.create(key=key)
    go = tmp_path / "go"
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "rounds": 5, "go": str(go)}
    procs = [child("race", {**config, "worker": w}) for w in range(8)]
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]

    store = MemoryStore.get_or_create(key=key)
    expected = {f"w{w}/r{r}.txt" for w in range(8) for r in range(5)}
    assert set(store.list_paths()) == expected
    assert all(store.read_text(p) == f"{p[1]}:{p[4]}" for p in expected)
    assert sorted(m["content"] for m in store.messages) == sorted(f"{w}:{r}" for w in range(8) for r in range(5))
    for w in range(8):  # each worker's messages stay in its own order
        assert [m["content"] for m in store.messages if m["content"].startswith(f"{w}:")] == [
            f"{w}:{r}" for r in range(5)
        ]
    events = store.audit_tail(0)
    assert sorted(e["path"] for e in events) == sorted(expected)
    stored = json.loads(backend.upstream_view(key)["messages.json"])
    assert len(stored) == 40


def _snapshot(store: MemoryStore) -> tuple:
    files = {p: store.read_text(p) for p in store.list_paths()}
    return files, [m["content"] for m in store.messages]


@pytest.mark.parametrize("scenario", ["plain", "checkpointing", "imported"])
def test_a_save_killed_at_any_storage_call_leaves_old_or_new(durable_backend_and_endpoint, key, scenario):
    backend, endpoint = durable_backend_and_endpoint
    old = ({"a.txt": "old a", "b.txt": "old b", "c.txt": "old c"}, ["old"])
    new = ({"a.txt": "new a", "c.txt": "old c", "d.txt": "new d"}, ["old", "new"])
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "scenario": scenario}

    def prepare(name: str) -> None:
        store = UpstreamStore.get_or_create(key=name) if scenario == "imported" else MemoryStore.create(key=name)
        for path, text in old[0].items():
            store.write_text(path, text)
        store.append({"role": "user", "content": "old"})
        store.save()

    prepare(f"{key}-probe")
    probe = child("crash", {**config, "key": f"{key}-probe", "k": 0})
    out, err = probe.communicate(timeout=120)
    assert probe.returncode == 0, err[-3000:]
    total = json.loads(out)["calls"]
    assert total >= 6

    outcomes = []
    for k in range(1, total + 1):
        name = f"{key}-k{k}"
        prepare(name)
        proc = child("crash", {**config, "key": name, "k": k})
        proc.communicate(timeout=120)
        assert proc.returncode == 17
        state = _snapshot(MemoryStore.get_or_create(key=name))
        assert state in (old, new), (k, state)
        outcomes.append(state == new)
        after = MemoryStore.get_or_create(key=name)
        after.write_text("e.txt", "after crash")
        after.save()
        reopened = MemoryStore.get_or_create(key=name)
        assert _snapshot(reopened) == ({**state[0], "e.txt": "after crash"}, state[1])
        audited = [(e["op"], e["path"]) for e in reopened.audit_tail(0)]
        saved = [("update", "a.txt"), ("create", "d.txt"), ("delete", "b.txt")] if state == new else []
        assert audited[:3] == [("create", "a.txt"), ("create", "b.txt"), ("create", "c.txt")], (k, audited)
        assert sorted(audited[3:]) == sorted([*saved, ("create", "e.txt")]), (k, audited)  # each event once
    assert outcomes[0] is False and outcomes[-1] is True  # the commit point lies in between
    report(
        f"crash_{backend.name}_{scenario}", {"kill_points": total, "old": outcomes.count(False), "new": sum(outcomes)}
    )
