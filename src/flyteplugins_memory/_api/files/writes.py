"""Changing files besides writing them whole: `MemoryStore.set_metadata` and `delete` (the writes of
upstream's wrapped methods, `write_text` and `write_json`, are the facade's own: `_api.core`)."""

from __future__ import annotations

from collections.abc import Mapping

from ..._base.syncify import syncify
from ..._rules.admission import Access
from ..._rules.codecs import MemoryMeta
from ..._rules.metadata import Scalar
from ..._rules.record_codec import check_not_segment
from ..core import StoreCore
from . import metadata_update as _metadata_update


class WritesAPI(StoreCore):
    """Relabelling a file (`set_metadata`) and deleting one (`delete`)."""

    @syncify
    async def set_metadata(
        self,
        rel_path: str,
        metadata: Mapping[str, Scalar] | None,
        *,
        actor: str = "agent",
        reason: str = "",
        expected_sha: str | None = None,
    ) -> MemoryMeta | None:
        """Replace the metadata of the file at `rel_path`, keeping its content (an audited write of the
        same bytes: fetched first if the handle does not hold them). None if there is no such file."""
        rel = self._admission.admit(rel_path, Access.WRITE)
        check_not_segment(rel)
        options = self._change_options(actor, reason, expected_sha, metadata)
        return await _metadata_update.set_metadata(self, self._checkout, rel, options)

    @syncify
    async def delete(
        self, rel_path: str, *, actor: str = "agent", reason: str = "", expected_sha: str | None = None
    ) -> bool:
        """Delete the file at `rel_path` (audited; a tombstone version with `keep_versions`).

        Returns False if there is no such file. Same path rules and `expected_sha` check as writes.
        """
        rel = self._admission.admit(rel_path, Access.DELETE)
        return await self._checkout.delete(self, rel, self._change_options(actor, reason, expected_sha))
