"""A scope's view of the store's history: the commits and audit events that touched its prefix, with
their paths as the scope names them. Pure but for `newest_matching`, which pages back through a history
read newest first until it has enough."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..._journal.commit_log import Commit
from ..._rules.scope_paths import is_inside, relative

T = TypeVar("T")
#: The first page `newest_matching` reads (then twice as many each time).
FIRST_PAGE = 32


def scoped_commit(prefix: str, commit: Commit) -> Commit | None:
    """`commit` as the scope sees it: its writes and deletes under `prefix`, relative; None if it made
    none there. The transcript is not part of a scope, so its messages are not counted. A commit that
    also changed something outside the scope (other paths, the transcript, store-wide settings) shows no
    actor and reason: they summarize every write of the commit, other scopes' included (one handle serving
    two users), or say why the store's settings changed."""
    wrote = tuple(relative(prefix, p) for p in commit.wrote if is_inside(prefix, p))
    deleted = tuple(relative(prefix, p) for p in commit.deleted if is_inside(prefix, p))
    if not wrote and not deleted:
        return None
    shared = (len(wrote), len(deleted)) != (len(commit.wrote), len(commit.deleted))
    shared = shared or commit.appended > 0 or commit.rewrote or commit.kind == "settings"  # store-wide
    who = {"actor": "", "reason": ""} if shared else {}
    return dataclasses.replace(commit, wrote=wrote, deleted=deleted, appended=0, rewrote=False, **who)


def scoped_event(prefix: str, event: dict[str, Any]) -> dict[str, Any] | None:
    """An audit event as the scope sees it (its path relative), or None if it is about no path under
    `prefix` (a transcript rewrite, a settings change, another scope's file)."""
    path = event.get("path")
    if not isinstance(path, str) or not is_inside(prefix, path):
        return None
    return {**event, "path": relative(prefix, path)}


async def newest_matching(
    read: Callable[[int], Awaitable[list[Any]]], keep: Callable[[Any], T | None], n: int, *, oldest_first: bool
) -> list[T]:
    """The newest `n` items that `keep` maps to something, from `read(k)`, which returns the newest `k`
    items of a history (in its own order); doubles `k` until it has `n` or the history ends."""
    page = max(n, FIRST_PAGE)
    while True:
        items = await read(page)
        newest_first = list(reversed(items)) if oldest_first else items
        kept = [k for item in newest_first if (k := keep(item)) is not None][:n]
        if len(kept) >= n or len(items) < page:
            return list(reversed(kept)) if oldest_first else kept
        page *= 2
