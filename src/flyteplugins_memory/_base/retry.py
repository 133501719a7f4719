"""Retrying transient storage failures: bounded, jittered exponential backoff around every storage call.

Every call the store makes to storage is idempotent or made safe to repeat: reads, listings and deletes
are; uploads write content-addressed or fully determined bytes; and a create-only commit that landed
but whose answer was lost is recognised on the retry by its commit id. So a call that failed
transiently (timeout, dropped connection, throttling, a 5xx) is simply made again, up to the policy's
attempts; any other failure, or the last attempt's, surfaces as `StorageError`.

s3fs and gcsfs retry some errors on their own before we see them; this policy adds to theirs.
"""

from __future__ import annotations

import errno
import random
from dataclasses import dataclass

__all__ = ["RetryPolicy", "get_retry_policy", "set_retry_policy"]

#: OS error numbers that name a passing condition (busy, throttled, timed out, connection lost).
_TRANSIENT_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EAGAIN", "EBUSY", "ETIMEDOUT", "ECONNRESET", "ECONNABORTED", "ECONNREFUSED", "EPIPE", "EREMOTEIO")
    if hasattr(errno, name)
)
#: HTTP statuses that ask the client to come back later.
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: Exception class names of HTTP client libraries (aiohttp, botocore, gcsfs) for transport failures;
#: matched by name so this module imports none of them.
_TRANSIENT_NAMES = frozenset(
    {
        "ClientConnectionError",
        "ClientOSError",
        "ClientPayloadError",
        "ConnectTimeoutError",
        "ConnectionClosedError",
        "EndpointConnectionError",
        "IncompleteRead",
        "ReadTimeoutError",
        "ResponseStreamingError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
    }
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often, and how patiently, a transient storage failure is retried.

    The n-th retry waits up to ``min(initial_delay * multiplier ** (n - 1), max_delay)`` seconds
    (a uniformly random part of it with `jitter`, so racing processes spread out). The worst case for
    one storage call is therefore bounded by `attempts` tries and the sum of `max_wait`.

    Args:
        attempts: Tries per storage call, the first included; 1 disables retrying.
        initial_delay: Upper bound of the first wait, in seconds.
        max_delay: Upper bound of any single wait, in seconds.
        multiplier: Growth of the bound from one retry to the next.
        jitter: Wait a random time up to the bound ("full jitter") instead of exactly the bound.
    """

    attempts: int = 5
    initial_delay: float = 0.1
    max_delay: float = 5.0
    multiplier: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("RetryPolicy delays must be non-negative and multiplier at least 1")

    def bound(self, retry: int) -> float:
        """The longest wait before retry number `retry` (1-based)."""
        return min(self.initial_delay * self.multiplier ** (retry - 1), self.max_delay)

    def delay(self, retry: int) -> float:
        """The wait before retry number `retry`: its bound, or a random part of it with `jitter`."""
        bound = self.bound(retry)
        return random.uniform(0, bound) if self.jitter else bound

    @property
    def max_wait(self) -> float:
        """The most time one storage call can spend waiting between its attempts."""
        return sum(self.bound(n) for n in range(1, self.attempts))


_policy = RetryPolicy()


def get_retry_policy() -> RetryPolicy:
    """The policy every store in this process uses."""
    return _policy


def set_retry_policy(policy: RetryPolicy) -> RetryPolicy:
    """Use `policy` for every storage call of every store in this process; returns the previous one."""
    global _policy
    if not isinstance(policy, RetryPolicy):
        raise TypeError(f"Expected a RetryPolicy, got {type(policy).__name__}")
    previous, _policy = _policy, policy
    return previous


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` is a failure that may pass if the call is repeated.

    Follows explicit wrapping (``raise ... from``) inward; the first exception in that chain that is
    clearly permanent (missing, exists, forbidden) or clearly transient decides.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _PERMANENT):
            return False
        if _is_transient_one(current):
            return True
        current = current.__cause__
    return False


_PERMANENT = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)


def _is_transient_one(exc: BaseException) -> bool:
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    if type(exc).__name__ in _TRANSIENT_NAMES:
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    status = getattr(exc, "code", None) or getattr(exc, "status", None)
    return isinstance(status, int) and status in _TRANSIENT_STATUS
