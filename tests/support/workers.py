"""Child-process programs for the multi-process and crash tests (run as ``python tests/support/workers.py ...``).

Each child configures Flyte like a task would (org/project/domain, S3 endpoint) and binds the raw-data
path, then works on one key; the parent checks what landed in storage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def setup(config: dict) -> None:
    import flyte
    import flyte.storage
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath

    storage = None
    if config.get("endpoint"):
        storage = flyte.storage.S3(
            endpoint=config["endpoint"], access_key_id="testing", secret_access_key="testing", region="us-east-1"
        )
    flyte.init(org="acme", project="research", domain="development", storage=storage)
    internal_ctx().new_raw_data_path(RawDataPath(path=config["raw"])).__enter__()


def race(config: dict) -> None:
    """Wait for the start signal, then save `rounds` times: one new file and one message each."""
    from flyteplugins_memory import MemoryStore

    while not os.path.exists(config["go"]):
        time.sleep(0.01)
    me = config["worker"]
    for round_ in range(config["rounds"]):
        store = MemoryStore.get_or_create(key=config["key"])
        store.write_text(f"w{me}/r{round_}.txt", f"{me}:{round_}", actor=f"w{me}")
        store.append({"role": "user", "content": f"{me}:{round_}"})
        store.save()


def append_records(config: dict) -> None:
    """Wait for the start signal, then save `rounds` times, appending `per_round` records to one log each
    time (a new handle each round, as separate tasks would)."""
    from flyteplugins_memory import MemoryStore

    while not os.path.exists(config["go"]):
        time.sleep(0.01)
    me = config["worker"]
    for round_ in range(config["rounds"]):
        store = MemoryStore.get_or_create(key=config["key"])
        store.records(config["log"]).extend({"w": me, "r": round_, "i": i} for i in range(config["per_round"]))
        store.save()


def accept_proposal(config: dict) -> None:
    """Open the store, wait for the start signal, accept proposal `id`; print the outcome as one JSON line
    (the error's class name, or "" for the winner)."""
    from flyteplugins_memory import MemoryStore, MemoryStoreError

    store = MemoryStore.get_or_create(key=config["key"])
    store.proposals()  # loaded before the race starts
    while not os.path.exists(config["go"]):
        time.sleep(0.01)
    try:
        store.accept(config["id"], actor=f"w{config['worker']}")
        outcome = ""
    except MemoryStoreError as exc:
        outcome = type(exc).__name__
    print(json.dumps({"error": outcome}), flush=True)


def crash(config: dict) -> None:
    """Save a change that writes, deletes and appends; exit abruptly before storage call number `k`.

    Scenario "checkpointing" also keeps versions and checkpoints in that save (audit segment, upstream's
    audit log, checkpoint, head); "imported" saves a store upstream wrote, for the first time.
    """
    from flyteplugins_memory import MemoryStore
    from flyteplugins_memory._journal import commit as _commit
    from flyteplugins_memory.storage._fsspec import FsspecStorage

    checkpointing = config.get("scenario") == "checkpointing"
    if checkpointing:
        _commit.CHECKPOINT_COMMITS = 1
    store = MemoryStore.get_or_create(key=config["key"], keep_versions=checkpointing)
    store.write_text("a.txt", "new a")
    store.write_text("d.txt", "new d")
    store.delete("b.txt")
    store.append({"role": "user", "content": "new"})
    calls = 0
    original = FsspecStorage._call

    async def counted(self, fn, *args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == config["k"]:
            os._exit(17)
        return await original(self, fn, *args, **kwargs)

    FsspecStorage._call = counted
    store.save()
    print(json.dumps({"calls": calls}))


def load(config: dict) -> None:
    """A busy agent: one handle, `saves` saves each writing a file, deleting an older one every third
    round, appending a message and, every fifth round, rewriting a file all workers share (redone after
    refresh when it conflicts). Prints what it committed and how often it had to retry."""
    from flyteplugins_memory import ConcurrencyError, MemoryStore
    from flyteplugins_memory._journal.journal_storage import JournalStorage
    from flyteplugins_memory._rules.layout import JOURNAL_DIR

    attempts = {"commits": 0, "lost": 0}
    original = JournalStorage.create_exclusive

    async def counted(self, name, data):
        created = await original(self, name, data)
        if name.startswith(f"{JOURNAL_DIR}/log/"):
            attempts["commits"] += 1
            attempts["lost"] += not created
        return created

    JournalStorage.create_exclusive = counted
    me, shared = config["worker"], "shared/last.txt"
    store = MemoryStore.get_or_create(key=config["key"])
    open(config["ready"] + f".{me}", "w").close()
    while not os.path.exists(config["go"]):
        time.sleep(0.01)
    started, events, conflicts, latencies = time.time(), 0, 0, []
    for round_ in range(config["saves"]):
        began = time.time()
        store.write_text(f"w{me}/f{round_}.txt", f"{me}:{round_}", actor=f"w{me}")
        events += 1
        if round_ % 3 == 2:
            store.delete(f"w{me}/f{round_ - 2}.txt", actor=f"w{me}")
            events += 1
        store.append({"role": "user", "content": f"{me}:{round_}"})
        if round_ % 5 == 4:
            store.write_text(shared, f"{me}:{round_}", actor=f"w{me}")
        for _ in range(100):
            try:
                store.save()
                break
            except ConcurrencyError:
                conflicts += 1
                store.refresh()  # drops our shared write; redo it on the newest state
                store.write_text(shared, f"{me}:{round_}", actor=f"w{me}")
        else:
            raise RuntimeError("could not save the shared file in 100 tries")
        events += round_ % 5 == 4
        latencies.append(time.time() - began)
    print(
        json.dumps(
            {
                "seconds": time.time() - started,
                "events": events,
                "conflicts": conflicts,
                "latencies": latencies,
                **attempts,
            }
        )
    )


def child(command: str, config: dict, **kwargs) -> subprocess.Popen:
    """Start `command` of this file in a child process (the parent's side; its output is piped, as text)."""
    return subprocess.Popen(
        [sys.executable, __file__, command, json.dumps(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


if __name__ == "__main__":
    command, raw_config = sys.argv[1], json.loads(sys.argv[2])
    setup(raw_config)
    {
        "race": race,
        "append_records": append_records,
        "accept_proposal": accept_proposal,
        "crash": crash,
        "load": load,
    }[command](raw_config)
