"""Set-up steps that many tests share: handles that commit a few changes, and a save that dies before
its commit point. Tests check what landed in storage themselves; these only make the situation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from flyteplugins_memory import MemoryStore, StorageError, _commit


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
