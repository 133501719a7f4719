"""An adapter's own event loop thread, for adapters whose framework calls a sync API from inside its own
running loop (LangGraph's sync nodes under an async graph, Upsonic's sync storage), where a call cannot
start a loop of its own: each coroutine is handed to the thread and waited for (`run`) or awaited from
the caller's loop (`submit`, then ``asyncio.wrap_future``). One loop per adapter also keeps its handle
and locks on one loop, whatever loops its callers run. Context variables (flyte's task context, which
names the storage root of a key) travel with each call.

Cancelling what `submit` returned (an awaiting caller cancelled) cancels the coroutine's task on the
loop; the coroutine decides what a cancellation at each of its awaits means (LangGraph's batch: dropped
while it waits its turn, finished when its save is in flight).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from concurrent.futures import InvalidStateError as _SettledAlready
from typing import Any, TypeVar

from flyteplugins_memory import BlockingCallOnLoop

T = TypeVar("T")


class AdapterLoop:
    """The loop thread named `name`, started on first use (and again in a child process after a fork)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Start `coro` on the loop, in the caller's context; its outcome is the returned future's.
        Cancelling that future cancels the coroutine's task."""
        loop = self._started()
        context = contextvars.copy_context()
        done: Future[T] = Future()

        def finish(task: asyncio.Task[T]) -> None:
            try:
                if task.cancelled():
                    done.cancel()
                elif (error := task.exception()) is not None:
                    done.set_exception(error)
                else:
                    done.set_result(task.result())
            except _SettledAlready:  # the caller cancelled `done` meanwhile: nobody waits for the outcome
                pass

        def start() -> None:
            if done.cancelled():  # cancelled before it started: never run
                coro.close()
                return
            task = loop.create_task(coro, context=context)
            task.add_done_callback(finish)
            done.add_done_callback(lambda f: f.cancelled() and loop.call_soon_threadsafe(task.cancel))

        loop.call_soon_threadsafe(start)
        return done

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """`coro`'s result, waited for from a thread other than the loop's (from the loop it would wait on
        itself: `BlockingCallOnLoop`)."""
        if self.on_loop():
            coro.close()
            raise BlockingCallOnLoop(f"a sync call on {self.name}'s own loop would wait on itself: await it there")
        return self.submit(coro).result()

    def on_loop(self) -> bool:
        """Whether the caller runs on this loop (one of its own coroutines)."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                threading.Thread(target=self._loop.run_forever, name=self.name, daemon=True).start()
            return self._loop
