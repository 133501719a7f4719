"""The single sync/async convention of the package.

Every I/O operation is written once as ``async def`` and wrapped here: ``f(...)`` runs it synchronously,
``await f.aio(...)`` runs it from async code. Both execute on flyte's shared background loop, so a store's
coroutines never race each other across event loops.
"""

from __future__ import annotations

from flyte.syncify import syncify

__all__ = ["syncify"]
