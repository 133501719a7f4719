"""A store is a task input and output: the receiving task sees exactly what the sender had."""

from __future__ import annotations

import flyte

from flyteplugins_memory import MemoryStore

env = flyte.TaskEnvironment(name="memory_task_io")


@env.task
async def produce(key: str) -> MemoryStore:
    store = await MemoryStore.get_or_create.aio(key=key)
    await store.write_text.aio("notes/saved.md", "saved", actor="producer", reason="explicit save")
    store.append({"role": "user", "content": "saved turn"})
    await store.save.aio()
    # Left unsaved on purpose: returning the store must publish it.
    await store.write_json.aio("notes/unsaved.json", {"n": 1}, actor="producer")
    store.append({"role": "assistant", "content": "unsaved turn"})
    return store


@env.task
async def consume(store: MemoryStore) -> dict:
    paths = await store.list_paths.aio()
    return {
        "paths": paths,
        "exists": [await store.exists.aio(p) for p in [*paths, "notes", "missing.txt"]],
        "texts": {p: await store.read_text.aio(p) for p in paths},
        "meta_by": {p: (await store.get_meta.aio(p)).updated_by for p in paths},
        "audit": [e["path"] for e in await store.audit_tail.aio(0)],
        "messages": [m["content"] for m in store.messages],
    }


@env.task
async def pipeline(key: str) -> dict:
    return await consume(await produce(key))


def test_store_travels_between_tasks(tmp_path, key):
    flyte.init()
    run = flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw")).run(pipeline, key=key)
    seen = run.outputs()[0]
    assert seen == {
        "paths": ["notes/saved.md", "notes/unsaved.json"],
        "exists": [True, True, True, False],
        "texts": {"notes/saved.md": "saved", "notes/unsaved.json": '{\n  "n": 1\n}'},
        "meta_by": {"notes/saved.md": "producer", "notes/unsaved.json": "producer"},
        "audit": ["notes/saved.md", "notes/unsaved.json"],
        "messages": ["saved turn", "unsaved turn"],
    }
    # The same key opened later, outside any run, sees the same store.
    stored = tmp_path / "raw" / "agents/memory-store/v0/local/default/development" / key
    assert (stored / "notes/unsaved.json").is_file()
    assert b"unsaved turn" in (stored / "messages.json").read_bytes()


def test_store_nested_in_a_dataclass_round_trips(local_backend, key):
    from dataclasses import dataclass

    from mashumaro.codecs.msgpack import MessagePackDecoder, MessagePackEncoder

    @dataclass
    class AgentState:
        step: int
        memory: MemoryStore

    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "saved")
    store.append({"role": "user", "content": "hi"})
    store.save()
    encoded = MessagePackEncoder(AgentState).encode(AgentState(1, store))
    received = MessagePackDecoder(AgentState).decode(encoded).memory
    assert received.key == key and received.remote_path == store.remote_path
    assert received.messages == [{"role": "user", "content": "hi"}]
    assert received.list_paths() == ["a.txt"] and received.read_text("a.txt") == "saved"
