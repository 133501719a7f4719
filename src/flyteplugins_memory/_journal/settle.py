"""Awaiting independent storage steps at once (one round trip instead of one each), and settling them all
before going on: a step that fails must leave nothing of its siblings still running while the caller
cleans up after it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

__all__ = ["settled"]


async def settled(*calls: Awaitable[Any]) -> list[Any]:
    """Await `calls` concurrently; their results in order, or the first failure once every call has
    settled."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    if (error := next((r for r in results if isinstance(r, BaseException)), None)) is not None:
        raise error
    return results
