"""Deleting in bulk: `MemoryStore.delete_prefix` (every file under a directory) and `delete_store`
(a whole store, its journal included; see `_journal.store_deletion`)."""

from __future__ import annotations

from typing import Any

from .._base.syncify import syncify
from .._handle.checkout import Checkout
from .._journal.journal_storage import JournalStorage
from .._journal.store_deletion import delete_stored
from .._rules import location as _location
from .._rules.admission import Access, PathAdmission
from .._rules.arguments import check_flag
from .._rules.writes import ChangeOptions
from ..errors import InvalidPath
from .records import PendingRecords


class BulkDeleteAPI:
    """Mixed into `MemoryStore`; relies on its `_handle.checkout`, `_rules.admission` and `_change_options`."""

    _checkout: Checkout
    _admission: PathAdmission
    _change_options: Any
    _pending_records: PendingRecords
    messages: list[dict[str, Any]]
    audit: bool

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

    @syncify
    @classmethod
    async def delete_store(
        cls,
        *,
        key: str,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        trusted: bool = False,
        actor: str = "agent",
        reason: str = "",
    ) -> bool:
        """Delete the whole store of `key` (resolved like `remote_path_for_key`): every file, sidecar,
        version, the transcript, the audit trail and the journal outside the prefix. Returns False if
        there is no such store (or a concurrent deletion won).

        Refuses (`ReadOnlyPath`) a store holding files under read-only prefixes persisted with the store
        unless `trusted`. What stays is its deletion record (`actor`, `reason`, time, file count), in the
        journal's head and a few log slots: a handle of the deleted store that saves afterwards gets
        `StoreDeleted` instead of bringing half a store back, and so does `open` of the key. ``create``
        and ``get_or_create`` give the key a new, empty store (a new generation: nothing of the deleted
        one is visible through it, and no handle of the deleted one can commit into it).
        """
        check_flag("trusted", trusted)
        ChangeOptions(actor, reason, None, False, True)  # actor and reason: the rules of every write
        remote = JournalStorage.at(_location.remote_path_for_key(key, org, project, domain))
        return await delete_stored(remote, trusted=trusted, actor=actor, reason=reason)
