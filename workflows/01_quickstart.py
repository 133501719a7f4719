"""Quickstart: an agent remembers across tasks and runs, on local disk with zero configuration.

A first task opens (or creates) the keyed store ``quickstart-agent``, records a turn of conversation and
a note, and returns the store; a second task receives it and reads back exactly what was saved. Run it
twice: the second run continues the same memory. ``--s3`` runs the same tasks against S3 (a moto server
the script starts on 127.0.0.1), ``--remote`` on the Flyte cluster of your config.

Run: python workflows/01_quickstart.py [--s3 | --remote] [--key KEY]
"""

from __future__ import annotations

import _support
import flyte
from _support import plural

from flyteplugins_memory import MemoryStore

env = flyte.TaskEnvironment(name="memory_quickstart", image=_support.task_image())


@env.task
async def remember(key: str, question: str) -> MemoryStore:
    memory = await MemoryStore.get_or_create.aio(key=key)
    memory.append({"role": "user", "content": question})
    notes = await memory.read_json.aio("notes/facts.json", default=[])
    notes.append(f"user asked: {question}")
    await memory.write_json.aio("notes/facts.json", notes, actor="remember", reason="new question")
    memory.append({"role": "assistant", "content": f"I now know {plural(len(notes), 'fact')}."})
    await memory.save.aio()
    return memory


@env.task
async def recall(memory: MemoryStore) -> str:
    facts = await memory.read_json.aio("notes/facts.json", default=[])
    paths = await memory.list_paths.aio()
    last_event = (await memory.audit_tail.aio(1))[-1]
    return (
        f"store {memory.key!r}: {plural(len(memory.messages), 'message')}, files {paths}, "
        f"{plural(len(facts), 'fact')}, last write by {last_event['actor']!r}\n"
        f"memory lives at {memory.remote_path}"
    )


@env.task
async def quickstart(key: str = "quickstart-agent", question: str = "What is Flyte?") -> str:
    memory = await remember(key, question)
    return await recall(memory)


if __name__ == "__main__":
    args = _support.parser(__doc__, default_key="quickstart-agent").parse_args()
    with _support.connect(args) as target:
        print(target.run(quickstart, key=target.key)[0])
        print(target.look_inside("ls", "messages --tail 4"))
