"""Files whose ttl ran out leave the store: gc commits their deletion, audited as op ``expired``, through
a session of its own (the calling handle's unsaved changes are not saved with it), and that commit's
projection removes them from upstream's layout. Finding them loads the whole file index (O(files), as
gc's own pass over the checkpoints is); saves never pay for it. See docs/decisions.md, "TTL"."""

from __future__ import annotations

import logging
import pathlib
import tempfile
from typing import Any

from ._errors import ConcurrencyError
from ._session import Session
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


async def expire_files(remote_path: str, now: float, *, keep_versions: bool, dry_run: bool) -> tuple[str, ...]:
    """Delete (one commit) every file of the store at `remote_path` whose ttl ran out by `now`; returns
    their paths. With `dry_run`, only finds them. A concurrent save that rewrote one of them wins: this
    commit is dropped (`ConcurrencyError`, logged) and the next gc tries again."""
    with tempfile.TemporaryDirectory(prefix="flyte_agent_mem_gc_") as root:
        session = Session(pathlib.Path(root), private=True, remote_path=remote_path, resolve=lambda: remote_path)
        holder = _Holder()
        try:
            return await _expire(session, holder, now, keep_versions=keep_versions, dry_run=dry_run)
        finally:
            await session.view.mirror.settled()


async def _expire(
    session: Session, holder: _Holder, now: float, *, keep_versions: bool, dry_run: bool
) -> tuple[str, ...]:
    if not await session.open(holder):
        return ()
    async with session.lock:
        view = session.view
        await view.need_under("")
        files = view.base.files
        expired = tuple(sorted(p for p in files.under("") if is_expired(files.get(p), now)))
        if dry_run or not expired:
            return expired
        options = ChangeOptions(ACTOR, REASON, None, keep_versions, True)
        for path in expired:
            await view.expire(path, options, now)
        try:
            await session._commit(holder, actor=ACTOR, reason=REASON, trusted=True)
        except ConcurrencyError as exc:
            logger.warning(
                "gc() could not delete expired files of %s (the next gc retries): %s", session.remote().uri, exc
            )
            return ()
    return expired
