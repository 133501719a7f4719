"""How `FlyteStore` runs batches that arrive together (`FlyteStore._batch`): each waits as a `Pending` for
its turn, a group's save runs to its end even when a caller is cancelled (`to_the_end`), and each batch is
given its outcome unless its caller stopped waiting (`settle`, `forget`)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import Op, PutOp, Result

__all__ = ["Pending", "forget", "settle", "to_the_end"]


async def to_the_end(coro: Coroutine[Any, Any, None]) -> None:
    """Await `coro`; cancelled meanwhile, let it finish first (a group's save is never cut off halfway, and
    the lock is not released while it runs), then raise the cancellation."""
    task = asyncio.ensure_future(coro)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:
                continue
        if not task.cancelled():
            task.exception()  # retrieved: the group's outcome reached its callers already
        raise


def settle(
    done: asyncio.Future[list[Result]], results: list[Result] | None = None, *, error: Exception | None = None
) -> None:
    """Give a batch its outcome, unless its caller was cancelled meanwhile (then nobody waits for it)."""
    if done.done():
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(results or [])


def forget(done: asyncio.Future[list[Result]]) -> None:
    """A cancelled caller's outcome: cancelled if not there yet, retrieved if it is (never logged as lost)."""
    if not done.done():
        done.cancel()
    elif not done.cancelled():
        done.exception()


@dataclass
class Pending:
    """A batch waiting for its turn: its ops, its puts (the last per item), and its result to come."""

    ops: list[Op]
    puts: dict[tuple[tuple[str, ...], str], PutOp]
    done: asyncio.Future[list[Result]]
