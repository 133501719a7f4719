"""How many storage requests are in flight at once: start high, halve on throttling, grow back slowly.

On real object storage an operation costs its sequential round trips, so a bulk call (a first save of
1,000 files, its sidecars) should issue everything at once; a fixed width of N turns it into 1,000/N round
trips. But a server that is overwhelmed says so (S3 ``SlowDown``/503, GCS 429/503), and hammering it
then only earns more refusals. So each filesystem, per event loop, has an `AdaptiveLimit` (AIMD, as TCP's
congestion window): it starts at the process's ceiling (`set_max_in_flight`, default `DEFAULT_MAX_IN_FLIGHT`),
halves once per round of throttling replies (the requests already in flight when it halved do not halve
it again), and grows by one after each `limit` requests answered without throttling, back up to the
ceiling. The retry policy (`_base.retry`) still retries the throttled request itself, after its backoff.
docs/decisions/0145-adaptive-concurrency-for-bulk-calls.md says why these numbers.
"""

from __future__ import annotations

import asyncio
import errno
import weakref
from collections import deque

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "AdaptiveLimit",
    "get_max_in_flight",
    "is_throttling",
    "limit_for",
    "set_max_in_flight",
]

#: Requests in flight at once per filesystem and event loop, at most: a 1,000-file save's uploads go in one
#: round trip (fsspec's own batch for calls that open no local file is 1,280).
DEFAULT_MAX_IN_FLIGHT = 1024
_ceiling = DEFAULT_MAX_IN_FLIGHT

#: Words and statuses in which backends say "too many requests": S3 (``SlowDown``, "reduce your request
#: rate", 503; s3fs raises ``OSError(EBUSY)`` once its own retries of them are spent), GCS (429, 503,
#: ``rateLimitExceeded``), obstore ("status code: 503").
_THROTTLING_WORDS = (
    "SlowDown",
    "reduce your request rate",
    "rateLimitExceeded",
    "TooManyRequests",
    "status code: 429",
    "status code: 503",
)
_THROTTLING_STATUS = frozenset({429, 503})
#: Errors about one object, whose text names it: never read for throttling words.
_NAMING_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


def get_max_in_flight() -> int:
    """The most storage requests one filesystem has in flight at once in this process."""
    return _ceiling


def set_max_in_flight(limit: int) -> int:
    """Let at most `limit` storage requests per filesystem (and event loop) be in flight at once in this
    process (default `DEFAULT_MAX_IN_FLIGHT`; the width backs off below it when the backend throttles);
    returns the previous setting. Takes effect for limits made from now on (a new event loop, a new
    filesystem) and lowers the current ones."""
    global _ceiling  # one setting per process, as the retry policy
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"max_in_flight must be a positive int, got {limit!r}")
    previous, _ceiling = _ceiling, limit
    for limits in list(_LIMITS.values()):
        for adaptive in list(limits.values()):
            adaptive.ceiling = limit
            adaptive.limit = min(adaptive.limit, limit)
    return previous


def is_throttling(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it was raised from) is a backend asking for fewer requests."""
    current: BaseException | None = exc
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.EBUSY:
            return True
        status = getattr(current, "code", None) or getattr(current, "status", None)
        if isinstance(status, int) and status in _THROTTLING_STATUS:
            return True
        response = getattr(current, "response", None)
        metadata = response.get("ResponseMetadata") or {} if isinstance(response, dict) else {}
        if metadata.get("HTTPStatusCode") in _THROTTLING_STATUS:
            return True
        # a backend's words, not a missing or refused object's name (``SlowDown.md`` is no throttling)
        text = "" if isinstance(current, _NAMING_ERRORS) else str(current)
        if any(word in text for word in _THROTTLING_WORDS):
            return True
        current = current.__cause__
    return False


class AdaptiveLimit:
    """A bound on requests in flight that halves on throttling and grows back by one per `limit` answers."""

    def __init__(self, ceiling: int):
        self.ceiling = ceiling
        self.limit = ceiling
        self.in_flight = 0
        #: how many times it halved (for tests and logs)
        self.cuts = 0
        #: the lowest limit it came down to
        self.lowest = ceiling
        self._round = 0  # bumped at each halving: replies to requests sent before it do not halve again
        self._answered = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> int:
        """Wait for a slot; returns the round the request starts in (give it back to `release`)."""
        if self.in_flight < self.limit and not self._waiting:
            self.in_flight += 1
            return self._round
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(granted)
        try:
            await granted  # `_grant` counted it in flight
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # granted just before the cancel: give it back
                self.in_flight -= 1
                self._grant()
            elif granted in self._waiting:  # `_grant` may have popped it (cancelled, so skipped) already
                self._waiting.remove(granted)
            raise
        return self._round

    def release(self, started: int, *, throttled: bool) -> None:
        """A request that started in round `started` was answered (`throttled`: with a throttling reply)."""
        self.in_flight -= 1
        if throttled:
            if started == self._round:
                self.limit = max(1, self.limit // 2)
                self.lowest = min(self.lowest, self.limit)
                self._round += 1
                self._answered = 0
                self.cuts += 1
        elif self.limit < self.ceiling:
            self._answered += 1
            if self._answered >= self.limit:
                self.limit += 1
                self._answered = 0
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self.in_flight < self.limit:
            granted = self._waiting.popleft()
            if not granted.done():
                self.in_flight += 1
                granted.set_result(None)


#: Each filesystem's limits, by event loop (a limit's waiters belong to one loop).
_LIMITS: weakref.WeakKeyDictionary[object, weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AdaptiveLimit]] = (
    weakref.WeakKeyDictionary()
)


def limit_for(fs: object) -> AdaptiveLimit:
    """The limit of filesystem `fs` on the running event loop."""
    loop = asyncio.get_running_loop()
    limits = _LIMITS.get(fs)
    if limits is None:
        limits = _LIMITS[fs] = weakref.WeakKeyDictionary()
    limit = limits.get(loop)
    if limit is None:
        limit = limits[loop] = AdaptiveLimit(_ceiling)
    return limit
