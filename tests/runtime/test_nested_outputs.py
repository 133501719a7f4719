"""Stores inside other task outputs: saved, or the task fails clearly; never dropped silently.

Flyte hands a `MemoryStore` output, and each element of a ``list[MemoryStore]`` or ``dict[str,
MemoryStore]``, to our type transformer, which saves it. A store inside a dataclass (or any value Flyte
encodes as one MessagePack blob, such as ``dict[int, MemoryStore]``) goes through mashumaro's synchronous
``_serialize`` instead, on flyte's event loop, where saving could deadlock: a store with unsaved changes
fails the task there with `UnsavedChanges`, before anything is written.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import flyte
import pytest
from pydantic import BaseModel, ConfigDict

from flyteplugins_memory import MemoryStore, UnsavedChanges

env = flyte.TaskEnvironment(name="memory_nested_outputs")


@dataclass
class AgentState:
    step: int
    memory: MemoryStore


async def changed_store(key: str, *, save: bool = False) -> MemoryStore:
    """A store with one committed file and, unless `save`, one unsaved file and message."""
    store = await MemoryStore.get_or_create.aio(key=key)
    await store.write_text.aio("saved.md", "saved")
    store.append({"role": "user", "content": "saved turn"})
    await store.save.aio()
    await store.write_text.aio("later.md", f"later {key}")
    store.append({"role": "assistant", "content": "later turn"})
    if save:
        await store.save.aio()
    return store


async def seen_by_receiver(store: MemoryStore) -> dict:
    return {
        "paths": await store.list_paths.aio(),
        "texts": [await store.read_text.aio(p) for p in await store.list_paths.aio()],
        "messages": [m["content"] for m in store.messages],
    }


@env.task
async def produce_state(key: str, save: bool) -> AgentState:
    return AgentState(1, await changed_store(key, save=save))


@env.task
async def consume_state(state: AgentState) -> dict:
    return await seen_by_receiver(state.memory)


@env.task
async def state_pipeline(key: str, save: bool) -> dict:
    return await consume_state(await produce_state(key, save))


@env.task
async def produce_list(keys: list[str]) -> list[MemoryStore]:
    return [await changed_store(k) for k in keys]


@env.task
async def consume_list(stores: list[MemoryStore]) -> list[dict]:
    return [await seen_by_receiver(s) for s in stores]


@env.task
async def list_pipeline(keys: list[str]) -> list[dict]:
    return await consume_list(await produce_list(keys))


@env.task
async def produce_dict(keys: list[str]) -> dict[str, MemoryStore]:
    return {k: await changed_store(k) for k in keys}


@env.task
async def consume_dict(stores: dict[str, MemoryStore]) -> dict[str, dict]:
    return {k: await seen_by_receiver(s) for k, s in stores.items()}


@env.task
async def dict_pipeline(keys: list[str]) -> dict[str, dict]:
    return await consume_dict(await produce_dict(keys))


@env.task
async def produce_state_list(keys: list[str]) -> list[AgentState]:
    return [AgentState(i, await changed_store(k)) for i, k in enumerate(keys)]


@env.task
async def produce_int_keyed(keys: list[str]) -> dict[int, MemoryStore]:
    return {i: await changed_store(k) for i, k in enumerate(keys)}


@pytest.fixture
def run_backend(durable_backend, tmp_path, monkeypatch):
    # a local run makes its raw-data path as a local directory too, even an s3:// one: keep that out of
    # the checkout
    monkeypatch.chdir(tmp_path)
    return durable_backend


def run(backend, task, **inputs):
    return flyte.with_runcontext(mode="local", raw_data_path=backend.raw_data_path).run(task, **inputs)


def complete(key: str) -> dict:
    return {
        "paths": ["later.md", "saved.md"],
        "texts": [f"later {key}", "saved"],
        "messages": ["saved turn", "later turn"],
    }


def assert_saved_in_storage(backend, key: str) -> None:
    stored = backend.upstream_view(key)
    assert stored["later.md"] == f"later {key}".encode() and "meta/later.md.json" in stored
    assert b"later turn" in stored["messages.json"]
    assert len([n for n in backend.journal(key) if "/log/" in n]) == 3  # create, explicit save, output


def assert_nothing_past_the_explicit_save(backend, key: str) -> None:
    stored = backend.upstream_view(key)
    assert "saved.md" in stored and "later.md" not in stored and b"later turn" not in stored["messages.json"]
    assert len([n for n in backend.journal(key) if "/log/" in n]) == 2  # create and the explicit save


def test_unsaved_store_in_a_dataclass_output_fails_the_task_clearly(run_backend, key):
    with pytest.raises(Exception, match=r"UnsavedChanges|unsaved changes") as raised:
        run(run_backend, state_pipeline, key=key, save=False)
    assert "save" in str(raised.value)
    assert_nothing_past_the_explicit_save(run_backend, key)


def test_saved_store_in_a_dataclass_output_reaches_the_receiver(run_backend, key):
    seen = run(run_backend, state_pipeline, key=key, save=True).outputs()[0]
    assert seen == complete(key)
    assert_saved_in_storage(run_backend, key)


def test_unsaved_stores_in_a_list_output_are_saved(run_backend, key):
    keys = [f"{key}-a", f"{key}-b"]
    seen = run(run_backend, list_pipeline, keys=keys).outputs()[0]
    assert seen == [complete(k) for k in keys]
    for k in keys:
        assert_saved_in_storage(run_backend, k)


def test_unsaved_stores_in_a_dict_output_are_saved(run_backend, key):
    keys = [f"{key}-a", f"{key}-b"]
    seen = run(run_backend, dict_pipeline, keys=keys).outputs()[0]
    assert seen == {k: complete(k) for k in keys}
    for k in keys:
        assert_saved_in_storage(run_backend, k)


@pytest.mark.parametrize("task", [produce_state_list, produce_int_keyed], ids=["list-of-dataclasses", "int-keyed"])
def test_unsaved_stores_encoded_as_one_value_fail_the_task(local_backend, key, task):
    keys = [f"{key}-a", f"{key}-b"]
    with pytest.raises(Exception, match=r"UnsavedChanges|unsaved changes"):
        run(local_backend, task, keys=keys)
    for k in keys:
        assert_nothing_past_the_explicit_save(local_backend, k)


def test_serializing_an_unsaved_store_outside_flyte_raises(local_backend, key):
    from mashumaro.codecs.msgpack import MessagePackEncoder

    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "unsaved")
    with pytest.raises(UnsavedChanges, match=key):
        MessagePackEncoder(AgentState).encode(AgentState(1, store))
    store.save()
    assert MessagePackEncoder(AgentState).encode(AgentState(1, store))


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
