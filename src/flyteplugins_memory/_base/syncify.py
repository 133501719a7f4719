"""The single sync/async convention of the package, on an event loop of our own.

Every I/O operation is written once as ``async def`` and wrapped by `syncify`: ``f(...)`` runs it and
blocks, ``await f.aio(...)`` runs it and awaits it from the caller's loop. Both execute on one named
background loop (thread ``flyteplugins-memory``, started on first use), so a store's coroutines never
race each other across event loops, and nothing else (flyte's control plane, a user's loop) shares it.

- From code already running on our loop, ``.aio`` awaits the coroutine directly (no hop); a blocking
  ``f(...)`` there raises `BlockingCallOnLoop` instead of deadlocking.
- From any other thread, inside a running event loop or not, ``f(...)`` blocks that thread until the
  coroutine finishes on ours (as ``flyte.syncify`` does), so a sync call inside an ``async def`` task works.
- Context variables (flyte's task context, raw-data path) travel with the call.
- Cancelling the ``.aio`` awaiter, or interrupting a blocking call, cancels the coroutine on our loop.
- A child process after ``fork`` starts a fresh loop of its own (the parent's thread is not copied).

The descriptors are generic over parameters and result (`ParamSpec`), so type checkers see
``store.write_text(...) -> MemoryMeta`` and ``await store.write_text.aio(...) -> MemoryMeta``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import importlib
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from ..errors import BlockingCallOnLoop

__all__ = [
    "LOOP_THREAD_NAME",
    "SyncCallable",
    "SyncClassMethod",
    "SyncMethod",
    "before_loop_stops",
    "run_async",
    "run_sync",
    "syncify",
]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

#: The name of the thread that runs every coroutine of the package.
LOOP_THREAD_NAME = "flyteplugins-memory"


class _Loop:
    """The background loop and its daemon thread, created on first use (and again after a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop, self._thread = _start_loop()
            return self._loop

    def is_current_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def forget(self) -> None:
        """After a fork, in the child: the parent's loop thread does not exist here."""
        self._lock = threading.Lock()  # it may have been held by another parent thread at the fork
        self._loop, self._thread = None, None

    def stop(self) -> None:
        """At exit; a call made later still (another exit handler saving a store) starts a new loop.
        First the `before_loop_stops` callbacks run, while the loop still answers them."""
        for callback in _BEFORE_STOP:
            with contextlib.suppress(Exception):  # at exit, one failed cleanup must not skip the others
                callback()
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop, self._thread = None, None
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=1)


def _start_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=_run_forever, args=(loop,), name=LOOP_THREAD_NAME, daemon=True)
    thread.start()
    return loop, thread


def _run_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


#: Run at exit before the loop stops, whatever order their modules were imported in (atexit runs in reverse
#: order of registration, and a module imported before this one would otherwise clean up too late).
_BEFORE_STOP: list[Callable[[], None]] = []


def before_loop_stops(callback: Callable[[], None]) -> Callable[[], None]:
    """Register `callback` to run at exit while our loop still runs (to close what lives on it, such as
    the HTTP sessions of filesystems bound to it); returns it, so it can decorate."""
    _BEFORE_STOP.append(callback)
    return callback


_LOOP = _Loop()
atexit.register(_LOOP.stop)
os.register_at_fork(after_in_child=_LOOP.forget)


