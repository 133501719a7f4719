"""Staged memories: `MemoryStore.propose`, `proposals`, `proposal`, `accept` and `discard`.

`propose` stages a change like a write does (kept in the handle until ``save()``), but in the journal's
proposals (`_rules.proposals`), not at its path. `accept` and `discard` are decisions: each commits at once
and on its own (after saving what the handle holds), so that of two concurrent decisions of one
proposal exactly one lands: the decision is a compare-and-swap on the proposal's stored form inside the
commit that makes it (`Checkout.decide`), and the loser raises `ProposalConflict` having committed
nothing. An accept is one audited write of the staged content to the path, with the proposal's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._base.syncify import syncify
from .._handle.working_copy import WorkingCopy
from .._rules.admission import Access
from .._rules.codecs import utc_timestamp, write_event
from .._rules.commit_info import check_note
from .._rules.merge import entry_name, with_entries
from .._rules.metadata import Scalar, check_metadata
from .._rules.proposals import (
    EXT_MAP,
    Proposal,
    all_of,
    check_content,
    check_id,
    check_status,
    decided,
    draft,
    stored,
)
from .._rules.record_codec import check_not_segment
from .._rules.writes import ChangeOptions
from ..errors import ConcurrencyError, CorruptStore, ProposalConflict, ProposalNotFound
from .core import StoreCore
from .records import save_pending


class StagedAPI(StoreCore):
    """Staged memories: propose, list and decide."""

    @syncify
    async def propose(
        self,
        path: str,
        content: str,
        *,
        actor: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
    ) -> Proposal:
        """Stage `content` (a str, at most 16 KiB) for `path` without touching `path`; saved by ``save()``
        like a write. Returns the draft `Proposal`; a handle allowed to write `path` may `accept` it (into
        a read-only prefix only a trusted one) or `discard` it. `metadata` goes to the file on accept."""
        rel = self._admission.admit(path, Access.WRITE, trusted=True)  # read-only prefixes: for a trusted accept
        check_not_segment(rel)  # as write_text: an accept would forge records of a log
        text = check_content(content)
        who, why = _note("actor", actor, "agent"), _note("reason", reason, "")
        proposal = draft(rel, text, who, why, check_metadata(metadata))
        event = self._proposal_event("propose", proposal, who, why)
        await self._checkout.look(self, lambda view: _stage(view, proposal, event))
        return proposal

    @syncify
    async def proposals(self, status: str | None = None, *, prefix: str = "") -> list[Proposal]:
        """This handle's proposals (committed, and its own unsaved ones) whose path lies under directory
        `prefix`, with `status` (``"draft"``, ``"accepted"``, ``"discarded"``; None: any), oldest first."""
        wanted = check_status(status)
        under = self._admission.admit(prefix, Access.LIST)
        found = await self._checkout.look(self, _current)
        return sorted(
            (p for p in found.values() if (wanted is None or p.status == wanted) and _inside(p.path, under)),
            key=lambda p: (p.created_at, p.id),
        )

    @syncify
    async def proposal(self, proposal_id: str) -> Proposal:
        """The proposal `proposal_id` as this handle sees it; `ProposalNotFound` if there is none."""
        return _find(await self._checkout.look(self, _current), check_id(proposal_id))

    @syncify
    async def accept(self, proposal_id: str, *, actor: str | None = None, reason: str | None = None) -> Proposal:
        """Apply draft `proposal_id`: write its content (and metadata) to its path and mark it accepted, in
        one commit of its own (the handle's unsaved changes are saved first). Needs a handle allowed to
        write the path (`ReadOnlyPath` in a read-only prefix unless the handle is ``trusted``).
        `InvalidTransition` unless it is a draft, `ProposalNotFound`, and `ProposalConflict` (nothing
        committed) if another handle decided it meanwhile. Returns the accepted proposal."""
        return await self._decide(proposal_id, "accepted", actor, reason)

    @syncify
    async def discard(self, proposal_id: str, *, actor: str | None = None, reason: str | None = None) -> Proposal:
        """Mark a draft or accepted proposal discarded, in one commit of its own (the handle's unsaved
        changes are saved first). Discarding an accepted proposal does not change its file (write or
        delete it to revert). Same admission and errors as `accept`. Returns the discarded proposal."""
        return await self._decide(proposal_id, "discarded", actor, reason)

    # -- internals ----------------------------------------------------------------------------------------

    async def _decide(self, proposal_id: str, status: str, actor: str | None, reason: str | None) -> Proposal:
        wanted = check_id(proposal_id)
        who, why = _note("actor", actor, "agent"), _note("reason", reason, "")
        seen = await self._checkout.look(self, _current)
        if wanted in seen:  # refused before anything is saved; one newer than the handle is checked in `make`
            self._admit(seen[wanted])
        await save_pending(self, who)  # appended records are saved first, like other changes
        decision = _Decision(self, wanted, status, who, why)
        try:
            trusted = self.trusted and status == "accepted"
            return await self._checkout.decide(
                self, decision.make, actor=who, reason=decision.summary(), trusted=trusted
            )
        except ConcurrencyError as exc:
            if entry_name(EXT_MAP, wanted) not in exc.paths or isinstance(exc, ProposalConflict):
                raise
            raise ProposalConflict(entry_name(EXT_MAP, wanted), "", "", paths=exc.paths) from exc

    def _admit(self, proposal: Proposal) -> None:
        """A decision writes the proposal's path: this handle must be allowed to (or be trusted)."""
        self._admission.admit(proposal.path, Access.WRITE, trusted=self.trusted)

    def _proposal_event(self, op: str, proposal: Proposal, actor: str, reason: str) -> dict[str, Any] | None:
        if not self.audit:
            return None
        event = write_event(
            op=op,
            path=proposal.path,
            old_sha="",
            new_sha=proposal.sha256,
            actor=actor,
            reason=reason,
            ts=utc_timestamp(),
            version_file="",
        )
        return {**event, "proposal": proposal.id}


class _Decision:
    """One accept or discard, made on the handle's clean working copy at the newest commit."""

    def __init__(self, store: StagedAPI, proposal_id: str, status: str, actor: str, reason: str):
        self.store, self.id, self.status, self.actor, self.reason = store, proposal_id, status, actor, reason

    def summary(self) -> str:
        verb = "accept" if self.status == "accepted" else "discard"
        return self.reason or f"{verb} proposal {self.id}"

    async def make(self, view: WorkingCopy) -> Proposal:
        current = _find(_current(view), self.id)
        self.store._admit(current)
        after = decided(current, self.status, self.actor, self.reason)
        if self.status == "accepted":
            await self._write(view, current)
        view.changes.entries[(EXT_MAP, self.id)] = stored(after)
        op = "accept" if self.status == "accepted" else "discard"
        if (event := self.store._proposal_event(op, after, self.actor, self.reason)) is not None:
            view.changes.audit.append(event)
        return after

    async def _write(self, view: WorkingCopy, proposal: Proposal) -> None:
        if proposal.content is None:
            raise CorruptStore(f"The journal's draft proposal {proposal.id!r} holds no content")
        check_not_segment(proposal.path)  # one staged before `propose` checked it: discard it instead
        store = self.store
        reason = self.reason or proposal.reason or f"accept proposal {proposal.id}"
        options = ChangeOptions(self.actor, reason, None, store.keep_versions, store.audit, dict(proposal.metadata))
        await view.write(proposal.path, proposal.content, options)


def _note(name: str, value: str | None, default: str) -> str:
    check_note(name, value)
    return default if value is None else value


def _stage(view: WorkingCopy, proposal: Proposal, event: dict[str, Any] | None) -> None:
    view.changes.entries[(EXT_MAP, proposal.id)] = stored(proposal)
    if event is not None:
        view.changes.audit.append(event)


def _current(view: WorkingCopy) -> dict[str, Proposal]:
    """The proposals the handle sees: the base's, with its unsaved ones (and decisions) on top."""
    return all_of(with_entries(view.base.ext, view.changes.entries))


def _find(found: dict[str, Proposal], proposal_id: str) -> Proposal:
    if proposal_id not in found:
        raise ProposalNotFound(f"No proposal {proposal_id!r} in this store")
    return found[proposal_id]


def _inside(path: str, prefix: str) -> bool:
    return not prefix or path == prefix or path.startswith(prefix + "/")
