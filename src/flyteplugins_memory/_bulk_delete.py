"""Deleting in bulk: `MemoryStore.delete_prefix` (every file under a directory) and `delete_store`
(a whole store, its journal included; see `_store_deletion`)."""

from __future__ import annotations

from typing import Any

from ._admission import Access, PathAdmission
from ._errors import InvalidPath
from ._session import Session
from ._syncify import syncify
from ._writes import ChangeOptions


class BulkDeleteAPI:
    """Mixed into `MemoryStore`; relies on its `_session`, `_admission` and `_change_options`."""

    _session: Session
    _admission: PathAdmission
    _change_options: Any

    @syncify
    async def delete_prefix(self, prefix: str, *, actor: str = "agent", reason: str = "") -> list[str]:
        """Delete every file under directory `prefix` (``"notes"`` deletes ``notes/a.md`` and
        ``notes/x/b.md``, not ``notes.md`` nor a file named ``notes``); returns their paths, sorted.

        Like `delete`, each file gets its audit event (and, with ``keep_versions``, a tombstone version),
        and nothing is saved until `save`, which commits them all at once. All or none: ``""`` (the whole
        store) raises `InvalidPath`, a reserved prefix `ReservedPath`, and a prefix that is or holds
        read-only files `ReadOnlyPath`, before anything is deleted.
        """
        rel = self._admission.admit(prefix, Access.LIST)
        if not rel:
            raise InvalidPath("delete_prefix needs a directory; the whole store is MemoryStore.delete_store")
        self._admission.admit(rel, Access.DELETE)
        options: ChangeOptions = self._change_options(actor, reason, None)
        admit = lambda path: self._admission.admit(path, Access.DELETE)  # noqa: E731
        return await self._session.delete_under(self, rel, options, admit)
