"""How the sync `FlyteStorage` runs `AsyncFlyteStorage`'s coroutines: on one event loop of its own.

Upsonic calls a sync storage from inside its own running loop too, where a call cannot start a loop, so
every sync call is handed to a background loop thread and waited for. Context variables (flyte's task
context, which names the storage root of a key) travel with each call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import os
import threading
from collections.abc import Coroutine
from typing import Any


class AdapterLoop:
    """The loop thread, started on first use (and again in a child process after a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        loop = self._started()
        context = contextvars.copy_context()
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def finish(task: asyncio.Task[Any]) -> None:
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        loop.call_soon_threadsafe(lambda: loop.create_task(coro, context=context).add_done_callback(finish))
        return done.result()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                name = "flyteplugins-memory-upsonic"
                threading.Thread(target=self._loop.run_forever, name=name, daemon=True).start()
            return self._loop


LOOP = AdapterLoop()


def sync_call(async_class: type, name: str) -> Any:
    """A method `name` running ``self._async.a<name>(...)`` to completion, documented as that coroutine."""
    coroutine_function = getattr(async_class, "a" + name)

    @functools.wraps(coroutine_function)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return LOOP.run(getattr(self._async, "a" + name)(*args, **kwargs))

    call.__name__ = name
    call.__qualname__ = f"FlyteStorage.{name}"
    return call
