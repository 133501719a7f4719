"""CPU work off the event loop: large parses and hashes run in a thread, small ones inline.

Validating a large checkpoint (pydantic, hundreds of ms for a big store) or hashing a 100 MB write holds
the loop that every coroutine of the package shares, so nothing else (another handle's save, a
heartbeat) moves meanwhile. A thread costs about 50 us, more than parsing or hashing a small object, so
only work on at least `OFF_LOOP_BYTES` moves. ``hashlib`` releases the GIL on large buffers; pydantic
does not, but the interpreter still switches threads every few ms, so the loop keeps ticking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from pydantic import BaseModel

from .codecs import sha256_bytes
from .journal_objects import parse

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)

#: Inputs at least this large (bytes, or characters of text) are processed in a thread.
OFF_LOOP_BYTES = 256 * 1024


async def off_loop(size: int, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)``, in a thread if `size` (of its input) is at least `OFF_LOOP_BYTES`."""
    if size < OFF_LOOP_BYTES:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


async def parse_off_loop(model: type[M], data: bytes, name: str) -> M:
    """`_rules.journal_objects.parse` of a journal model (strict, typed errors), off the loop for large objects."""
    return await off_loop(len(data), _parse, model, data, name)


def _parse(model: type[M], data: bytes, name: str) -> M:
    parsed: M = parse(cast(Any, model), data, name)
    return parsed


async def sha256_off_loop(data: bytes) -> str:
    """The sha256 of `data`, off the loop for large payloads."""
    return await off_loop(len(data), sha256_bytes, data)
