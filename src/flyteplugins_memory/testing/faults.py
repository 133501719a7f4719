"""A fault-injecting fsspec wrapper: storage calls that fail, time out, lose their reply or return short data.

`FaultyFileSystem` wraps a real filesystem and implements exactly the calls the store makes (so a new
kind of call shows up as an error here, not as an untested path). It is an async filesystem, so the store
awaits it like s3fs and runs its bulk paths (``read_many``, ``write_many``, ``remove_all``) concurrently
through it; blocking targets run in a worker thread, async ones are awaited on the running loop. Every
call is numbered in the order it starts; a `Faults` plan decides, per call, whether and how it misbehaves.
The store treats the wrapper exactly as the filesystem it wraps (`storage._registry.FORWARDING_WRAPPERS`).

The same plan counts round trips: every call is logged with its "wave", the length of the longest chain of
calls, each started after the one before it ended, that ends with it. On real object storage an operation
costs about its number of waves times the latency of one request, however many requests each wave holds,
so a test that asserts waves (`Faults.measure`) fails on a change that adds a sequential round trip, while
the machine's speed cannot make it flaky: waves are counted from the order calls start and end, not timed.
"""

from __future__ import annotations

import asyncio
import errno
import random
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import fsspec
from fsspec.asyn import AsyncFileSystem

from ..storage._conditional import create_exclusive, create_exclusive_async
from ..storage._fsio import bound_to_running_loop

__all__ = [
    "KINDS",
    "THROTTLE",
    "Call",
    "Faults",
    "FaultyFileSystem",
    "Measured",
    "Plan",
    "at_call",
    "at_random",
    "from_call",
]

#: fail:       ConnectionResetError before the call reaches storage (transient)
#: timeout:    TimeoutError before the call reaches storage (transient)
#: lost_reply: the call takes effect, then TimeoutError (transient, and ambiguous for writes)
#: truncate:   a read returns only the first half of the object
#: permanent:  PermissionError before the call reaches storage (not retried)
KINDS = ("fail", "timeout", "lost_reply", "truncate", "permanent")
#: throttle:   the backend's "slow down" before the call reaches storage: ``OSError(EBUSY)``, what s3fs raises
#:             once its own retries of S3's SlowDown/503 are spent (transient; bulk calls back off on it).
#:             Not among `KINDS`, so the random plans of existing seeds stay as they were.
THROTTLE = "throttle"

#: Given a call's number (from 1), its kind (read, write, delete, exists, list) and its path: the fault, or None.
Plan = Callable[[int, str, str], "str | None"]


@dataclass(frozen=True)
class Call:
    """One storage call as the wrapper saw it: its kind, its path and its wave (1 = issued first)."""

    op: str
    path: str
    wave: int


@dataclass
class Measured:
    """The calls made inside one `Faults.measure` block."""

    #: the highest wave answered before the block began: waves inside it are counted from there
    base: int = 0
    calls: list[Call] = field(default_factory=list)

    @property
    def requests(self) -> int:
        """How many storage calls were made."""
        return len(self.calls)

    @property
    def waves(self) -> int:
        """How many sequential round trips they took (0 if none)."""
        return max((call.wave for call in self.calls), default=0)

    def in_wave(self, wave: int) -> list[Call]:
        """The calls of one wave, in the order they started."""
        return [call for call in self.calls if call.wave == wave]

    def describe(self) -> str:
        """The calls wave by wave, one line each: for an assertion's message."""
        return "\n".join(
            f"wave {wave}: " + ", ".join(f"{call.op} {call.path}" for call in self.in_wave(wave))
            for wave in range(1, self.waves + 1)
        )


def _no_fault(number: int, op: str, path: str) -> str | None:
    return None


