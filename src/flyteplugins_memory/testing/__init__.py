"""The storage contract as a test kit: prove that a backend (MinIO, R2, Azure ...) holds stores safely.

Subclass `StoreConformance` in a test file and override one fixture, `store_root`, returning a
`StoreRoot` (a URI under which the kit may create stores, and fsspec options for it). See
docs/guide/flyte.md, "Checking your own backend". Needs pytest.
"""

from .conformance import StoreConformance, StoreRoot
from .faults import Faults, FaultyFileSystem, at_call, at_random, from_call

__all__ = ["Faults", "FaultyFileSystem", "StoreConformance", "StoreRoot", "at_call", "at_random", "from_call"]
