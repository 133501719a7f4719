"""Files whose ttl ran out leave the store: gc removes what upstream's layout holds of them (the file,
its sidecar, the ``versions/`` snapshots of the expired content), then commits their deletion, audited as
op ``expired``, through a session of its own (the calling handle's unsaved changes are not saved with it).
That order makes a dying gc safe to repeat: before the commit the files are still expired and found again;
after it nothing is left for the commit's projection to lag on. Expired files are never read again, so
nothing a live state needs goes. Finding them loads the whole file index (O(files), as gc's own pass over
the checkpoints does); saves never pay for it. See docs/decisions.md, "TTL"."""

from __future__ import annotations

import logging
import pathlib
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ._errors import ConcurrencyError
from ._index import Files
from ._layout import sidecar_name
from ._session import Session
from ._snapshot_retention import expired_snapshots
from ._ttl import is_expired
from ._writes import ChangeOptions

logger = logging.getLogger(__name__)

#: Who and why the expiry commit records.
ACTOR, REASON = "gc", "ttl expired"


class _Holder:
    """The transcript holder a private session needs: the committed transcript, left as it is."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.audit = True


@dataclass(frozen=True)
class Expiry:
    """What an expiry pass deleted (or, dry, would delete): the files, and their content's snapshots."""

    paths: tuple[str, ...] = ()
    snapshots: dict[str, int] = field(default_factory=dict)


async def expire_files(remote_path: str, now: float, *, keep_versions: bool, dry_run: bool) -> Expiry:
    """Delete (one commit) every file of the store at `remote_path` whose ttl ran out by `now`, and the
    snapshots of their content. With `dry_run`, only finds them. A concurrent save that rewrote one of them wins: this
    commit is dropped (`ConcurrencyError`, logged) and the next gc tries again."""
    with tempfile.TemporaryDirectory(prefix="flyte_agent_mem_gc_") as root:
        session = Session(pathlib.Path(root), private=True, remote_path=remote_path, resolve=lambda: remote_path)
        holder = _Holder()
        try:
            return await _expire(session, holder, now, keep_versions=keep_versions, dry_run=dry_run)
        finally:
            await session.view.mirror.settled()


async def _expire(session: Session, holder: _Holder, now: float, *, keep_versions: bool, dry_run: bool) -> Expiry:
    if not await session.open(holder):
        return Expiry()
    async with session.lock:
        view = session.view
        await view.need_under("")
        shas = _expired(view.base.files, now)
        snapshots = await expired_snapshots(session.remote(), shas) if shas else {}
        found = Expiry(tuple(sorted(shas)), snapshots)
        if dry_run or not shas:
            return found
        # first what upstream lists (and in-place content): a gc dying before its commit finds the
        # files expired again; one dying after it has nothing left for the commit's projection to lag on
        upstream = [name for path in found.paths for name in (path, sidecar_name(path))]
        await session.remote().remove_all(sorted(snapshots) + upstream)
        options = ChangeOptions(ACTOR, REASON, None, keep_versions, True)
        for path in found.paths:
            await view.expire(path, options, now)
        try:
            await session._commit(holder, actor=ACTOR, reason=REASON, trusted=True)
        except ConcurrencyError as exc:
            logger.warning(
                "gc() could not delete expired files of %s (the next gc retries): %s", session.remote().uri, exc
            )
            return Expiry(snapshots=snapshots)
    return found


def _expired(files: Files, now: float) -> dict[str, str]:
    """The expired files of `files` (all parts loaded), each with the sha256 of its content."""
    entries = {path: files.get(path) for path in files.under("")}
    return {path: entry.sha256 for path, entry in entries.items() if entry is not None and is_expired(entry, now)}
