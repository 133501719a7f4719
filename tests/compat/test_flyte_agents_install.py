"""`install()` puts our store under Flyte's agent stack: ``flyteplugins.agents.core.resolve_memory`` (what every
``flyteplugins-agents-*`` plugin's ``memory_key=`` opens) and ``flyte.ai.agents.MemoryStore``; `uninstall()`
puts upstream's class back; ``FLYTEPLUGINS_MEMORY_INSTALL=1`` does it for a process without touching its code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import flyte.ai.agents
import flyte.ai.agents.agent
import flyte.ai.agents.memory
import pytest
from flyteplugins.agents.core import resolve_memory

import flyteplugins_memory
from flyteplugins_memory import INSTALL_ENV, MemoryStore, install, uninstall
from repo import REPO

UPSTREAM = flyte.ai.agents.memory.MemoryStore


def _bound() -> tuple[type, type, type]:
    """What the three names that matter hold now: the memory module's, the package's, and `Agent`'s."""
    return flyte.ai.agents.memory.MemoryStore, flyte.ai.agents.MemoryStore, flyte.ai.agents.agent.MemoryStore


def test_nothing_changes_without_opting_in():
    assert UPSTREAM is not MemoryStore and issubclass(MemoryStore, UPSTREAM)
    assert _bound() == (UPSTREAM, UPSTREAM, UPSTREAM)


def test_install_and_uninstall_are_idempotent_and_uninstall_restores_upstream_exactly():
    uninstall()  # without an install: nothing to undo
    assert _bound() == (UPSTREAM, UPSTREAM, UPSTREAM)
    install()
    install()
    # the two names resolve_memory and user code import; Agent keeps upstream's class for its isinstance check
    assert _bound() == (MemoryStore, MemoryStore, UPSTREAM)
    uninstall()
    assert _bound() == (UPSTREAM, UPSTREAM, UPSTREAM)
    uninstall()
    assert _bound() == (UPSTREAM, UPSTREAM, UPSTREAM)
    install()
    uninstall()
    assert _bound() == (UPSTREAM, UPSTREAM, UPSTREAM)


def test_uninstall_leaves_a_name_someone_else_rebound_since(installed):
    class Theirs(UPSTREAM):
        pass

    flyte.ai.agents.MemoryStore = Theirs
    try:
        uninstall()
        assert flyte.ai.agents.memory.MemoryStore is UPSTREAM and flyte.ai.agents.MemoryStore is Theirs
    finally:
        flyte.ai.agents.MemoryStore = UPSTREAM


async def test_resolve_memory_opens_our_store_and_what_it_saves_is_journaled(installed, durable_backend, key):
    store = await resolve_memory(key)
    assert type(store) is MemoryStore and store.remote_path == durable_backend.store_uri(key)
    await store.write_json.aio("langgraph/history.json", [{"type": "human", "data": {"content": "hi"}}])
    await store.save.aio()
    # ours on storage: the journal beside the store holds the commit, upstream's layout holds the file
    assert any("/log/" in name for name in durable_backend.journal(key))
    assert json.loads(durable_backend.objects(key)["langgraph/history.json"]) == [
        {"type": "human", "data": {"content": "hi"}}
    ]
    again = await resolve_memory(key)
    assert type(again) is MemoryStore and again.log(limit=1)[0].wrote == ("langgraph/history.json",)


async def test_after_uninstall_resolve_memory_opens_upstreams_store_of_the_same_key(durable_backend, key):
    install()
    ours = await resolve_memory(key)
    await ours.write_text.aio("notes/a.md", "from ours")
    await ours.save.aio()
    uninstall()
    theirs = await resolve_memory(key)
    assert type(theirs) is UPSTREAM and await theirs.read_text.aio("notes/a.md") == "from ours"


def test_code_importing_after_install_gets_ours(installed):
    from flyte.ai.agents import MemoryStore as Imported

    assert Imported is MemoryStore
    assert isinstance(Imported(key="k"), flyte.ai.agents.agent.MemoryStore), "upstream's Agent still accepts it"


CHILD = """
import os, flyte
flyte.init()  # loads Flyte's type plugins: ours among them, which reads the environment
import flyte.ai.agents.memory
print(flyte.ai.agents.memory.MemoryStore.__module__, flyte.ai.agents.MemoryStore.__module__)
"""


def _child(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != INSTALL_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    if value is not None:
        env[INSTALL_ENV] = value
    return subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120, check=True
    )


@pytest.mark.parametrize("value", ["1", "true", "ON"])
def test_the_environment_variable_installs_when_flyte_loads_the_type_plugins(value):
    assert _child(value).stdout.split() == ["flyteplugins_memory", "flyteplugins_memory"]


@pytest.mark.parametrize("value", [None, "", "0", "false"])
def test_without_the_environment_variable_nothing_changes(value):
    assert _child(value).stdout.split() == ["flyte.ai.agents.memory", "flyte.ai.agents.memory"]


def test_a_value_neither_on_nor_off_is_a_warning_and_changes_nothing():
    done = _child("maybe")
    assert done.stdout.split() == ["flyte.ai.agents.memory", "flyte.ai.agents.memory"]
    assert f"{INSTALL_ENV}='maybe' is neither on" in done.stderr


RUN = """
import json, sys, flyte
from flyteplugins.agents.core import resolve_memory

env = flyte.TaskEnvironment(name="install_env_var", env_vars={"FLYTEPLUGINS_MEMORY_INSTALL": "1"})

@env.task
async def remember(key: str, text: str) -> dict:
    store = await resolve_memory(key)  # the task's code names no flyteplugins_memory
    before = await store.read_json.aio("notes.json", [])
    await store.write_json.aio("notes.json", [*before, text], actor="agent")
    await store.save.aio()
    return {"class": type(store).__module__, "notes": [*before, text], "newest": store.log(limit=1)[0].actor}

flyte.init()
raw = sys.argv[2]
outs = [flyte.with_runcontext(mode="local", raw_data_path=raw).run(remember, key=sys.argv[1], text=t).outputs()[0]
        for t in ("one", "two")]
print(json.dumps(outs))
"""


def test_the_environment_variable_reaches_every_task_of_a_local_run(tmp_path, key):
    env = {k: v for k, v in os.environ.items() if k != INSTALL_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env[INSTALL_ENV] = "1"  # what `env_vars` gives a remote task's process; a local run shares this one
    done = subprocess.run(
        [sys.executable, "-c", RUN, key, str(tmp_path / "raw")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = json.loads(done.stdout.splitlines()[-1])
    assert first == {"class": "flyteplugins_memory", "notes": ["one"], "newest": "agent"}
    assert second == {"class": "flyteplugins_memory", "notes": ["one", "two"], "newest": "agent"}


def test_install_is_public_and_documented():
    for name in ("install", "uninstall", "INSTALL_ENV"):
        assert name in flyteplugins_memory.__all__
    assert "flyte.ai.agents.memory.MemoryStore" in (install.__doc__ or "")
    assert INSTALL_ENV == "FLYTEPLUGINS_MEMORY_INSTALL"
