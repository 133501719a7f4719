"""A fault-injecting fsspec wrapper: storage calls that fail, time out, lose their reply or return short data.

`FaultyFileSystem` wraps a real filesystem and implements exactly the calls the store makes (so a new
kind of call shows up as an AttributeError here, not as an untested path). Every call is numbered; a
`Faults` plan decides, per call, whether and how it misbehaves.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fsspec

from flyteplugins_memory._conditional import create_exclusive

#: fail:       ConnectionResetError before the call reaches storage (transient)
#: timeout:    TimeoutError before the call reaches storage (transient)
#: lost_reply: the call takes effect, then TimeoutError (transient, and ambiguous for writes)
#: truncate:   a read returns only the first half of the object
#: permanent:  PermissionError before the call reaches storage (not retried)
KINDS = ("fail", "timeout", "lost_reply", "truncate", "permanent")

Plan = Callable[[int, str, str], "str | None"]


@dataclass
class Faults:
    """The fault plan shared by every wrapper of one test, and a log of what it did."""

    plan: Plan = lambda number, op, path: None
    calls: int = 0
    injected: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: called after a call whose reply is then lost took effect (to let something happen in between)
    meanwhile: Callable[[], None] = lambda: None
    #: every call and every fault over the whole life of this plan, by kind
    totals: Counter[str] = field(default_factory=Counter)

    def decide(self, op: str, path: str) -> str | None:
        self.calls += 1
        kind = self.plan(self.calls, op, path)
        if kind == "truncate" and op != "read":
            kind = None  # only reads can come back short
        self.totals["calls"] += 1
        if kind:
            self.injected.append((self.calls, op, path, kind))
            self.totals[kind] += 1
        return kind

    def clear(self) -> None:
        self.plan = lambda number, op, path: None


def at_call(number: int, kind: str) -> Plan:
    """Misbehave on storage call `number` only."""
    return lambda n, op, path: kind if n == number else None


def from_call(number: int, kind: str) -> Plan:
    """Misbehave on storage call `number` and every one after it (an outage)."""
    return lambda n, op, path: kind if n >= number else None


def at_random(seed: int, rate: float, kinds: tuple[str, ...] = KINDS) -> Plan:
    """Misbehave on a `rate` share of calls, with a kind drawn from `kinds`; reproducible by `seed`."""
    rng = random.Random(seed)
    return lambda n, op, path: rng.choice(kinds) if rng.random() < rate else None


class FaultyFileSystem:
    """The subset of `fsspec.AbstractFileSystem` the store uses, forwarded to `target` under `faults`."""

    async_impl = False  # the store then makes one call per object, so each can be targeted

    def __init__(self, target: fsspec.AbstractFileSystem, faults: Faults):
        self.target = target
        self.faults = faults

    def _strip_protocol(self, path: str) -> str:
        return self.target._strip_protocol(path)

    def invalidate_cache(self, path: str | None = None) -> None:
        self.target.invalidate_cache(path)

    def cat_file(self, path: str, **kwargs: Any) -> bytes:
        kind = self._before("read", path)
        data = self.target.cat_file(path, **kwargs)
        self._after(kind)
        return data[: len(data) // 2] if kind == "truncate" else data

    def pipe_file(self, path: str, data: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        kind = self._before("write", path)
        if mode == "create":
            if not create_exclusive(self.target, path, data):
                raise FileExistsError(path)
        else:
            self.target.pipe_file(path, data, **kwargs)
        self._after(kind)

    def rm_file(self, path: str) -> None:
        kind = self._before("delete", path)
        self.target.rm_file(path)
        self._after(kind)

    def exists(self, path: str) -> bool:
        kind = self._before("exists", path)
        found = self.target.exists(path)
        self._after(kind)
        return found

    def find(self, path: str, **kwargs: Any) -> Any:
        kind = self._before("list", path)
        found = self.target.find(path, **kwargs)
        self._after(kind)
        return found

    def _before(self, op: str, path: str) -> str | None:
        kind = self.faults.decide(op, path)
        if kind == "fail":
            raise ConnectionResetError(f"injected: connection reset during {op} {path}")
        if kind == "timeout":
            raise TimeoutError(f"injected: {op} {path} timed out")
        if kind == "permanent":
            raise PermissionError(f"injected: {op} {path} forbidden")
        return kind

    def _after(self, kind: str | None) -> None:
        if kind == "lost_reply":
            self.faults.meanwhile()
            raise TimeoutError("injected: the call took effect but its reply was lost")
