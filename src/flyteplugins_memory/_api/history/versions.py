"""`MemoryStore.log`, `history`, `restore` and `diff`, and the ``versions/`` snapshots (`list_versions`,
`read_version`).

A restore is a write like any other: the version's content and file metadata written to the path now,
audited, kept in the handle until ``save()`` (so that ``restore`` then ``save()`` reads like
``write_text`` then ``save()``, and a restore merges with concurrent saves and obeys read-only prefixes
and `expected_sha` as a write does). History is never rewritten: the restore is a new version on top.
"""

from __future__ import annotations

from ..._base.syncify import syncify
from ..._journal import versions as _versions
from ..._journal.commit_log import Commit, last_change, read_log
from ..._journal.history import HistoryEntry, read_history, refuse_expired_snapshot
from ..._rules.admission import Access
from ..._rules.arguments import check_int
from ..._rules.codecs import MemoryMeta
from ..._rules.diff import Side, unified_diff
from ..._rules.record_codec import check_not_segment
from ..core import StoreCore


class VersionsAPI(StoreCore):
    """The store's commit log and each path's versions: `log`, `history`, `restore`, `diff`, and the
    ``versions/`` snapshots (`list_versions`, `read_version`)."""

    @syncify
    async def log(self, limit: int = 20, path: str | None = None) -> list[Commit]:
        """The store's newest `limit` commits, newest first: when, who, why, the paths each wrote and
        deleted, the messages it appended (see `Commit`). With `path`, only the commits that wrote or
        deleted that path.

        Reads one commit record per commit returned (plus finding the newest commit), however long the
        history; for a path that is not a file now, it first reads back to the last commit that changed
        it. The log ends where ``gc()`` collected the history; a store imported from upstream's layout
        starts with one ``import`` commit.
        """
        rel = None if path is None else self._admission.admit(path, Access.READ)
        check_int("limit", limit)
        view = await self._checkout.ready(self)
        return await read_log(self._checkout.remote_if_known(), view.base, limit, rel)

    @syncify
    async def history(self, path: str, limit: int = 20) -> list[HistoryEntry]:
        """The newest `limit` committed versions of `path`, newest first (see `HistoryEntry`): from the
        journal within its retention window, then from ``versions/`` snapshots (``keep_versions``) beyond
        it. Costs one commit record read per journal version shown (plus, when they are fewer than
        `limit`, one listing of the path's snapshots), however long the store's history. A path that is
        not a file now is first looked for commit by commit back to its deletion. Unsaved changes are
        not versions yet (`diff` against the current content shows them)."""
        rel = self._admission.admit(path, Access.READ)
        check_int("limit", limit)
        view = await self._checkout.ready(self)
        return await read_history(self._checkout.remote_if_known(), view.base, rel, limit)

    @syncify
    async def restore(
        self,
        path: str,
        version_id: str,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
    ) -> MemoryMeta | None:
        """Write version `version_id` of `path` (an id from `history`) back to `path`: its content and
        file metadata, as a new audited write saved by ``save()`` (history is never rewritten). Restoring
        a deleted path brings it back; restoring a deletion deletes the path (None is returned then).
        Refused in read-only prefixes (`ReadOnlyPath`); `expected_sha` as in `write_text`;
        `VersionNotFound` for an unknown id or content no longer stored, `VersionExpired` for a version
        written with a ttl that has run out. A version whose ttl has not run out yet comes back with it:
        it still expires when it was due to. `reason` defaults to ``"restore <version_id>"``."""
        rel = self._admission.admit(path, Access.WRITE)
        check_not_segment(rel)
        version = await self._version(rel, version_id)
        options = self._change_options(actor, reason or f"restore {version_id}", expected_sha, version.metadata)
        if version.data is None:
            await self._checkout.delete(self, rel, options)
            return None
        link = await self._link_past_delete(rel)
        meta = await self._checkout.write(self, rel, version.data, options, dict(version.ext) or None)
        if link is not None:  # no await since the write: nothing of the handle changed in between
            self._checkout.working_copy.changes.links[rel] = link
        return meta

    @syncify
    async def diff(self, path: str, a: str, b: str | None = None) -> str:
        """Unified diff of `path` from version `a` to version `b` (ids from `history`), or to the current
        content (unsaved changes included) when `b` is None; ``""`` when equal. A deletion, or no file
        now, is empty (``/dev/null``); binary content gives one line saying whether the two differ."""
        rel = self._admission.admit(path, Access.READ)
        side_a = Side(f"{rel}@{a}", (await self._version(rel, a)).data)
        if b is None:
            side_b = Side(f"{rel}@current", await self._checkout.read(self, rel))
        else:
            side_b = Side(f"{rel}@{b}", (await self._version(rel, b)).data)
        return unified_diff(side_a, side_b)

    # -- internals ------------------------------------------------------------------------------------

    async def _link_past_delete(self, rel: str) -> int | None:
        """For a restore of a path that is not a file: the commit that last changed it (its delete), which
        the restore's commit links to, so the path's history goes on through the delete to the versions
        before it, whatever base the handle has. None for a live file (its entry links it)."""
        live = await self._checkout.look(self, lambda view: view.entry(rel) is not None, paths=[rel])
        if live:
            return None
        view = await self._checkout.ready(self)
        return await last_change(self._checkout.remote_if_known(), view.base, rel)

    @syncify
    async def list_versions(self, rel_path: str) -> list[str]:
        """Names of the version snapshots of `rel_path` (saved and pending), oldest first."""
        rel = self._admission.admit(rel_path, Access.READ)
        return await _versions.list_versions(
            self._checkout.remote_if_known(), self._checkout.working_copy.versions, rel
        )

    @syncify
    async def read_version(self, version_file: str, version_id: str | None = None) -> str:
        """Text of one version snapshot, named as by `list_versions` or an audit event's ``version_file``;
        `NotText` for a snapshot of binary content (`read_version_bytes` reads that).

        ``read_version(path, version_id)``: text of version `version_id` of `path`, an id from `history`
        (a journal version's content comes from its blob, verified by its sha256); `VersionNotFound` for
        an unknown id, a deletion, or content gc() collected."""
        if version_id is not None:
            data = await self._version_bytes(version_file, version_id)
            return _versions.decode_text(data, f"{version_file}@{version_id}")
        await refuse_expired_snapshot((await self._checkout.ready(self)).base, version_file)
        remote, pending = self._checkout.remote_if_known(), self._checkout.working_copy.versions
        return await _versions.read_version(remote, pending, version_file)
