"""Quickstart: an agent remembers across tasks and runs, on local disk with zero configuration.

A first task opens (or creates) the keyed store ``quickstart-agent``, records a turn of conversation and
a note, and returns the store; a second task receives it and reads back exactly what was saved. Run it
twice: the second run continues the same memory.

Run: python workflows/01_quickstart.py
"""

from __future__ import annotations

import flyte

from flyteplugins_memory import MemoryStore

env = flyte.TaskEnvironment(name="memory_quickstart")


@env.task
async def remember(key: str, question: str) -> MemoryStore:
    memory = await MemoryStore.get_or_create.aio(key=key)
    memory.append({"role": "user", "content": question})
    notes = await memory.read_json.aio("notes/facts.json", default=[])
    notes.append(f"user asked: {question}")
    await memory.write_json.aio("notes/facts.json", notes, actor="remember", reason="new question")
    memory.append({"role": "assistant", "content": f"I now know {len(notes)} fact(s)."})
    await memory.save.aio()
    return memory


@env.task
async def recall(memory: MemoryStore) -> str:
    facts = await memory.read_json.aio("notes/facts.json", default=[])
    paths = await memory.list_paths.aio()
    last_event = (await memory.audit_tail.aio(1))[-1]
    return (
        f"store {memory.key!r}: {len(memory.messages)} messages, files {paths}, "
        f"{len(facts)} fact(s), last write by {last_event['actor']!r}"
    )


@env.task
async def quickstart(question: str = "What is Flyte?") -> str:
    memory = await remember("quickstart-agent", question)
    return await recall(memory)


if __name__ == "__main__":
    flyte.init()
    run = flyte.run(quickstart)
    print(run.outputs()[0])
    print(f"memory lives at {MemoryStore.remote_path_for_key(key='quickstart-agent')}")
