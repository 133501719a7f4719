"""Edges an outside review of issue 8 broke, each reproduced first, then fixed (see docs/reliability.md)."""

from __future__ import annotations

import asyncio
import json
import uuid

import flyte
import pytest
from pydantic import BaseModel, ConfigDict

from flyteplugins_memory import (
    InvalidMessage,
    InvalidPath,
    MemoryStore,
    UnsupportedBackend,
)
from flyteplugins_memory._journal.journal_storage import JournalStorage
from flyteplugins_memory.storage._fsspec import FsspecStorage
from helpers import commit, saved


def test_a_received_store_its_sender_never_loaded_keeps_the_committed_transcript(backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.extend([{"content": f"h{i}"} for i in range(3)])
    seed.save()
    sender = MemoryStore(key=key, remote_path=seed.remote_path)  # untouched: it never loaded
    received = MemoryStore._deserialize(sender._serialize())
    received.append({"content": "new"})
    received.save()
    stored = json.loads(backend.upstream_view(key)["messages.json"])
    assert [m["content"] for m in stored] == ["h0", "h1", "h2", "new"]


def test_messages_too_deep_for_the_journal_are_refused_at_append(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes.md", "important")
    store.save()
    deep: dict = {"v": 1}
    for _ in range(200):
        deep = {"c": deep}
    with pytest.raises(InvalidMessage, match="deeper"):
        store.append({"role": "tool", "content": deep})
    assert MemoryStore.get_or_create(key=key).read_text("notes.md") == "important"


def test_keys_json_makes_equal_are_refused(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    with pytest.raises(InvalidMessage, match="equal"):
        store.append({"content": {1: "int key", "1": "str key"}})


def test_invalid_unicode_in_audit_fields_and_paths_is_refused_and_the_handle_stays_usable(backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("important.md", "hours of work")
    with pytest.raises(InvalidMessage):
        store.write_text("a.txt", "x", reason="caf\udce9")
    with pytest.raises(InvalidMessage):
        store.write_text("a.txt", "x", actor="\udcff")
    with pytest.raises(InvalidPath):
        store.write_text("bad\udcff.txt", "x")
    store.save()
    assert MemoryStore.get_or_create(key=key).list_paths() == ["important.md"]


def test_the_root_drops_copies_other_writers_changed_or_deleted(local_backend, key):
    mine = saved(key, {"notes.md": "v1", "gone.md": "bye"})
    theirs = commit(MemoryStore.get_or_create(key=key), {"notes.md": "v2"}, deleted=["gone.md"])
    mine.refresh()
    assert not (mine.root / "gone.md").exists() and not (mine.root / "meta" / "gone.md.json").exists()
    assert mine.read_text("notes.md") == "v2" and (mine.root / "notes.md").read_text() == "v2"
    theirs.write_text("notes.md", "v3")
    theirs.save()
    mine.write_text("other.md", "x")
    mine.save()  # rebased onto theirs: the root's copy of notes.md is stale now
    assert not (mine.root / "notes.md").exists() or (mine.root / "notes.md").read_text() == "v3"


async def test_a_fetch_racing_a_write_never_puts_old_bytes_back_in_the_root(local_backend, key):
    seed = await MemoryStore.get_or_create.aio(key=key)
    for i in range(30):
        await seed.write_text.aio(f"f{i}.md", "old")
    await seed.save.aio()
    store = await MemoryStore.get_or_create.aio(key=key)

    async def write_all() -> None:
        for i in range(30):
            await store.write_text.aio(f"f{i}.md", "new")
            await asyncio.sleep(0)

    await asyncio.gather(store.prefetch.aio(), write_all(), *(store.read_text.aio(f"f{i}.md") for i in range(30)))
    await store.save.aio()
    root = store.root
    assert [(root / f"f{i}.md").read_text() for i in range(30)] == ["new"] * 30


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


def test_pre_load_appends_are_never_deduplicated_and_a_stale_flushed_root_never_duplicates(tmp_path, local_backend):
    key = f"k-{uuid.uuid4().hex[:6]}"
    seed = MemoryStore.get_or_create(key=key)
    seed.append({"content": "continue"})
    seed.save()
    handle = MemoryStore(key=key, remote_path=seed.remote_path)
    handle.append({"content": "continue"})  # the same text again, on purpose
    handle.save()
    assert [m["content"] for m in MemoryStore.get_or_create(key=key).messages] == ["continue", "continue"]
    root = tmp_path / "work"
    first = MemoryStore(key=key, root=root, remote_path=seed.remote_path)
    first.append({"content": "m1"})
    first.flush_messages()  # root/messages.json: the transcript so far
    first.save()
    first.append({"content": "m2"})
    first.save()
    MemoryStore(key=key, root=root, remote_path=seed.remote_path).save()  # a restart on the stale root
    contents = [m["content"] for m in MemoryStore.get_or_create(key=key).messages]
    assert contents == ["continue", "continue", "m1", "m2"]


def test_a_callers_messages_list_is_never_changed(local_backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.append({"content": "old"})
    seed.save()
    mine = [{"content": "new"}]
    handle = MemoryStore(key=key, messages=mine)
    handle.save()
    assert mine == [{"content": "new"}]
    assert [m["content"] for m in MemoryStore.get_or_create(key=key).messages] == ["old", "new"]


@pytest.mark.parametrize("uri", ["ftp://host/x", "zip://nothing", "webhdfs://host/x", "reference://x"])
def test_unknown_backends_are_refused_before_anything_is_built(uri):
    with pytest.raises(UnsupportedBackend):
        FsspecStorage(uri)


class _Wrapper(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    step: int
    memory: MemoryStore


_env = flyte.TaskEnvironment(name="memory_review_pydantic")


@_env.task
async def _produce(key: str, save: bool) -> _Wrapper:
    store = await MemoryStore.get_or_create.aio(key=key)
    await store.write_text.aio("a.txt", "A")
    store.append({"role": "user", "content": "hi"})
    if save:
        await store.save.aio()
    return _Wrapper(step=1, memory=store)


@_env.task
async def _consume(wrapped: _Wrapper) -> list:
    memory = wrapped.memory
    return [await memory.list_paths.aio(), [m["content"] for m in memory.messages], await memory.read_text.aio("a.txt")]


@_env.task
async def _pipeline(key: str, save: bool) -> list:
    return await _consume(await _produce(key, save))


def test_a_store_inside_a_pydantic_output_travels_as_a_store(tmp_path):
    flyte.init()
    runner = flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw"))
    assert runner.run(_pipeline, key=f"k-{uuid.uuid4().hex[:6]}", save=True).outputs()[0] == [["a.txt"], ["hi"], "A"]
    key = f"k-{uuid.uuid4().hex[:6]}"
    with pytest.raises(Exception, match="UnsavedChanges"):
        runner.run(_pipeline, key=key, save=False)
    stored = tmp_path / "raw" / "agents/memory-store/v0/local/default/development" / key
    assert not (stored / "a.txt").exists()  # nothing half-sent: the producer never saved it
