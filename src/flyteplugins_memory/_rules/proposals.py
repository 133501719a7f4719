"""Pure: staged memories (proposals): the model, how one is stored, and the transitions it may take.

A proposal is a change staged for a path (``store.propose``) that touches the path only when a handle
allowed to write it accepts it. Proposals live in the store-level ``ext`` map ``"proposals"`` of the
journal (id -> stored form), never in a file: upstream's readers do not see them, no plain write can
reach them, and releases that do not know them carry them unchanged through their saves (docs/journal.md,
"How the format evolves"). Each accept or discard is a compare-and-swap on the proposal's stored form,
committed together with the write it makes (`_rules.merge.Changes.entries`), so of two concurrent decisions
exactly one lands. A decided proposal keeps its record but not its content (an accepted one's content is
the file's now): records carry every pending proposal, so only drafts may cost their content.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import CorruptStore, InvalidArgument, InvalidContent, InvalidTransition
from .codecs import sha256_bytes
from .commit_info import now
from .metadata import Scalar, check_metadata
from .paths import is_unicode, normalize_path

__all__ = ["Proposal", "ProposalStatus"]

#: A proposal's status.
ProposalStatus = Literal["draft", "accepted", "discarded"]
STATUSES: tuple[str, ...] = ("draft", "accepted", "discarded")
#: The store-level ``ext`` map that holds proposals.
EXT_MAP = "proposals"
#: Largest content a proposal may stage, in UTF-8 bytes: every commit record carries the drafts inline
#: until they are decided (a record above 32 KiB makes its save write a checkpoint).
MAX_CONTENT_BYTES = 16 * 1024
#: Which decisions each status allows.
TRANSITIONS: dict[str, frozenset[str]] = {
    "draft": frozenset({"accepted", "discarded"}),
    "accepted": frozenset({"discarded"}),
    "discarded": frozenset(),
}


class Proposal(BaseModel):
    """A staged change of one file (``store.propose``), immutable.

    `content` is the staged text while the proposal is a draft, None once decided (an accepted
    proposal's content is the file's; `sha256` and `bytes` still say what it was). `decided_at`,
    `decided_by` and `decision_reason` describe the latest decision.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    path: str
    status: ProposalStatus
    content: str | None = None
    sha256: str
    bytes: int = Field(ge=0)
    actor: str = ""
    reason: str = ""
    metadata: dict[str, Scalar] = Field(default_factory=dict)
    created_at: str = ""
    decided_at: str | None = None
    decided_by: str | None = None
    decision_reason: str | None = None


def new_id() -> str:
    return uuid.uuid4().hex


def check_content(content: object) -> str:
    """`content` if a proposal may stage it: a str of valid Unicode, at most `MAX_CONTENT_BYTES`."""
    if not isinstance(content, str) or not is_unicode(content):
        raise InvalidContent(f"A proposal's content must be a str of valid Unicode, got {type(content).__name__}")
    size = len(content.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise InvalidContent(f"A proposal's content takes {size} bytes; at most {MAX_CONTENT_BYTES} are allowed")
    return content


def check_status(status: object) -> str | None:
    if status is None or status in STATUSES:
        return status  # type: ignore[return-value]
    raise InvalidArgument(f"status must be one of {', '.join(STATUSES)} or None, got {status!r}")


def check_id(proposal_id: object) -> str:
    if not isinstance(proposal_id, str) or not proposal_id or "/" in proposal_id or not is_unicode(proposal_id):
        raise InvalidArgument(f"A proposal id must be a non-empty str, got {proposal_id!r}")
    return proposal_id


def draft(path: str, content: str, actor: str, reason: str, metadata: dict[str, Scalar]) -> Proposal:
    data = content.encode("utf-8")
    return Proposal(
        id=new_id(),
        path=path,
        status="draft",
        content=content,
        sha256=sha256_bytes(data),
        bytes=len(data),
        actor=actor,
        reason=reason,
        metadata=metadata,
        created_at=now(),
    )


def decided(proposal: Proposal, status: str, actor: str, reason: str) -> Proposal:
    """`proposal` after the decision `status`; `InvalidTransition` if its status does not allow it."""
    if status not in TRANSITIONS[proposal.status]:
        raise InvalidTransition(
            f"Proposal {proposal.id!r} is {proposal.status}: it cannot be {status} "
            f"(allowed: draft -> accepted | discarded, accepted -> discarded)"
        )
    update = {"status": status, "content": None, "decided_at": now(), "decided_by": actor, "decision_reason": reason}
    return proposal.model_copy(update=update)


def stored(proposal: Proposal) -> dict[str, Any]:
    """How `proposal` is kept in the journal (its id is the key of the map)."""
    return proposal.model_dump(exclude={"id"}, exclude_none=True)


def parse(proposal_id: str, raw: object) -> Proposal:
    """A proposal read from the journal (untrusted: checked like a caller's input); `CorruptStore` if not."""
    try:
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        proposal = Proposal.model_validate({**raw, "id": proposal_id})
        normalize_path(proposal.path)
        check_metadata(proposal.metadata)
    except (ValidationError, ValueError) as exc:
        raise CorruptStore(f"The journal's proposal {proposal_id!r} is malformed: {exc}") from exc
    return proposal


def all_of(ext: dict[str, Any]) -> dict[str, Proposal]:
    """Every proposal a store-level ``ext`` holds, by id."""
    found = ext.get(EXT_MAP) or {}
    if not isinstance(found, dict):
        raise CorruptStore(f"The journal's {EXT_MAP!r} extension is not a map")
    return {proposal_id: parse(proposal_id, raw) for proposal_id, raw in found.items()}
