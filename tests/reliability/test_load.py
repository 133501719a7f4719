"""Load on a moto S3 server on loopback: 16 processes saving one key, and 16 processes on 16 keys.

Each process is a busy agent (see ``workers.load``): per save one new file, every third save a delete,
one message, and every fifth save a write to a file all of them share (a real conflict, redone after
``refresh``). Afterwards every file, deletion, message and audit event must be exactly where it belongs.
`make test` runs 5 saves per process; FLYTEPLUGINS_MEMORY_STRESS=1 runs the issue's 50. With
FLYTEPLUGINS_MEMORY_REPORT_DIR set, the figures are written there as JSON (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import time

import pytest

from flyteplugins_memory import MemoryStore
from reports import report
from workers import child

PROCESSES = 16
SAVES = 50 if os.environ.get("FLYTEPLUGINS_MEMORY_STRESS") else 5


def run_load(backend, endpoint: str, tmp_path: pathlib.Path, keys: list[str]) -> dict:
    go, ready = tmp_path / "go", tmp_path / "ready"
    procs = [
        child(
            "load",
            {
                "raw": backend.raw_data_path,
                "endpoint": endpoint,
                "key": keys[w % len(keys)],
                "worker": w,
                "saves": SAVES,
                "go": str(go),
                "ready": str(ready),
            },
        )
        for w in range(PROCESSES)
    ]
    deadline = time.time() + 240
    while sum(pathlib.Path(f"{ready}.{w}").exists() for w in range(PROCESSES)) < PROCESSES:
        assert time.time() < deadline and all(p.poll() is None for p in procs), "a worker died while starting"
        time.sleep(0.05)
    started = time.time()
    go.touch()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = time.time() - started
    latencies = sorted(x for r in reports for x in r["latencies"])
    return {
        "processes": PROCESSES,
        "keys": len(keys),
        "saves": PROCESSES * SAVES,
        "seconds": round(elapsed, 2),
        "saves_per_second": round(PROCESSES * SAVES / elapsed, 1),
        "save_p50_ms": round(1000 * statistics.median(latencies)),
        "save_p95_ms": round(1000 * latencies[int(0.95 * (len(latencies) - 1))]),
        "commit_attempts": sum(r["commits"] for r in reports),
        "rebased_after_losing_a_race": sum(r["lost"] for r in reports),
        "conflicts_refreshed_and_redone": sum(r["conflicts"] for r in reports),
        "events": [r["events"] for r in reports],
    }


def losses(key: str, workers: list[int], events_expected: int) -> dict[str, list]:
    """Everything that should be in the store of `key` after `workers` finished, and is not."""
    store = MemoryStore.get_or_create(key=key)
    files = set(store.list_paths())
    lost: dict[str, list] = {"files": [], "resurrected": [], "messages": [], "order": [], "events": []}
    for w in workers:
        deleted = {r - 2 for r in range(SAVES) if r % 3 == 2}
        for r in range(SAVES):
            path = f"w{w}/f{r}.txt"
            if r in deleted:
                if path in files:
                    lost["resurrected"].append(path)
            elif path not in files or store.read_text(path) != f"{w}:{r}":
                lost["files"].append(path)
        mine = [m["content"] for m in store.messages if m["content"].split(":")[0] == str(w)]
        if sorted(mine) != sorted(f"{w}:{r}" for r in range(SAVES)):
            lost["messages"].append(w)
        elif mine != [f"{w}:{r}" for r in range(SAVES)]:
            lost["order"].append(w)
    if SAVES >= 5 and store.read_text("shared/last.txt").split(":")[0] not in {str(w) for w in workers}:
        lost["files"].append("shared/last.txt")
    audited = len(store.audit_tail(0))
    if audited != events_expected:
        lost["events"].append(f"{audited} audited, {events_expected} committed")
    return {kind: items for kind, items in lost.items() if items}


@pytest.mark.timeout(1200)
def test_sixteen_processes_saving_one_key_lose_nothing(s3_backend, moto_endpoint, key, tmp_path):
    MemoryStore.create(key=key)
    figures = run_load(s3_backend, moto_endpoint, tmp_path, [key])
    figures["lost"] = losses(key, list(range(PROCESSES)), sum(figures.pop("events")))
    report("load_one_key", figures)
    assert figures["lost"] == {}
    # every save committed exactly once; every other attempt lost a race and was rebased
    assert figures["commit_attempts"] - figures["rebased_after_losing_a_race"] == figures["saves"]


@pytest.mark.timeout(1200)
def test_sixteen_processes_on_sixteen_keys_lose_nothing(s3_backend, moto_endpoint, key, tmp_path):
    keys = [f"{key}-{k}" for k in range(PROCESSES)]
    figures = run_load(s3_backend, moto_endpoint, tmp_path, keys)
    events = figures.pop("events")
    figures["lost"] = {k: lost for w, k in enumerate(keys) if (lost := losses(k, [w], events[w]))}
    report("load_sixteen_keys", figures)
    assert figures["lost"] == {}
    assert figures["rebased_after_losing_a_race"] == 0  # nobody shares a key, so nobody races
