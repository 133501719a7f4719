"""The package's own event loop: where coroutines run, how sync and ``.aio`` calls reach it, and what
happens on re-entry, cancellation, context variables, pickling and fork."""

from __future__ import annotations

import asyncio
import contextvars
import multiprocessing
import pathlib
import pickle
import queue
import signal
import threading

import flyte
import pytest

from flyteplugins_memory import BlockingCallOnLoop, MemoryStore
from flyteplugins_memory._base.syncify import LOOP_THREAD_NAME, SyncCallable, run_sync, syncify
from flyteplugins_memory._handle.working_copy import WorkingCopy

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("SEEN", default="unset")


class Probe:
    """A small class using every wrapper form the package uses."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()

    @syncify
    async def where(self) -> tuple[str, str]:
        """The thread this runs on, and the context variable it sees."""
        return threading.current_thread().name, SEEN.get()

    @syncify
    @classmethod
    async def made(cls, *, tag: str) -> tuple[type, str]:
        return cls, tag

    @syncify
    async def nested(self) -> tuple[object, object]:
        """The task this runs in, and the one a nested ``.aio`` call runs in (no hop: the same)."""
        return asyncio.current_task(), await self.current_task.aio()

    @syncify
    async def current_task(self) -> object:
        return asyncio.current_task()

    @syncify
    async def blocking_inside(self) -> None:
        self.where()  # a sync call from a coroutine on our own loop

    @syncify
    async def wait_forever(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    @syncify
    async def fail(self, error: BaseException) -> None:
        await asyncio.sleep(0)
        raise error


class SubProbe(Probe):
    pass


def test_sync_calls_run_on_the_named_loop_thread():
    assert Probe().where() == (LOOP_THREAD_NAME, "unset")
    (loop_thread,) = [t for t in threading.enumerate() if t.name == LOOP_THREAD_NAME]  # one, a daemon
    assert loop_thread.daemon


async def test_aio_runs_on_the_named_loop_and_returns_to_the_callers():
    caller = asyncio.get_running_loop()
    assert await Probe().where.aio() == (LOOP_THREAD_NAME, "unset")
    assert asyncio.get_running_loop() is caller


def test_store_operations_run_on_the_named_loop(tmp_path, monkeypatch):
    threads = []
    original = WorkingCopy.write

    async def recording(self, *args, **kwargs):
        threads.append(threading.current_thread().name)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(WorkingCopy, "write", recording)
    store = MemoryStore(key="k", root=tmp_path / "root", remote_path=str(tmp_path / "remote"))
    store.write_text("a.md", "sync")
    asyncio.run(store.write_text.aio("b.md", "async"))
    assert threads == [LOOP_THREAD_NAME, LOOP_THREAD_NAME]
    store.save()
    assert (tmp_path / "remote" / "a.md").read_text() == "sync"
    assert (tmp_path / "remote" / "b.md").read_text() == "async"


async def test_a_sync_call_inside_a_running_event_loop_works(tmp_path):
    # as in an `async def` task that calls the sync API: it blocks this loop until ours answers
    store = MemoryStore(key="k", root=tmp_path / "root", remote_path=str(tmp_path / "remote"))
    meta = store.write_text("notes.md", "from a coroutine")
    store.save()
    assert meta.sha256 == store.current_sha("notes.md")
    assert (tmp_path / "remote" / "notes.md").read_text() == "from a coroutine"


def test_nested_aio_on_our_loop_awaits_directly():
    outer, inner = Probe().nested()
    assert outer is inner


def test_a_blocking_call_on_our_loop_raises_instead_of_deadlocking(tmp_path):
    probe = Probe()
    with pytest.raises(BlockingCallOnLoop, match=r"Probe\.where\(\) was called synchronously") as caught:
        probe.blocking_inside()
    assert isinstance(caught.value, RuntimeError)
    store = MemoryStore(key="k", root=tmp_path / "root", remote_path=str(tmp_path / "remote"))

    async def list_synchronously() -> list[str]:
        return store.list_paths()

    with pytest.raises(BlockingCallOnLoop):
        run_sync(list_synchronously)
    assert probe.where()[0] == LOOP_THREAD_NAME  # the loop still serves


def test_context_variables_travel_with_the_call():
    token = SEEN.set("sync caller")
    try:
        assert Probe().where() == (LOOP_THREAD_NAME, "sync caller")
    finally:
        SEEN.reset(token)

    async def from_a_coroutine() -> tuple[str, str]:
        SEEN.set("async caller")
        return await Probe().where.aio()

    assert asyncio.run(from_a_coroutine()) == (LOOP_THREAD_NAME, "async caller")


def test_what_the_coroutine_raises_reaches_the_blocking_caller_and_the_loop_lives_on():
    probe = Probe()
    with pytest.raises(ValueError, match="bad"):
        probe.fail(ValueError("bad"))
    with pytest.raises(KeyboardInterrupt):  # a user's callback interrupted on our loop: the caller gets it
        probe.fail(KeyboardInterrupt())
    assert probe.where()[0] == LOOP_THREAD_NAME  # the loop thread did not die of it


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_interrupting_a_blocking_call_cancels_the_coroutine_on_our_loop():
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's KeyboardInterrupt here")
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT interrupts the main thread only")
    probe = Probe()

    def interrupt() -> None:
        if probe.started.wait(60):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        probe.wait_forever()
    assert probe.cancelled.wait(60)


async def test_cancelling_the_awaiter_cancels_the_coroutine_on_our_loop():
    probe = Probe()
    waiting = asyncio.ensure_future(probe.wait_forever.aio())
    assert await asyncio.to_thread(probe.started.wait, 60)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await asyncio.to_thread(probe.cancelled.wait, 60)


def test_classmethods_bind_to_the_class_they_are_looked_up_on():
    assert Probe.made(tag="a") == (Probe, "a")
    assert SubProbe.made(tag="b") == (SubProbe, "b")
    assert SubProbe().made(tag="c") == (SubProbe, "c")
    assert asyncio.run(SubProbe.made.aio(tag="d")) == (SubProbe, "d")


def test_methods_called_through_the_class_take_the_instance_first():
    probe = Probe()
    assert Probe.where(probe) == (LOOP_THREAD_NAME, "unset")
    assert asyncio.run(Probe.where.aio(probe)) == (LOOP_THREAD_NAME, "unset")
    assert Probe.__dict__["made"](tag="e") == (Probe, "e")  # the descriptor itself, as flyte's was


def test_wrappers_keep_names_docs_and_pickle_by_reference():
    assert Probe.where.__name__ == "where"
    assert "thread this runs on" in (Probe.where.__doc__ or "")
    assert MemoryStore.write_text.__wrapped__.__qualname__ == "MemoryStore.write_text"
    for wrapper in (MemoryStore.create, MemoryStore.save, MemoryStore.get_or_create):
        copied = pickle.loads(pickle.dumps(wrapper))
        assert isinstance(copied, SyncCallable)
        assert copied.__wrapped__ == wrapper.__wrapped__


def test_syncify_refuses_what_it_cannot_wrap():
    def plain(self) -> None:
        pass

    with pytest.raises(TypeError, match="async methods and classmethods"):
        syncify(plain)  # type: ignore[call-overload]


def _in_child(remote: str, root: str, answers: multiprocessing.Queue) -> None:
    try:
        store = MemoryStore(key="forked", root=root, remote_path=remote)
        store.write_text("child.md", "written after fork")
        store.save()
        answers.put(("ok", Probe().where()[0], threading.get_ident()))
    except BaseException as exc:  # reported to the parent, which fails the test with it
        answers.put(("error", repr(exc), 0))


def test_a_forked_child_gets_a_loop_of_its_own(tmp_path):
    remote = str(tmp_path / "remote")
    parent = MemoryStore(key="forked", root=tmp_path / "parent", remote_path=remote)
    parent.write_text("parent.md", "written before fork")
    parent.save()  # the parent's loop is running when it forks
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=_in_child, args=(remote, str(tmp_path / "child"), answers))
    child.start()
    try:
        status, detail, _ = answers.get(timeout=120)  # without a new loop the child would wait forever
    except queue.Empty:
        pytest.fail("the forked child's store call never returned")
    finally:
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
    assert (status, detail) == ("ok", LOOP_THREAD_NAME)
    assert child.exitcode == 0
    assert (pathlib.Path(remote) / "child.md").read_text() == "written after fork"
    parent.refresh()  # and the parent's loop still serves
    assert parent.read_text("child.md") == "written after fork"


env = flyte.TaskEnvironment(name="memory_loop")


@env.task
async def sync_calls_in_an_async_task(key: str) -> list[str]:
    store = MemoryStore.get_or_create(key=key)
    store.write_text("from_async_task.md", "sync call, async task")
    store.save()
    return store.list_paths()


def test_sync_calls_inside_an_async_flyte_task(tmp_path, key):
    flyte.init()
    run = flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw")).run(
        sync_calls_in_an_async_task, key=key
    )
    assert run.outputs()[0] == ["from_async_task.md"]
    # the run's raw-data path reached our loop: the store is under it
    stored = tmp_path / "raw" / "agents/memory-store/v0/local/default/development" / key
    assert (stored / "from_async_task.md").read_text() == "sync call, async task"
