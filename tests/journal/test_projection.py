"""Upstream's layout is a projection written after the commit point: when it fails, the save still
returns (it committed; a save that raises must be invisible), and the handle's next save repairs it."""

from __future__ import annotations

import json

from flyteplugins_memory import (
    MemoryStore,
    StorageError,
)
from flyteplugins_memory._handle import checkout as _checkout
from flyteplugins_memory._journal import commit as _commit
from flyteplugins_memory._journal.journal_storage import JournalStorage
from helpers import commit, saved


def _fail_projections(monkeypatch, times: int) -> list[int]:
    real, failures = _commit.update_upstream_layout, []

    async def flaky(remote, job, committed):
        if len(failures) < times:
            failures.append(committed.seq)
            raise StorageError("injected: projection failed")
        return await real(remote, job, committed)

    monkeypatch.setattr(_commit, "update_upstream_layout", flaky)  # the save's own projection
    monkeypatch.setattr(_checkout, "update_upstream_layout", flaky)  # the repair
    return failures


def test_a_failed_projection_is_repaired_by_the_next_save(durable_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("old.txt", "old")
    store.save()
    failures = _fail_projections(monkeypatch, 1)
    store.write_text("new.txt", "new")
    store.delete("old.txt")
    store.append({"role": "user", "content": "hi"})
    store.save()  # committed: returns normally although upstream's view was not written
    assert failures and MemoryStore.get_or_create(key=key).list_paths() == ["new.txt"]
    view = durable_backend.upstream_view(key)
    # lagging: the new file is at its path already (uploaded in place before the commit), not its sidecar
    assert "meta/new.txt.json" not in view and "old.txt" in view
    store.save()  # nothing new to commit: repairs the projection
    view = durable_backend.upstream_view(key)
    assert view["new.txt"] == b"new" and "old.txt" not in view and "meta/old.txt.json" not in view
    assert json.loads(view["meta/new.txt.json"])["sha256"] == store.current_sha("new.txt")
    assert [m["content"] for m in json.loads(view["messages.json"])] == ["hi"]


def test_a_repair_never_overwrites_what_a_newer_save_projected(durable_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    store.save()
    _fail_projections(monkeypatch, 1)
    commit(store, {"shared.txt": "mine", "only-mine.txt": "mine"})
    saved(key, {"shared.txt": "theirs"})
    commit(store, {"later.txt": "x"})
    view = durable_backend.upstream_view(key)
    assert view["shared.txt"] == b"theirs" and view["only-mine.txt"] == b"mine" and view["later.txt"] == b"x"


def test_a_repair_that_fails_again_stays_owed(durable_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    store.save()
    _fail_projections(monkeypatch, 3)  # the save's projection, then two repair attempts
    store.write_text("a.txt", "a")
    store.save()
    store.save()
    assert "meta/a.txt.json" not in durable_backend.upstream_view(key)  # a.txt itself went in place
    store.save()  # the third failure was the repair of this save; the next one succeeds
    store.save()
    view = durable_backend.upstream_view(key)
    assert view["a.txt"] == b"a" and "meta/a.txt.json" in view


def test_the_newest_transcript_is_projected_last(local_backend, key, monkeypatch):
    from flyteplugins_memory._journal import commit as _commit

    store = MemoryStore.get_or_create(key=key)
    store.save()
    first, second = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    first.append({"content": "from first"})
    second.append({"content": "from second"})
    real_write = JournalStorage.write_many
    done = []

    async def delayed(self, objects):  # first's projection of messages.json lands after second's
        if "messages.json" in objects and not done:
            done.append(True)
            await second.save.aio()
        return await real_write(self, objects)

    monkeypatch.setattr(JournalStorage, "write_many", delayed)
    first.save()
    stored = json.loads(local_backend.upstream_view(key)["messages.json"])
    assert sorted(m["content"] for m in stored) == ["from first", "from second"]
    assert _commit  # imported for the monkeypatch target's module to be loaded
