"""Files whose ttl ran out leave the store: gc commits their deletion, audited as op ``expired``, through a
session of its own (the calling handle's unsaved changes are not saved with it), then removes what
upstream's layout holds of them (the file, its sidecar, the ``versions/`` snapshots of the expired content).

In that order, so a commit that loses to a concurrent rewrite of the path (`ConcurrencyError`, logged; the
next gc tries again) has removed nothing of the rewrite. A pending-expiry marker written before the commit
(`_journal.expiry_pending`) makes a gc that dies after it safe to repeat: the next one finds the marker and finishes
the removal for every path its newest state no longer holds; one that dies before it finds the files
expired again. Expired files are never read again, so nothing a live state needs goes. Finding them loads
the whole file index (O(files), as gc's own pass over the checkpoints does); saves never pay for it. See
docs/decisions/0069 and 0073.
"""

from __future__ import annotations

import logging
import pathlib
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ..._handle.checkout import Checkout
from ..._handle.working_copy import WorkingCopy
from ..._journal.expiry_pending import read_pending, unfinished, upstream_copies, write_pending
from ..._journal.snapshot_retention import Expired, expired_snapshots
from ..._rules.index import Files
from ..._rules.operations import Expire
from ..._rules.purge_count import counted
from ..._rules.ttl import EXPIRED_REASON, is_expired
from ..._rules.writes import ChangeOptions, plan_delete
from ...errors import ConcurrencyError
from ...storage._contract import ObjectStorage

logger = logging.getLogger(__name__)

#: Who and why the expiry commit records.
ACTOR, REASON = "gc", EXPIRED_REASON


class _Holder:
    """The transcript holder a private session needs: the committed transcript, left as it is."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.audit = True


@dataclass(frozen=True)
class Expiry:
    """What an expiry pass deleted (or, dry, would delete): the files, the snapshots of their content (and
    of files an earlier gc expired but could not finish), and the tombstone snapshots (name -> when) its
    commit writes, which the policy pass of a dry run must rank as the real one will."""

    paths: tuple[str, ...] = ()
    snapshots: dict[str, int] = field(default_factory=dict)
    tombstones: dict[str, float] = field(default_factory=dict)

    def as_policy_sees_it(self) -> Expired:
        """What the retention policy of a dry run must see as already done (the real gc's sees it done)."""
        return Expired(frozenset(self.paths), frozenset(self.snapshots), dict(self.tombstones))


async def expire_files(remote_path: str, now: float, *, keep_versions: bool, dry_run: bool) -> Expiry:
    """Delete (one commit) every file of the store at `remote_path` whose ttl ran out by `now`, then the
    upstream copies and snapshots of their content. With `dry_run`, only finds them. A concurrent save
    that rewrote one of them wins: this commit is dropped (`ConcurrencyError`, logged) and the next gc
    tries again."""
    with tempfile.TemporaryDirectory(prefix="flyte_agent_mem_gc_") as root:
        session = Checkout(pathlib.Path(root), private=True, remote_path=remote_path, resolve=lambda: remote_path)
        holder = _Holder()
        try:
            return await _expire(session, holder, now, keep_versions=keep_versions, dry_run=dry_run)
        finally:
            await session.working_copy.mirror.settled()


async def _expire(session: Checkout, holder: _Holder, now: float, *, keep_versions: bool, dry_run: bool) -> Expiry:
    if not await session.open(holder):
        return Expiry()
    async with session.lock:
        view, remote = session.working_copy, session.remote()
        await view.need_under("")
        pending = await read_pending(remote)
        left = unfinished(pending.values(), view.base.files)  # expired by a gc that died before finishing
        shas = _expired(view.base.files, now)
        left_snapshots, snapshots = await expired_snapshots(remote, left), await expired_snapshots(remote, shas)
        options = ChangeOptions(ACTOR, REASON, None, keep_versions, True)
        if dry_run:
            tombstones = _tombstones(view, shas, options)
            return Expiry(tuple(sorted(shas)), {**left_snapshots, **snapshots}, tombstones)
        own = await _commit_expiry(session, holder, shas, options, now) if shas else ""
        if own is None:  # lost to a concurrent save: only what earlier gcs left goes
            await _finish(remote, left, left_snapshots, [])
            return Expiry(snapshots=left_snapshots)
        await _finish(remote, {**left, **shas}, {**left_snapshots, **snapshots}, [*pending, own])
    return Expiry(tuple(sorted(shas)), {**left_snapshots, **snapshots})


async def _commit_expiry(
    session: Checkout, holder: _Holder, shas: dict[str, str], options: ChangeOptions, now: float
) -> str | None:
    """Commit the deletion of the paths of `shas`, marked pending first; the marker's name, or None if
    the commit lost to a concurrent save (then nothing of it is pending)."""
    remote = session.remote()
    marker = await write_pending(remote, shas)
    for path in sorted(shas):
        await session.working_copy.expire(path, options, now)
    # gc removes the expired content's stored copies and labels as a purge does: counted like one, so a
    # handle that holds them (a checkpoint, its search cache) drops them before its next save
    counted(session.working_copy)
    try:
        await session._commit(holder, Expire(), actor=ACTOR, reason=REASON)
    except ConcurrencyError as exc:
        logger.warning("gc() could not delete expired files of %s (the next gc retries): %s", remote.uri, exc)
        await remote.remove_all([marker])
        return None
    return marker


async def _finish(remote: ObjectStorage, paths: dict[str, str], snapshots: dict[str, int], markers: list[str]) -> None:
    """Remove upstream's copies of `paths`, whose deletion committed (the commit's own projection removed
    the file and sidecar already, unless it failed or a gc died first), then the `markers` that named them."""
    await remote.remove_all(sorted(snapshots) + upstream_copies(paths))
    await remote.remove_all(sorted(m for m in markers if m))


def _tombstones(view: WorkingCopy, shas: dict[str, str], options: ChangeOptions) -> dict[str, float]:
    """The tombstone snapshots the expiry commit would write (with `keep_versions`), as a dry run names them."""
    if not options.keep_versions:
        return {}
    plans = [plan_delete(e, p, options, view.versions) for p in sorted(shas) if (e := view.base.files.get(p))]
    return {plan.version: time.time() for plan in plans if plan.version}


def _expired(files: Files, now: float) -> dict[str, str]:
    """The expired files of `files` (all parts loaded), each with the sha256 of its content."""
    entries = {path: files.get(path) for path in files.under("")}
    return {path: entry.sha256 for path, entry in entries.items() if entry is not None and is_expired(entry, now)}
