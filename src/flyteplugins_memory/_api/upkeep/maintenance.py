"""The maintenance half of `MemoryStore`'s API: garbage collection, purge and the retention window.

``gc()`` removes what no committed state inside the retention window needs (`_journal.gc`); ``purge(path)``
deletes a path and removes every stored copy of its content now (`_journal.purge`); ``set_gc_window`` sets the
window every handle of the store uses, stored in the journal beside it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from ..._base.syncify import syncify
from ..._handle.mirror import remove_tree
from ..._journal import gc as _gc
from ..._journal.gc import GcResult, collect, set_window
from ..._journal.opening import latest_state
from ..._journal.purge import PurgeResult, purge_change, purge_stored
from ..._rules.admission import Access
from ..._rules.arguments import check_flag, check_int, check_window
from ..._rules.commit_info import check_note
from ..._rules.layout import versions_dir_name
from ..core import StoreCore
from ..records import save_pending
from .expiry import expire_files
from .message_purge import check_replacement, purge_message


class MaintenanceAPI(StoreCore):
    """Garbage collection, purge (of a path, a message) and the retention window."""

    @syncify
    async def gc(self, window: timedelta | None = None, *, dry_run: bool = False) -> GcResult:
        """Remove commit records, checkpoints, audit segments and blobs that no state committed inside the
        retention window needs, and orphan blobs older than it; never what the newest state needs. Apply
        the store's retention policy (`set_retention`) to ``versions/`` snapshots, and delete files whose
        ttl ran out (one audited commit, op ``expired``; `GcResult.expired` names them).

        `window` defaults to the store's (`set_gc_window`), else 24 hours; a policy's ``max_age``, if
        longer, extends it. ``timedelta(0)`` keeps only the newest state: overwritten and deleted content
        is gone from storage (with a save running at the same moment, use a window longer than that save).
        Handles pinned to a removed commit get `StateCollected` when they need it. With `dry_run`, nothing
        is removed or committed: the result says what would be. Saves run gc on their own after each
        checkpoint (without snapshots or expiry).
        """
        span = check_window(window)
        check_flag("dry_run", dry_run)
        remote = self._checkout.remote()
        expiry = await expire_files(remote.uri, _gc.clock(), keep_versions=self.keep_versions, dry_run=dry_run)
        # a real expiry pass is done by now; a dry run's policy pass is told what it would have done
        done = expiry.as_policy_sees_it() if dry_run else None
        result = await collect(remote, span, dry_run=dry_run, expired=done)
        gone = len(expiry.snapshots)
        return replace(
            result,
            objects=result.objects + gone,
            bytes=result.bytes + sum(expiry.snapshots.values()),
            versions=result.versions + gone,
            expired=expiry.paths,
        )

    @syncify
    async def purge(self, rel_path: str, *, actor: str = "agent", reason: str = "") -> PurgeResult:
        """Delete `rel_path` and remove every stored copy of its past and present content and labels now:
        its journal blobs, version snapshots, search index segments, upstream's file and sidecar, and its
        labels and proposals' text from every stored commit record and checkpoint (rewritten in place).
        Content that another live path holds stays for that path. Handles that still name the content get
        `ContentPurged`.

        The handle's unsaved changes are saved first; then the purge commits on its own (commit kind
        ``purge``, audit op ``purge`` with `actor` and `reason`, whatever the handle's ``audit`` setting;
        a draft proposal of the path is discarded), also for a path deleted long ago.
        """
        rel = self._admission.admit(rel_path, Access.DELETE)
        check_note("actor", actor)
        check_note("reason", reason)
        await save_pending(self, actor)  # appended records are saved first, like other changes
        session = self._checkout
        reason = reason or f"purge {rel}"  # one reason in the commit, the audit and the history alike
        change = lambda view: purge_change(view, rel, actor, reason, session.remote_if_known())  # noqa: E731
        _, commit = await session.purge_commit(self, change, actor=actor, reason=reason)
        async with session.lock:
            remote, view = session.remote(), session.working_copy
            newest = await latest_state(remote, view.base) or view.base  # what other paths hold now stays theirs
            result = await purge_stored(remote, rel, newest, actor=actor, reason=reason, commit=commit)
            session.search.reset()  # it may hold segments the purge removed
            # the working root held this handle's snapshots of the path: gone too (the delete removed
            # the file and its sidecar there already)
            await view.mirror.now(remove_tree, view.workdir, versions_dir_name(rel))
            return result

    @syncify
    async def purge_message(
        self,
        index: int,
        *,
        replacement: str | dict[str, Any] | None = None,
        actor: str = "agent",
        reason: str = "",
    ) -> PurgeResult:
        """Redact the transcript message at `index` (of ``messages``; negative counts from the end) and
        remove every stored copy of its old text now: the commit records that appended it, checkpoints,
        upstream's ``messages.json``. Every message with exactly the same content is redacted with it.

        The message becomes `replacement`: a dict is stored as the new message; a str (``"[redacted]"``
        when None) becomes the content of a message of the same role. The handle's unsaved changes are
        saved first; then the redaction commits on its own (commit kind ``purge``, audit op ``purge`` on
        ``messages.json`` with ``message``: the index, `actor` and `reason`). `MessageNotFound` for an
        index outside the transcript, `InvalidArgument` for one that is not an int. A message that
        ``compact_transcript`` archived is purged through its archive log (``records(archive).purge``).
        """
        check_replacement(replacement)
        check_int("index", index, minimum=None)  # a bad index or note saves nothing
        check_note("actor", actor)
        check_note("reason", reason)
        await save_pending(self, actor)
        return await purge_message(self, index, replacement, actor, reason)

    @syncify
    async def set_gc_window(self, window: timedelta | None) -> None:
        """Set the retention window of this store, for every handle and task that opens it (stored with
        the store's journal); None restores the default (24 hours).

        The window decides what gc() removes, so like gc() it is refused (`StoreFormatTooNew`) when the
        newest state or the settings hold data that only a newer version may write over.
        """
        check_window(window)
        base = (await self._checkout.ready(self)).base
        remote = self._checkout.remote()
        newest = await latest_state(remote, base) or base
        newest.check_can_write("change the gc window of", remote.uri)
        await set_window(remote, window)
