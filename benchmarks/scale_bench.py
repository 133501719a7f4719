"""A 100,000-file store of ours on the counting moto server: open, first lookup, one-file saves, and the
checkpoint bytes they cost, amortized. Upstream is left out: it makes one request per object on open and
on save (about 200,000 each at this size, hours on moto).

Seeding 100,000 files through saves would take about 20 minutes on moto, so the store is built in-process
with our own code: ``create`` (commit 1), then commit 2 adding 100,000 files of one 1 KiB content (one
blob, content-addressed: every file's bytes are really there) as a real commit record, folded at once
into a checkpoint by the same function saves use (`_journal.commit.checkpoint`: parts, checkpoint, head). Upstream's
layout (files at their own paths, sidecars) is not written for commit 2; no measured operation reads it.

Run (through sync_bench): python benchmarks/sync_bench.py --scale 100000 [--scale-saves 300]
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Callable

PAYLOAD = b"x" * 1024


def seed(key: str, files: int) -> None:
    """The store of `key`: commit 1 (create), commit 2 (`files` files), checkpoint 2."""
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.create(key=key)
    store.append({"role": "user", "content": "hello"})
    store.save()
    asyncio.run(_commit_files(store.remote_path or "", files))


async def _commit_files(remote_path: str, files: int) -> None:
    from flyteplugins_memory._journal.commit import checkpoint
    from flyteplugins_memory._journal.journal_storage import JournalStorage
    from flyteplugins_memory._journal.opening import latest_state
    from flyteplugins_memory._rules.journal_objects import FileEntry, encode
    from flyteplugins_memory._rules.layout import blob_name, log_name
    from flyteplugins_memory._rules.merge import Changes, rebase

    remote = JournalStorage.at(remote_path)
    base = await latest_state(remote)
    assert base is not None
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    entry = FileEntry(sha256=sha, bytes=len(PAYLOAD), updated_at="2026-01-01T00:00:00Z", updated_by="seed")
    changes = Changes(files={f"files/{i:06d}.txt": entry for i in range(files)})
    await remote.write_many({blob_name(sha): PAYLOAD})
    state = rebase(base, base, changes, base.messages, uuid.uuid4().hex)
    assert await remote.create_exclusive(log_name(state.seq), encode(state.record()))
    await checkpoint(remote, state)


class CheckpointBytes:
    """Counts bytes written into checkpoint objects and index parts (a wrapper around `write_many`)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.objects = 0

    def __enter__(self) -> CheckpointBytes:
        from flyteplugins_memory._journal.journal_storage import JournalStorage

        self._original = original = JournalStorage.write_many
        counter = self

        async def counted(store, objects: dict[str, bytes]) -> None:
            for name, data in objects.items():
                if "/checkpoints/" in name or "/parts/" in name:
                    counter.bytes += len(data)
                    counter.objects += 1
            await original(store, objects)

        JournalStorage.write_many = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from flyteplugins_memory._journal.journal_storage import JournalStorage

        JournalStorage.write_many = self._original  # type: ignore[method-assign]


def run(server, measured: Callable, files: int, saves: int) -> dict:
    """Seed, then measure; returns the figures `table` prints."""
    from flyteplugins_memory import MemoryStore

    key = f"scale-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    seed(key, files)
    seeded = time.perf_counter() - start
    opened, store = measured(server, lambda: MemoryStore.get_or_create(key=key))
    assert len(store.messages) == 1
    looked, found = measured(server, lambda: store.exists(f"files/{files // 2:06d}.txt"))
    assert found
    fresh = MemoryStore.get_or_create(key=key)

    def one_file_save() -> None:
        fresh.write_text("notes/first.txt", "one new file")
        fresh.append({"role": "assistant", "content": "saved one file"})
        fresh.save()

    saved, _ = measured(server, one_file_save)
    with CheckpointBytes() as written:
        for i in range(saves):  # new files spread over the whole index: the costly case for parts
            handle = MemoryStore.get_or_create(key=key)
            handle.write_text(f"files/{(i * 7919) % files:06d}-new.txt", "new")
            handle.save()
    with CheckpointBytes() as clustered:
        for i in range(saves):  # new files in one directory, in name order: writes that land in one part
            handle = MemoryStore.get_or_create(key=key)
            handle.write_text(f"notes/{i:06d}.txt", "new")
            handle.save()
    listed, paths = measured(server, lambda: MemoryStore.get_or_create(key=key).list_paths())
    assert len(paths) == files + 1 + 2 * saves
    return {
        "files": files, "seeded_s": seeded, "open": opened, "lookup": looked, "save": saved,
        "saves": saves, "checkpoint_bytes": written.bytes, "checkpoint_objects": written.objects, "list": listed,
        "clustered_bytes": clustered.bytes, "clustered_objects": clustered.objects,
    }  # fmt: skip


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB" if n >= 1024 else f"{n} B"


def table(figures: dict) -> str:
    files, saves = figures["files"], figures["saves"]
    rows = [
        ("open (`get_or_create` + `.messages`: head, checkpoint, one probe; no part)", figures["open"]),
        ("first lookup after open (`exists` of one path: its part)", figures["lookup"]),
        ("one-file save, fresh handle (write a new file, append a message, `save`)", figures["save"]),
        ("full listing at the end, fresh handle (`list_paths()`: every part)", figures["list"]),
    ]
    lines = [
        (
            f"Ours only, {files:,} files (upstream would need about {2 * files:,} requests per open and per save). "
            f"Seeded in-process with our own code in {figures['seeded_s']:.0f} s (see `benchmarks/scale_bench.py`)."
        ),
        "",
        "| operation | time | requests | bytes |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [f"| {name} | {m.seconds * 1000:,.1f} ms | {m.requests:,} | {_kib(m.bytes)} |" for name, m in rows]
    per_save = figures["checkpoint_bytes"] / saves
    lines += [
        "",
        (
            f"Checkpoint bytes over {saves} one-file saves (each on a fresh handle, new files spread over the whole "
            f"index): {_kib(figures['checkpoint_bytes'])} in {figures['checkpoint_objects']} checkpoint and part "
            f"objects, **{_kib(int(per_save))} per save** amortized."
        ),
    ]
    if "clustered_bytes" in figures:
        lines += [
            "",
            (
                f"Then {saves} one-file saves of new files in one directory, in name order (each on a fresh handle): "
                f"{_kib(figures['clustered_bytes'])} in {figures['clustered_objects']} checkpoint and part objects, "
                f"**{_kib(int(figures['clustered_bytes'] / saves))} per save** amortized."
            ),
        ]
    return "\n".join(lines)
