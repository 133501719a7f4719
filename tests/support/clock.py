"""A clock the model of the whole store moves forward instead of sleeping (`clock` fixture in conftest)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Clock"]


class Clock:
    """`_journal.gc.clock`, moved forward by the model (never by sleeping), and the monotonic time a save compares
    its base's age with (`_journal.commit`): both move together, as they do in a real run, so a handle whose base
    is older than ``STALE_BASE_AFTER`` by the moved clock reads the head before committing (a commit slot gc
    emptied is only free once it is older than ``SLOT_GRACE``, judged by `_journal.gc.clock`)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def __getattr__(self, name: str) -> Any:  # stands in for the `time` module in `_journal.commit`
        return getattr(time, name)

    def monotonic(self) -> float:
        return time.monotonic() + self.offset
