"""Pure: a file's time to live. A write with ``ttl`` records when the file expires in its journal entry's
``ext`` (``expires_at``, seconds since the epoch); after that every handle reads the path as missing. A
rewrite without ``ttl`` makes a new entry, whose ``ext`` holds no expiry: the file lives on."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from ..errors import InvalidRetention
from .journal_objects import FileEntry

#: The key of a file entry's expiry in its ``ext``.
EXPIRES_AT = "expires_at"
#: The audit ``op`` and ``reason`` of the deletion of an expired file (by gc, or by a write it was in the
#: way of).
AUDIT_OP = "expired"
EXPIRED_REASON = "ttl expired"


def check_ttl(ttl: object) -> timedelta | None:
    """A write's ``ttl``: None (lives until deleted) or a positive `datetime.timedelta`."""
    if ttl is None:
        return None
    if not isinstance(ttl, timedelta):
        raise InvalidRetention(f"ttl must be a datetime.timedelta or None, got {ttl!r}")
    if ttl <= timedelta(0):
        raise InvalidRetention(f"ttl must be positive, got {ttl!r}")
    return ttl


def expiry_ext(ttl: timedelta | None, now: float) -> dict[str, Any] | None:
    """The ``ext`` items a write with `ttl` at `now` records (None: none)."""
    return None if ttl is None else {EXPIRES_AT: now + ttl.total_seconds()}


def expires_at(entry: FileEntry) -> float | None:
    """When `entry` expires, read leniently (remote data: anything but a finite number means never)."""
    value = entry.ext.get(EXPIRES_AT)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def is_expired(entry: FileEntry | None, now: float) -> bool:
    if entry is None:
        return False
    when = expires_at(entry)
    return when is not None and when <= now