def run_sync(fn: Callable[P, Coroutine[Any, Any, R]], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run ``fn(*args, **kwargs)`` on our loop and block until its result (or error)."""
    if _LOOP.is_current_thread():  # checked before the coroutine exists: no "never awaited" warning
        name = getattr(fn, "__qualname__", repr(fn))
        raise BlockingCallOnLoop(
            f"{name}() was called synchronously on the {LOOP_THREAD_NAME} event loop, where it would wait "
            f"for itself forever; await {name}.aio() there instead"
        )
    loop = _LOOP.get()
    call = _BlockingCall(fn(*args, **kwargs))
    try:  # an interrupt as soon as the call is scheduled (before the wait) must cancel it too
        loop.call_soon_threadsafe(call.start)  # the handle copies this thread's context: contextvars travel
        call.finished.acquire()
    except BaseException:  # KeyboardInterrupt and the like: do not leave the coroutine running
        loop.call_soon_threadsafe(call.cancel)
        raise
    return call.outcome()


class _BlockingCall(Generic[R]):
    """One blocking call: a task on our loop that keeps its outcome and releases a plain lock the caller
    waits on, in the task's own step. `asyncio.run_coroutine_threadsafe` chains a `concurrent.futures`
    Future to the task through a done callback (one more turn of the loop): that cost a third of a sync
    call that does little (36 us here, 22 this way; `write_text` is one such call)."""

    __slots__ = ("_coro", "_error", "_result", "_task", "finished")

    def __init__(self, coro: Coroutine[Any, Any, R]):
        self._coro = coro
        self._task: asyncio.Task[None] | None = None
        self._result: R | None = None
        self._error: BaseException | None = None
        #: released (on the loop) once the outcome is kept
        self.finished = threading.Lock()
        self.finished.acquire()

    def start(self) -> None:  # on the loop
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        try:
            self._result = await self._coro
        except BaseException as exc:  # KeyboardInterrupt and SystemExit too: raised again in the caller, never
            self._error = exc  # let out of ``run_forever`` (the loop thread would die, see `_Escaped`)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.finished.release()

    def cancel(self) -> None:  # on the loop, after `start` (callbacks run in the order they were scheduled)
        if self._task is not None:
            self._task.cancel()
        else:  # interrupted before `start` was scheduled: it never runs
            self._coro.close()

    def outcome(self) -> R:  # after `finished`: nothing changes the outcome any more
        error, self._error = self._error, None  # no cycle through the traceback's frames
        if error is not None:
            raise error
        return cast(R, self._result)


async def run_async(coro: Coroutine[Any, Any, R]) -> R:
    """Await `coro` on our loop from whatever loop the caller runs on (directly if that is ours)."""
    loop = _LOOP.get()
    if asyncio.get_running_loop() is loop:
        return await coro
    # cancelling the awaiter cancels the wrapped future, which cancels the task on our loop
    try:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_contained(coro), loop))
    except _Escaped as escaped:
        raise escaped.original from None


class _Escaped(Exception):
    """A `KeyboardInterrupt` or `SystemExit` raised inside a coroutine on our loop (a user's progress
    callback, say), carried to the caller as an ordinary exception and raised again there. asyncio lets
    those two out of ``run_forever``: the loop thread would die and every caller wait forever."""

    def __init__(self, original: BaseException):
        super().__init__(repr(original))
        self.original = original


async def _contained(coro: Coroutine[Any, Any, R]) -> R:
    try:
        return await coro
    except (KeyboardInterrupt, SystemExit) as exc:
        raise _Escaped(exc) from None


class SyncCallable(Generic[P, R]):
    """An async callable made sync: ``f(*args)`` blocks for the result, ``await f.aio(*args)`` awaits it."""

    # set by `functools.update_wrapper`, as on any wrapper function
    __wrapped__: Callable[..., Coroutine[Any, Any, Any]]
    __name__: str

    def __init__(self, fn: Callable[P, Coroutine[Any, Any, R]]):
        self._fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(self._fn, *args, **kwargs)

    def aio(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        """The coroutine, run on the package's loop and awaited from the caller's."""
        return run_async(self._fn(*args, **kwargs))

    def __repr__(self) -> str:
        return f"<sync {self._fn!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # by reference, as pickle treats functions: the wrapper is looked up again where it was found
        # (the function itself cannot be, its qualified name now names the wrapper)
        bound_to = getattr(self._fn, "__self__", None)
        if bound_to is not None:
            return getattr, (bound_to, self._fn.__name__)
        return _resolve, (self._fn.__module__, self._fn.__qualname__)


def _resolve(module: str, qualname: str) -> Any:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


class SyncMethod(Generic[S, P, R]):
    """``@syncify`` on an ``async def`` method: on an instance, a `SyncCallable` bound to it.

    Itself callable with the instance first (``f(obj, ...)``, ``f.aio(obj, ...)``), as the unbound
    wrappers of ``flyte.syncify`` are, so it stands in for one where upstream's class declares it.
    """

    def __init__(self, fn: Callable[Concatenate[S, P], Coroutine[Any, Any, R]]):
        self._fn = fn
        functools.update_wrapper(cast(Any, self), fn)

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> SyncCallable[Concatenate[S, P], R]: ...

    @overload
    def __get__(self, obj: S, owner: type[Any] | None = None) -> SyncCallable[P, R]: ...

    def __get__(self, obj: S | None, owner: type[Any] | None = None) -> Any:
        if obj is None:  # on the class: the caller passes the instance, as with a plain method
            return SyncCallable(self._fn)
        return SyncCallable(self._fn.__get__(obj, owner))

    def __call__(self, obj: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(self._fn, obj, *args, **kwargs)

    def aio(self, obj: S, /, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return run_async(self._fn(obj, *args, **kwargs))


class SyncClassMethod(Generic[P, R]):
    """``@syncify`` over ``@classmethod``: bound to the class it is looked up on (or the instance's).

    Itself callable too (bound to the class that defines it), for the same reason as `SyncMethod`.
    """

    def __init__(self, method: classmethod[Any, P, Coroutine[Any, Any, R]]):
        self._method = method
        self._owner: type[Any] | None = None
        functools.update_wrapper(cast(Any, self), method.__func__)

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._owner = owner

    def __get__(self, obj: object | None, owner: type[Any] | None = None) -> SyncCallable[P, R]:
        return SyncCallable(self._method.__get__(obj, owner))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.__get__(None, self._owner)(*args, **kwargs)

    def aio(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self.__get__(None, self._owner).aio(*args, **kwargs)


# Type checkers see a ``@classmethod`` function as a function whose first parameter is ``type[...]``
# (not as a ``classmethod`` object), so that is what tells the two forms apart.
@overload
def syncify(fn: Callable[Concatenate[type[S], P], Coroutine[Any, Any, R]]) -> SyncClassMethod[P, R]: ...


@overload
def syncify(fn: Callable[Concatenate[S, P], Coroutine[Any, Any, R]]) -> SyncMethod[S, P, R]: ...


def syncify(fn: Any) -> Any:
    """Wrap an ``async def`` method (or a ``@classmethod`` over one) so that it runs as ``f(...)`` and
    ``await f.aio(...)``, both on the package's loop."""
    if isinstance(fn, classmethod):
        return SyncClassMethod(fn)
    if asyncio.iscoroutinefunction(fn):
        return SyncMethod(fn)
    raise TypeError(f"syncify wraps async methods and classmethods, not {fn!r}")
