"""Upkeep: gc, purge, retention and ttl, read-only prefixes, deleting a store (guide: docs/guide/upkeep.md;
CLI: `cli/_upkeep.py`). The report the guide's page ends with, `store.report()`, is the facade's own: a
page reads the store through the public API only (`_api.report`)."""

from __future__ import annotations

from .deletion import DeletionAPI
from .maintenance import MaintenanceAPI
from .read_only import ReadOnlySettingsAPI
from .retention import RetentionAPI

__all__ = ["UpkeepAPI"]


class UpkeepAPI(MaintenanceAPI, RetentionAPI, ReadOnlySettingsAPI, DeletionAPI):
    """The upkeep family of `MemoryStore`."""
