"""The fault injector the suite uses: the one shipped in the conformance kit (`flyteplugins_memory.testing`)."""

from __future__ import annotations

from flyteplugins_memory.testing.faults import KINDS, Faults, FaultyFileSystem, Plan, at_call, at_random, from_call

__all__ = ["KINDS", "Faults", "FaultyFileSystem", "Plan", "at_call", "at_random", "from_call"]
