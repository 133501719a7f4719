"""A handle's unsaved changes against the store: `MemoryStore.refresh` (move to the newest commit),
`revert` (drop some) and `compact` (save, then checkpoint). `save` itself is the facade's (`_api.store`;
`_api.core` says why)."""

from __future__ import annotations

from collections.abc import Sequence

from ..._base.syncify import syncify
from ..._rules.admission import Access
from ...errors import InvalidArgument
from ..core import StoreCore


class ChangesAPI(StoreCore):
    """Refreshing, reverting and checkpointing a handle."""

    @syncify
    async def refresh(self) -> list[str]:
        """Move this handle to the newest committed state, keeping unsaved changes that do not conflict.

        Returns the paths whose unsaved changes conflicted and were dropped (``messages.json`` if the
        transcript was); afterwards they show the committed content, so the caller can retry.
        """
        return await self._checkout.refresh(self)

    @syncify
    async def revert(self, paths: Sequence[str] | None = None) -> list[str]:
        """Drop this handle's unsaved changes to the files at `paths` (every unsaved file change when
        None): their writes, deletes, metadata, versions and audit events. They read as committed again
        and the next save leaves them alone. Returns the paths whose changes were dropped (a path without
        one is skipped). The transcript and record-log appends are not touched.

        A retry loop's undo: apply a change, and if a check fails half-way, revert what it wrote.
        """
        if isinstance(paths, str) or not (paths is None or isinstance(paths, Sequence)):
            raise InvalidArgument(f"paths is a sequence of paths or None, got {type(paths).__name__}")
        rels = None if paths is None else [self._admission.admit(p, Access.READ) for p in paths]
        return await self._checkout.revert(self, rels)

    @syncify
    async def compact(self) -> None:
        """Save, then fold the newest commit into a checkpoint, bringing ``audit/log.jsonl`` up to date.

        Saves do this on their own every few hundred commits; call it before handing a store to
        upstream readers that need the newest audit trail.
        """
        await self._save_through_facade()
        await self._checkout.checkpoint()
