"""The adapter's own event loop thread: every op of a `FlyteStore` runs there, sync or async.

LangGraph calls a store's sync methods from inside a running loop too (a sync node or tool under an
async graph), where a call cannot start a loop of its own; and one adapter used from two loops would
share its handle and lock across them. So `batch` waits for the coroutine on this loop, and `abatch`
awaits the same future from the caller's loop. Context variables (flyte's task context, which names the
storage root of a key) travel with each call.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class AdapterLoop:
    """The loop thread, started on first use (and again in a child process after a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        loop = self._started()
        context = contextvars.copy_context()
        done: Future[T] = Future()

        def finish(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        loop.call_soon_threadsafe(lambda: loop.create_task(coro, context=context).add_done_callback(finish))
        return done

    def on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                name = "flyteplugins-memory-langgraph"
                threading.Thread(target=self._loop.run_forever, name=name, daemon=True).start()
            return self._loop


LOOP = AdapterLoop()
