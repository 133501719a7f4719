"""Where keyed stores live: the embedded local defaults, flyte.init, task contexts and explicit values."""

from __future__ import annotations

import contextvars
import pathlib
import threading

import flyte
import pytest
from flyte._context import internal_ctx
from flyte.models import ActionID, RawDataPath, TaskContext
from flyte.report import Report

from flyteplugins_memory import ContextError, MemoryStore
from flyteplugins_memory._rules.location import LOCAL_RAW_DATA_ROOT, TASK_POD_ENV


def task_context(mode: str, raw: str, org: str | None = None) -> TaskContext:
    action = ActionID(name="a0", run_name="r1", project="proj", domain="prod", org=org)
    return TaskContext(
        action=action,
        version="v1",
        raw_data_path=RawDataPath(path=raw),
        output_path="/o",
        run_base_dir="/b",
        report=Report(name="a0"),
        mode=mode,
    )


def test_plain_init_outside_a_run_uses_the_embedded_local_defaults():
    flyte.init()
    assert MemoryStore.remote_path_for_key(key="k") == (
        f"{LOCAL_RAW_DATA_ROOT}/agents/memory-store/v0/local/default/development/k"
    )


def test_init_values_and_explicit_arguments_win(tmp_path, raw_data_context):
    flyte.init(org="o", project="p", domain="d")
    raw_data_context(str(tmp_path / "rd" / "run-9"))
    assert MemoryStore.remote_path_for_key(key="k") == f"{tmp_path}/agents/memory-store/v0/o/p/d/k"
    assert MemoryStore.remote_path_for_key(key="k", org="x", project="y", domain="z").endswith("/x/y/z/k")


def test_remote_task_context_supplies_namespace_and_storage_root():
    flyte.init()
    context = internal_ctx().replace_task_context(task_context("remote", "s3://bucket/w6/x/rd/abc", org="acme"))
    with context:
        assert MemoryStore.remote_path_for_key(key="k") == "s3://bucket/agents/memory-store/v0/acme/proj/prod/k"


def test_remote_task_context_without_org_is_a_clear_error():
    flyte.init()
    with (
        internal_ctx().replace_task_context(task_context("remote", "s3://bucket/x")),
        pytest.raises(ContextError, match="org"),
    ):
        MemoryStore.remote_path_for_key(key="k")


def test_local_run_context_without_org_uses_the_local_default(tmp_path):
    flyte.init()
    raw = str(tmp_path / "raw_data" / "action-1")
    with internal_ctx().replace_task_context(task_context("local", raw)):
        assert (
            MemoryStore.remote_path_for_key(key="k") == f"{tmp_path}/raw_data/agents/memory-store/v0/local/proj/prod/k"
        )


def _in_a_thread(fn):
    """`fn()` on a thread of its own (no Flyte context), its result or its error."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_outcome(fn)))
    thread.start()
    thread.join(timeout=60)
    return outcome[0]


def _outcome(fn):
    try:
        return fn()
    except Exception as error:  # handed to the test's thread
        return error


def test_a_thread_without_the_task_context_in_a_task_pod_is_refused_not_put_on_the_pods_disk(
    tmp_path, monkeypatch, durable_backend, key
):
    monkeypatch.setenv(TASK_POD_ENV, "proj")  # what a cluster sets in a task's pod
    store = MemoryStore.get_or_create(key=key)  # the task's own thread: its raw-data path is bound
    store.write_text("a.md", "from the task")
    store.save()

    refused = _in_a_thread(lambda: MemoryStore.get_or_create(key=key))
    assert isinstance(refused, ContextError) and "copy_context" in str(refused)
    assert isinstance(_in_a_thread(lambda: MemoryStore.open(key=key)), ContextError)
    assert not list(pathlib.Path(LOCAL_RAW_DATA_ROOT).glob(f"agents/memory-store/v0/*/*/*/{key}")), "nothing local"

    # the fixes the message names work: the handle handed over, or the task's context carried to the thread
    assert _in_a_thread(lambda: store.read_text("a.md")) == "from the task"
    carried = contextvars.copy_context()
    reopened = _in_a_thread(lambda: carried.run(MemoryStore.get_or_create, key=key))
    assert isinstance(reopened, MemoryStore) and reopened.read_text("a.md") == "from the task"
    assert durable_backend.objects(key)["a.md"] == b"from the task"


def test_a_thread_without_a_context_outside_a_task_pod_keeps_the_embedded_default(monkeypatch):
    monkeypatch.delenv(TASK_POD_ENV, raising=False)
    flyte.init()
    found = _in_a_thread(lambda: MemoryStore.remote_path_for_key(key="k"))
    assert found == f"{LOCAL_RAW_DATA_ROOT}/agents/memory-store/v0/local/default/development/k"
