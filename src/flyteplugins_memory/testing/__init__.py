"""The storage contract as a test kit: prove that a backend (MinIO, R2, Azure ...) holds stores safely.

Subclass `BackendConformance` in a test file and override one fixture, `store_root`, returning a
`StoreRoot` (a URI under which the kit may create stores, and fsspec options for it). See
docs/guide/flyte.md, "Checking your own backend". Needs pytest.
"""

import warnings
from typing import Any

from .conformance import BackendConformance, StoreRoot
from .faults import Faults, FaultyFileSystem, at_call, at_random, from_call

__all__ = ["BackendConformance", "Faults", "FaultyFileSystem", "StoreRoot", "at_call", "at_random", "from_call"]

#: old names kept for a release, each with its new one
_RENAMED = {"StoreConformance": "BackendConformance"}


def __getattr__(name: str) -> Any:
    """`StoreConformance` (the kit's name before 0.5): the same class, with a `DeprecationWarning`."""
    if name in _RENAMED:
        warnings.warn(
            f"flyteplugins_memory.testing.{name} is now {_RENAMED[name]}; the old name goes in a later release",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
