"""Pure: checks of the public API's plain arguments (counts, windows, flags, options).

Each refuses a bad value with `InvalidArgument` (a `ValueError`, so ``except ValueError`` keeps working)
before anything is read or written. Paths, keys and messages have their own rules and errors
(`_rules.paths`, `_rules.admission`, `_rules.transcript`); this module holds the rest, so every method checks alike.
``bool`` is refused where an int is asked for: ``log(limit=True)`` is a mistake, not ``limit=1``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from ..errors import InvalidArgument


def check_int(name: str, value: object, *, minimum: int | None = 0) -> int:
    """`value` if it is an int (not a bool) of at least `minimum` (None: any)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"{name} must be at least {minimum}, got {value!r}")
    return value


def check_window(value: object) -> timedelta | None:
    """A retention window: None (the default) or a non-negative `datetime.timedelta`."""
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise InvalidArgument(f"window must be a datetime.timedelta or None, got {value!r}")
    if value < timedelta(0):
        raise InvalidArgument(f"window cannot be negative, got {value!r}")
    return value


def check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a bool, got {value!r}")
    return value


def check_optional_str(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a str or None, got {value!r}")
    return value


def check_prefixes(value: object) -> tuple[str, ...]:
    """``read_only_prefixes``: an iterable of str, not a bare str (whose characters would each become
    a prefix)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidArgument(f"read_only_prefixes must be a tuple of str, got {value!r}")
    prefixes = tuple(value)
    if not all(isinstance(p, str) for p in prefixes):
        raise InvalidArgument(f"read_only_prefixes must hold only str, got {prefixes!r}")
    return prefixes
