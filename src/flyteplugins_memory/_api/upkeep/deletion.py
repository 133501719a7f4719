"""Deleting a whole store: `MemoryStore.delete_store` (every object, its journal included, behind a
deletion record; see `_journal.store_deletion`)."""

from __future__ import annotations

from ..._base.syncify import syncify
from ..._journal.journal_storage import JournalStorage
from ..._journal.store_deletion import delete_stored
from ..._rules import location as _location
from ..._rules.arguments import check_flag
from ..._rules.writes import ChangeOptions
from ..core import StoreCore


class DeletionAPI(StoreCore):
    """Deleting a store by key: `delete_store`."""

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
