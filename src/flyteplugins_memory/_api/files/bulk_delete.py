"""Deleting in bulk: `MemoryStore.delete_prefix`, every file under a directory (a whole store is
`delete_store`, in `_api.upkeep.deletion`)."""

from __future__ import annotations

from ..._base.syncify import syncify
from ..._rules.admission import Access
from ..._rules.writes import ChangeOptions
from ...errors import InvalidPath
from ..core import StoreCore


class BulkDeleteAPI(StoreCore):
    """Deleting in bulk: `delete_prefix`."""

    @syncify
    async def delete_prefix(self, prefix: str, *, actor: str = "agent", reason: str = "") -> list[str]:
        """Delete every file under directory `prefix` (``"notes"`` deletes ``notes/a.md`` and
        ``notes/x/b.md``, not ``notes.md`` nor a file named ``notes``); returns their paths, sorted.

        Like `delete`, each file gets its audit event (and, with ``keep_versions``, a tombstone version),
        and nothing is saved until `save`, which commits them all at once; this handle's unsaved records
        of logs under `prefix` (``store.records``) are dropped, as unsaved writes there are. All or none:
        ``""`` (the whole store) raises `InvalidPath`, a reserved prefix `ReservedPath`, and a prefix that
        is or holds read-only files `ReadOnlyPath`, before anything is deleted.
        """
        rel = self._admission.admit(prefix, Access.LIST)
        if not rel:
            raise InvalidPath("delete_prefix needs a directory; the whole store is MemoryStore.delete_store")
        self._admission.admit(rel, Access.DELETE)
        options: ChangeOptions = self._change_options(actor, reason, None)
        admit = lambda path: self._admission.admit(path, Access.DELETE)  # noqa: E731
        deleted = await self._checkout.delete_under(self, rel, options, admit)
        self._pending_records.drop_under(rel)  # unsaved records under it: files it would write there
        return deleted
