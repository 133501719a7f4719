"""Pure: the store's retention policy: how many versions of each path, and how old, gc keeps.

It lives in the store-level extensions of the journal (``State.ext["retention"]``: ``keep_last``,
``max_age_seconds`` and ``max_age``), which every record and checkpoint carries forward, the previous
release's (issue 9) included: that release keeps the setting when it saves, but its gc does not apply it. A change is a
commit, so two concurrent changes are a compare-and-swap (the second raises `ConcurrencyError`).

A version is kept if any rule keeps it (as ``restic forget --keep-last --keep-within`` does): it is one of
the newest ``keep_last`` of its path, or younger than ``max_age``, or younger than the gc window (which
protects in-flight readers), or it is the current content of a live path. No policy (both None) keeps
every ``versions/`` snapshot, as before. See docs/decisions/0069-retention-policy-and-ttl.md.

``max_age`` is stored twice: ``max_age_seconds`` (a float, what every earlier release reads) and, exactly,
``max_age`` (timedelta's own ``days``, ``seconds``, ``microseconds``): a float holds 15-16 digits, so a long
age with microseconds (``timedelta.max``) came back rounded past timedelta's range, and was dropped. Readers
take the exact form when it is well formed, else the seconds; seconds beyond timedelta's range (as this
release's first version stored ``timedelta.max``) read as `timedelta.max` (a rule that keeps more, never none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..errors import InvalidRetention
from .codecs import write_event

__all__ = ["RetentionPolicy"]

#: The key of the setting in the store-level ``ext``.
SETTING = "retention"
#: The audit ``op`` of a change of the policy.
AUDIT_OP = "set_retention"


@dataclass(frozen=True)
class RetentionPolicy:
    """A store's retention policy (`MemoryStore.retention`): keep the newest `keep_last` versions of each
    path and/or those younger than `max_age`; None for both keeps every version snapshot."""

    keep_last: int | None = None
    max_age: timedelta | None = None

    @property
    def keeps_everything(self) -> bool:
        return self.keep_last is None and self.max_age is None

    def as_ext(self) -> dict[str, Any]:
        age = self.max_age
        if age is None:
            return {"keep_last": self.keep_last, "max_age_seconds": None, "max_age": None}
        exact = {"days": age.days, "seconds": age.seconds, "microseconds": age.microseconds}
        return {"keep_last": self.keep_last, "max_age_seconds": _readable_seconds(age), "max_age": exact}


def _readable_seconds(age: timedelta) -> float:
    """`age` in seconds as a float that turns back into a timedelta: rounded to whole seconds when the exact
    float rounds past timedelta's range (``timedelta.max``), so an earlier release, which reads only this
    field and drops an age it cannot convert, still applies (almost) the same rule."""
    seconds = age.total_seconds()
    try:
        timedelta(seconds=seconds)
    except OverflowError:
        return float(age.days * 86400 + age.seconds)
    return seconds


def checked_policy(keep_last: object, max_age: object) -> RetentionPolicy:
    """A caller's policy, checked (`InvalidRetention`)."""
    if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1):
        raise InvalidRetention(f"keep_last must be an int >= 1 or None, got {keep_last!r}")
    if max_age is not None and (not isinstance(max_age, timedelta) or max_age <= timedelta(0)):
        raise InvalidRetention(f"max_age must be a positive datetime.timedelta or None, got {max_age!r}")
    return RetentionPolicy(keep_last, max_age)


def persisted_policy(ext: Mapping[str, Any]) -> RetentionPolicy:
    """The policy in a state's `ext`, read leniently (remote data: a malformed rule counts as absent, so a
    hostile value can only make gc keep more, never break an open)."""
    value = ext.get(SETTING)
    if not isinstance(value, dict):
        return RetentionPolicy()
    keep, age = value.get("keep_last"), value.get("max_age_seconds")
    keep_last = keep if isinstance(keep, int) and not isinstance(keep, bool) and keep >= 1 else None
    return RetentionPolicy(keep_last, _exact_age(value.get("max_age")) or _positive_seconds(age))


def _exact_age(value: object) -> timedelta | None:
    """The exact ``max_age`` (``days``, ``seconds``, ``microseconds``: all ints), if well formed and positive."""
    if not isinstance(value, dict):
        return None
    fields = [value.get(name) for name in ("days", "seconds", "microseconds")]
    ints = [f for f in fields if isinstance(f, int) and not isinstance(f, bool)]
    if len(ints) != len(fields):
        return None
    try:
        age = timedelta(days=ints[0], seconds=ints[1], microseconds=ints[2])
    except OverflowError:
        return None  # then the seconds decide
    return age if age > timedelta(0) else None


def _positive_seconds(value: object) -> timedelta | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return None
    try:
        return timedelta(seconds=value)
    except OverflowError:  # beyond timedelta's range (or rounded past it, as timedelta.max is): the longest
        return timedelta.max


def audit_event(before: RetentionPolicy, after: RetentionPolicy, actor: str, reason: str, ts: str) -> dict[str, Any]:
    """The audit event of a change: upstream's fields (no path: it is not a file) plus both policies."""
    event = write_event(
        op=AUDIT_OP, path="", old_sha="", new_sha="", actor=actor, reason=reason, ts=ts, version_file=""
    )
    return {**event, "previous": before.as_ext(), "retention": after.as_ext()}


def journal_span(window: float, policy: RetentionPolicy) -> float:
    """How far back (seconds) gc keeps every committed state: the window, or ``max_age`` if longer."""
    return window if policy.max_age is None else max(window, policy.max_age.total_seconds())


def doomed(
    versions: Sequence[tuple[str, float]], policy: RetentionPolicy, now: float, floor: float, current: str = ""
) -> list[str]:
    """Which of one path's versions (name and time written, newest first) no rule keeps. `current` (the
    live content's version) and versions written at or after `floor` (the gc window) are always kept."""
    if policy.keeps_everything:
        return []
    young = math.inf if policy.max_age is None else now - policy.max_age.total_seconds()
    last = policy.keep_last or 0
    return [
        name
        for rank, (name, at) in enumerate(versions)
        if rank >= last and at < young and at < floor and name != current
    ]
