"""The staged-memory half of `ScopedStore`: propose, list and decide proposals of paths in the scope.

Each call is the store's own (`_api.staged`) on the full path, so its rules hold unchanged (only a trusted
handle accepts into a read-only prefix); proposals come back with paths relative to the scope, and a
proposal of a path outside it is `ProposalNotFound` from here, checked before anything is committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..._base.syncify import syncify
from ..._rules.metadata import Scalar
from ..._rules.proposals import Proposal
from ..._rules.scope_paths import is_inside, relative
from ...errors import ProposalNotFound
from .core import ScopeCore

if TYPE_CHECKING:
    pass


class ScopedStagedAPI(ScopeCore):
    """A scope's staged memories: propose, list and decide proposals of paths in it."""

    def _own_proposal(self, proposal: Proposal) -> Proposal:
        """`proposal` with its path relative to the scope; one outside the scope is not found from here."""
        if not is_inside(self._prefix, proposal.path):
            raise ProposalNotFound(f"No proposal {proposal.id!r} in scope {self._prefix!r}")
        return proposal.model_copy(update={"path": relative(self._prefix, proposal.path)})

    @syncify
    async def propose(
        self,
        rel_path: str,
        content: str,
        *,
        actor: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
    ) -> Proposal:
        """`MemoryStore.propose` for `rel_path` in this scope (the proposal's path relative to it)."""
        full = await self._full(rel_path)
        staged = await self._store.propose.aio(full, content, actor=actor, reason=reason, metadata=metadata)
        return self._own_proposal(staged)

    @syncify
    async def proposals(self, status: str | None = None, *, prefix: str = "") -> list[Proposal]:
        """`MemoryStore.proposals` for paths under directory `prefix` of this scope, paths relative to it."""
        full = await self._full(prefix, directory=True)
        return [self._own_proposal(p) for p in await self._store.proposals.aio(status, prefix=full)]

    @syncify
    async def proposal(self, proposal_id: str) -> Proposal:
        """The proposal `proposal_id` if its path is in this scope (`ProposalNotFound` otherwise)."""
        return self._own_proposal(await self._store.proposal.aio(proposal_id))

    @syncify
    async def accept(self, proposal_id: str, *, actor: str | None = None, reason: str | None = None) -> Proposal:
        """`MemoryStore.accept` of a proposal of this scope (`ProposalNotFound` for any other)."""
        await self.proposal.aio(proposal_id)
        return self._own_proposal(await self._store.accept.aio(proposal_id, actor=actor, reason=reason))

    @syncify
    async def discard(self, proposal_id: str, *, actor: str | None = None, reason: str | None = None) -> Proposal:
        """`MemoryStore.discard` of a proposal of this scope (`ProposalNotFound` for any other)."""
        await self.proposal.aio(proposal_id)
        return self._own_proposal(await self._store.discard.aio(proposal_id, actor=actor, reason=reason))
