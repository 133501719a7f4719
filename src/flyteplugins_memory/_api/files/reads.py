"""The read half of `MemoryStore`'s API: contents, listings, metadata, audit trail and versions.

Listings, existence and metadata answer from the loaded state without touching storage; contents are
fetched on first read (or by `prefetch`) and verified against their sha256.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..._base.compat import upstream_awaitable
from ..._base.syncify import syncify
from ..._handle.mirror import write_text_file
from ..._handle.working_copy import WorkingCopy
from ..._journal import audit as _audit
from ..._rules.admission import Access
from ..._rules.arguments import check_int
from ..._rules.codecs import encode_audit_event, encode_messages
from ..._rules.inventory import take_inventory
from ..._rules.layout import AUDIT_LOG_PATH, VERSIONS_DIR
from ..._rules.metadata import Scalar, check_where, from_ext, matches
from ..._rules.paths import MESSAGES_PATH
from ...storage._workdir import WorkDir
from ..core import StoreCore


class ReadAPI(StoreCore):
    """Listings, existence, the working root's materialization and the audit trail (the reads of
    upstream's wrapped methods, `read_text` and the like, are the facade's own: `_api.core`)."""

    @syncify
    async def list_paths(self, prefix: str = "", *, where: Mapping[str, Scalar] | None = None) -> list[str]:
        """Sorted paths of the store's files under directory `prefix` (bookkeeping and transcript excluded).

        With `where`, only files whose metadata holds every pair exactly (a bool matches only a bool, a str
        only a str, numbers by value: ``1`` matches ``1.0``, ``True`` does not). Answered from the loaded
        state, like any listing: no file content is read.
        """
        rel = self._admission.admit(prefix, Access.LIST)
        wanted = check_where(where)
        if rel:
            await (await self._checkout.ready(self)).check_inside_root(rel)
        return await self._checkout.look(self, lambda view: _listed(view, rel, wanted), under=rel)

    @syncify
    async def _path_exists(self, rel_path: str) -> bool:
        """Whether `rel_path` is a file of the store, or a directory holding one."""
        rel = self._admission.admit(rel_path, Access.READ)
        await (await self._checkout.ready(self)).check_inside_root(rel)
        return await self._checkout.look(self, lambda view: view.has_file_or_dir(rel), paths=[rel])

    @syncify
    async def prefetch(self, prefix: str = "") -> int:
        """Materialize the store in the working root ``store.root``, in upstream's layout: every file under
        `prefix` not yet local (with its sidecar), fetched in bounded parallel batches; for the whole store
        (``prefix=""``) also ``audit/log.jsonl`` (every event), ``messages.json`` and ``versions/``.
        Returns how many files were fetched. Call it before running a code tool that reads the root:
        a handle otherwise holds only what it wrote or read.
        """
        rel = self._admission.admit(prefix, Access.LIST)
        view = await self._checkout.ready(self)
        missing = await self._checkout.look(self, lambda view: view.uncached_under(rel), under=rel)
        fetched = await view.fetch_all(missing, self._checkout.remote_if_known())
        if not rel:
            await self._materialize_bookkeeping()
        return fetched

    async def _materialize_bookkeeping(self) -> None:
        """The whole audit trail, the transcript and every saved version snapshot, into the root."""
        events = await self.audit_tail.aio(0)
        remote, view = self._checkout.remote_if_known(), await self._checkout.ready(self)
        objects = {MESSAGES_PATH: encode_messages(self.messages)}
        if events:
            objects[AUDIT_LOG_PATH] = b"".join(encode_audit_event(e) for e in events)
        if remote is not None:
            listed = take_inventory(await remote.list(under=VERSIONS_DIR)).versions
            names = [n for names in listed.values() for n in names if n not in view.versions]
            objects.update(await remote.read_many(names))
        await view.mirror.now(_write_all, view.workdir, objects)

    @upstream_awaitable
    @syncify
    async def audit_tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The last `n` audit events, oldest first (all of them if ``n <= 0``); reads only what it needs.

        The events are copies: editing one (say, for display) never changes the trail.
        """
        check_int("n", n, minimum=None)
        view = await self._checkout.ready(self)
        events = await _audit.audit_tail(self._checkout.remote_if_known(), view.base, view.changes.audit, n)
        return copy.deepcopy(events)

    def audit_tail_sync(self, n: int = 20) -> list[dict[str, Any]]:
        """Alias of ``audit_tail(n)`` kept for upstream compatibility."""
        return self.audit_tail(n)


def _write_all(workdir: WorkDir, objects: dict[str, bytes]) -> None:
    for name, data in objects.items():
        write_text_file(workdir, name, data)


def _listed(view: WorkingCopy, prefix: str, where: Mapping[str, Scalar]) -> list[str]:
    paths = view.paths(prefix)
    if not where:
        return paths
    return [p for p in paths if matches(_metadata_of(view, p), where)]


def _metadata_of(view: WorkingCopy, path: str) -> Mapping[str, Scalar]:
    entry = view.entry(path)
    return from_ext(entry.ext, path) if entry is not None else {}


def sha_of(view: WorkingCopy, rel: str) -> str:
    view.meta(rel)  # a corrupt sidecar raises here, as upstream's does
    entry = view.entry(rel)
    return entry.sha256 if entry else ""
