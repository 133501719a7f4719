"""What the tests of Flyte's agent plugins share (``tests/compat/test_flyte_agent_plugins*.py``): the two user
messages, the scripted model's answer, one local ``flyte.run`` of a turn, a stand-in server on 127.0.0.1 for
an SDK that only talks HTTP, and the checks that two runs' saves are ours (the ``installed`` fixture is in
``tests/compat/conftest.py``)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flyte

from flyteplugins_memory import MemoryStore

__all__ = ["FIRST", "SECOND", "kept_in_our_store", "local_server", "reply", "run"]

FIRST, SECOND = "Hi! My name is Ada and I like Rust.", "What is my name?"


def reply(said: list[str]) -> str:
    """The scripted model: it answers the newest user message from the user messages it was given."""
    names = [m.group(1) for text in said if (m := re.search(r"My name is (\w+)", text))]
    if "What is my name" in said[-1]:
        return f"Your name is {names[-1]}." if names else "I don't know your name yet."
    return f"Nice to meet you, {names[-1]}!" if names else "Hello!"


def run(backend, task, key: str, message: str):
    """One local `flyte.run` of `task`, its raw data where `backend`'s stores live; its one output."""
    return flyte.with_runcontext(mode="local", raw_data_path=backend.raw_data_path).run(task, key, message).outputs()[0]


@contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served from a thread on 127.0.0.1 (a free port) while the block runs; its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def kept_in_our_store(backend, key: str, path: str, *, actor: str | None = None, searchable: bool = True):
    """Check that each of two runs saved `path` once through our store: our journal is in storage beside it, and
    history, log, audit (and search, for a `searchable` file that holds the conversation) show both saves, by
    `actor` when given. Returns the store, for a test's own checks."""
    assert any("/log/" in name for name in backend.journal(key)), "saved through our journal"
    store = MemoryStore.get_or_create(key=key)
    commits = store.log(limit=2)
    assert len(store.history(path)) == 2 and [c.wrote for c in commits] == [(path,)] * 2
    audit = [(e["op"], e["path"]) for e in store.audit_tail(0)]
    assert audit == [("create", path), ("update", path)]
    if actor is not None:
        assert [c.actor for c in commits] == [actor] * 2
        assert [e["actor"] for e in store.audit_tail(0)] == [actor] * 2
    if searchable:
        assert store.search("Ada Rust")[0].path == path
    return store