@dataclass(eq=False)
class Faults:
    """The fault plan shared by every wrapper of one test, and a log of what it did."""

    plan: Plan = _no_fault
    calls: int = 0
    injected: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: called (in a worker thread) after a call whose reply is then lost took effect, to let something
    #: happen in between; it may use the store's synchronous API
    meanwhile: Callable[[], None] = lambda: None
    #: every call and every fault over the whole life of this plan, by kind
    totals: Counter[str] = field(default_factory=Counter)
    #: calls forwarded to storage and not yet answered, and the most there ever were at once
    in_flight: int = 0
    peak: int = 0
    #: seconds each forwarded call waits before it reaches storage (0: none), so that calls issued together
    #: are plainly in flight together, as they are against storage with real latency
    latency: float = 0.0
    #: the highest wave of any call answered so far (see the module docstring), and the open measurements
    answered_wave: int = 0
    measuring: list[Measured] = field(default_factory=list)

    def started(self, op: str, path: str) -> int:
        """Log a call that starts now; its wave."""
        wave = self.answered_wave + 1
        for measured in self.measuring:
            measured.calls.append(Call(op, path, wave - measured.base))
        return wave

    def answered(self, wave: int) -> None:
        self.answered_wave = max(self.answered_wave, wave)

    @contextmanager
    def measure(self) -> Iterator[Measured]:
        """Count the calls made inside the block and their waves, numbered from 1 within it."""
        measured = Measured(base=self.answered_wave)
        self.measuring.append(measured)
        try:
            yield measured
        finally:
            self.measuring.remove(measured)

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

    def arm(self, plan: Plan) -> None:
        """Start counting calls from 1 again, under `plan`."""
        self.calls, self.injected, self.plan = 0, [], plan

    def clear(self) -> None:
        self.plan = _no_fault


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


class FaultyFileSystem(AsyncFileSystem):
    """The calls of `fsspec.AbstractFileSystem` the store makes, forwarded to `target` under `faults`."""

    cachable = False  # every wrapper is its own: two plans must never share one

    def __init__(self, target: fsspec.AbstractFileSystem, faults: Faults, **kwargs: Any):
        super().__init__(**kwargs)
        self.target = target
        self.faults = faults

    def _strip_protocol(self, path: str) -> str:  # type: ignore[override]
        return cast(str, self.target._strip_protocol(path))

    def invalidate_cache(self, path: str | None = None) -> None:
        self.target.invalidate_cache(path)

    async def _cat_file(self, path: str, start: Any = None, end: Any = None, **kwargs: Any) -> bytes:
        kind, data = await self._through("read", path, self._forward("cat_file", path, start=start, end=end))
        return data[: len(data) // 2] if kind == "truncate" else data

    async def _pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if mode == "create":
            _, created = await self._through("write", path, self._create(path, value))
            if not created:
                raise FileExistsError(path)
        else:
            await self._through("write", path, self._forward("pipe_file", path, value))

    async def _rm_file(self, path: str, **kwargs: Any) -> Any:
        await self._through("delete", path, self._forward("rm_file", path))

    async def _exists(self, path: str, **kwargs: Any) -> bool:
        return (await self._through("exists", path, self._forward("exists", path)))[1]

    async def _find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, **kwargs: Any) -> Any:
        call = self._forward("find", path, maxdepth=maxdepth, withdirs=withdirs, **kwargs)
        return (await self._through("list", path, call))[1]

    async def _through(self, op: str, path: str, call: Coroutine[Any, Any, Any]) -> tuple[str | None, Any]:
        """Decide the fault before the first await (so calls are numbered in the order they start), then
        forward the call unless the fault stops it; returns the fault and the call's result."""
        try:
            kind = self._before(op, path)
        except Exception:
            call.close()
            raise
        wave = self.faults.started(op, path)
        self.faults.in_flight += 1
        self.faults.peak = max(self.faults.peak, self.faults.in_flight)
        try:
            if self.faults.latency:
                await asyncio.sleep(self.faults.latency)
            result = await call
        finally:
            self.faults.in_flight -= 1
            self.faults.answered(wave)
        await self._after(kind)
        return kind, result

    async def _forward(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if getattr(self.target, "async_impl", False):
            return await getattr(bound_to_running_loop(self.target), "_" + method)(*args, **kwargs)
        return await asyncio.to_thread(getattr(self.target, method), *args, **kwargs)

    async def _create(self, path: str, data: bytes) -> bool:
        """The target's own create-only write, so the wrapper is exactly as atomic as the target."""
        if getattr(self.target, "async_impl", False):
            return await create_exclusive_async(bound_to_running_loop(self.target), path, data)
        return await asyncio.to_thread(create_exclusive, self.target, path, data)

    def _before(self, op: str, path: str) -> str | None:
        kind = self.faults.decide(op, path)
        if kind == "fail":
            raise ConnectionResetError(f"injected: connection reset during {op} {path}")
        if kind == "timeout":
            raise TimeoutError(f"injected: {op} {path} timed out")
        if kind == "permanent":
            raise PermissionError(f"injected: {op} {path} forbidden")
        if kind == THROTTLE:
            raise OSError(errno.EBUSY, f"injected: SlowDown, please reduce your request rate ({op} {path})")
        return kind

    async def _after(self, kind: str | None) -> None:
        if kind == "lost_reply":
            await asyncio.to_thread(self.faults.meanwhile)
            raise TimeoutError("injected: the call took effect but its reply was lost")
