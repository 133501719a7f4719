"""How the sync `FlyteStorage` runs `AsyncFlyteStorage`'s coroutines: on the adapter's own loop thread
(`adapters._loop`), since Upsonic calls a sync storage from inside its own running loop too, where a
call cannot start a loop."""

from __future__ import annotations

import functools
from typing import Any

from .._loop import AdapterLoop

LOOP = AdapterLoop("flyteplugins-memory-upsonic")


def sync_call(async_class: type, name: str) -> Any:
    """A method `name` running ``self._async.a<name>(...)`` to completion, documented as that coroutine."""
    coroutine_function = getattr(async_class, "a" + name)

    @functools.wraps(coroutine_function)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return LOOP.run(getattr(self._async, "a" + name)(*args, **kwargs))

    call.__name__ = name
    call.__qualname__ = f"FlyteStorage.{name}"
    return call
