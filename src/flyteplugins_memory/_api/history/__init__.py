"""History and time travel: the commit log, each path's versions, restore, diff, and the store as
of a commit (guide: docs/guide/history.md; CLI: `cli/_history.py`, `cli/_versions.py`)."""

from __future__ import annotations

from .time_travel import TimeTravelAPI
from .versions import VersionsAPI

__all__ = ["HistoryAPI"]


class HistoryAPI(VersionsAPI, TimeTravelAPI):
    """The history family of `MemoryStore`."""
