"""Set-up steps that many tests share: handles that commit a few changes, and a save that dies before
its commit point. Tests check what landed in storage themselves; these only make the situation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from flyteplugins_memory import MemoryStore, StorageError
from flyteplugins_memory._journal import commit as _commit


def commit(store: MemoryStore, files: Mapping[str, str], deleted: Iterable[str] = ()) -> MemoryStore:
    """Write `files` (in order) and delete `deleted` on `store`, then save; returns `store`."""
    for path, text in files.items():
        store.write_text(path, text)
    for path in deleted:
        store.delete(path)
    store.save()
    return store


def saved(key: str, files: Mapping[str, str], deleted: Iterable[str] = ()) -> MemoryStore:
    """A new handle on `key` that has committed `files` (and deleted `deleted`)."""
    return commit(MemoryStore.get_or_create(key=key), files, deleted)


def handles(key: str, count: int) -> list[MemoryStore]:
    """`count` handles on `key`, all opened at the same commit."""
    return [MemoryStore.get_or_create(key=key) for _ in range(count)]


def save_dying_before_commit(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Save `store` as a process would that died after its uploads and before its commit point."""

    async def dies(remote, job, latest):
        raise StorageError("the process died here")

    with monkeypatch.context() as patch:
        patch.setattr(_commit, "_commit", dies)
        with pytest.raises(StorageError):
            store.save()


class RaceBefore:
    """Stands in for a handle's `save` (``monkeypatch.setattr(store, "save", RaceBefore(store, first))``):
    runs `first` (another handle's whole call) just before the handle's first save, so that save meets a
    commit made after the handle last refreshed, as a racing task's would."""

    def __init__(self, store: MemoryStore, first) -> None:
        self.real, self.first = store.save, first

    async def aio(self, **kwargs):
        if self.first is not None:
            first, self.first = self.first, None
            await first()
        return await self.real.aio(**kwargs)


def run_python(python: str, script: str, config: dict, *, timeout: float = 600) -> str:
    """Run `script` with another virtualenv's `python` (argv[1]: `config` as JSON, no PYTHON* variables of
    ours), require it to exit 0 printing ``ok`` last, and return its stdout."""
    import json
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    command = [python, "-c", script, json.dumps(config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-4000:]
    return done.stdout


def race_children(code: str, config: dict, *, workers: int = 2, timeout: float = 120) -> None:
    """Start `workers` Python processes running `code` (each given `config` plus its ``worker`` number as
    JSON in argv[1]), release them together by creating ``config["go"]``, and require each to exit 0."""
    import json
    import pathlib
    import subprocess
    import sys

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, json.dumps({**config, "worker": w})],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    pathlib.Path(config["go"]).touch()
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]


def holding(backend, needle: str) -> list[str]:
    """Every object under the backend's storage root (stores and journals) whose bytes hold `needle`."""
    from flyteplugins_memory._rules.location import storage_root
    from flyteplugins_memory.testing._kit import objects_under

    root = backend.fs._strip_protocol(storage_root(backend.raw_data_path)).rstrip("/")
    return sorted(n for n, d in objects_under(backend.fs, root).items() if needle.encode() in d)


def logical_names(storage, names: Iterable[str]) -> list[str]:
    """`names` as the store calls them, for a request counted at `FsspecStorage` (one prefix): on a journal's
    side of `JournalStorage` (a root with a ``.journal`` segment; no store prefix in the tests has one) they
    are relative to the journal, and the store names them under ``meta/.journal/``."""
    from flyteplugins_memory._rules.layout import JOURNAL_DIR

    if "/.journal/" not in f"/{storage.prefix}/":
        return list(names)
    return [f"{JOURNAL_DIR}/{name}" if name else JOURNAL_DIR for name in names]


def scan(backend, key: str, secrets: list[bytes]) -> dict[bytes, list[str]]:
    """Which stored objects (names or bytes) under the store prefix still hold each secret."""
    objects = backend.objects(key)
    found = {s: [n for n, d in objects.items() if s in d or s in n.encode()] for s in secrets}
    return {s: names for s, names in found.items() if names}


async def caller_with_a_conflicting_edit(key: str) -> MemoryStore:
    """The reviewer's shape (d2.py): the caller's handle holds an unsaved edit of a path that another
    handle then commits."""
    caller = await MemoryStore.get_or_create.aio(key=key)
    await caller.write_text.aio("notes/plan.md", "v1")
    await caller.save.aio()
    await caller.write_text.aio("notes/plan.md", "caller's unsaved v2")
    other = await MemoryStore.get_or_create.aio(key=key)
    await other.write_text.aio("notes/plan.md", "other's v2")
    await other.save.aio()
    return caller
