"""Verbs about staged memories: ``proposals`` (list them), ``accept`` and ``discard`` (decide one).

A decision commits at once (see `MemoryStore.accept`); ``--trusted`` opens a trusted handle, the only kind
that may accept into a read-only prefix. A decision another handle made first fails with one ``error:``
line (exit 1) and commits nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import rich_click as click

from . import _render
from ._app import json_option, memory, store_options
from ._target import Target, open_store

if TYPE_CHECKING:
    from flyteplugins_memory import MemoryStore, Proposal

_STATUS = click.Choice(["draft", "accepted", "discarded"])


@memory.command("proposals")
@store_options
@click.option("--status", type=_STATUS, help="Only proposals with this status.")
@click.option("--prefix", default="", help="Only proposals for paths under this directory.")
@json_option
def proposals(target: Target, status: str | None, prefix: str, json_output: bool) -> None:
    """The store's staged memories (proposals), oldest first: id, status, path, who proposed it and why."""
    store = open_store(target)
    found = store.proposals(status, prefix=prefix)
    if json_output:
        _render.emit_json({"uri": store.remote_path, "proposals": [p.model_dump() for p in found]})
        return
    short = short_ids([p.id for p in store.proposals()])  # unique among all, so any status filter can use them
    rows = [_row(p, short[p.id]) for p in found]
    columns = ("id", "status", "path", "size", "proposed by", "proposed at", "reason", "content")
    caption = f"{_render.count(len(found), 'proposal')}; accept or discard takes an id as shown (--json: full ids)"
    _render.show(store.remote_path, _render.table(columns, rows), caption)


#: the fewest characters of an id the table shows (more where two ids share them)
SHORT_ID = 8


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id's shortest prefix of at least `SHORT_ID` characters that no other id starts with."""
    short: dict[str, str] = {}
    for proposal_id in ids:
        size = SHORT_ID
        while size < len(proposal_id) and any(o != proposal_id and o.startswith(proposal_id[:size]) for o in ids):
            size += 1
        short[proposal_id] = proposal_id[:size]
    return short


def resolve_id(store: MemoryStore, typed: str) -> str:
    """The full id of the proposal whose id starts with `typed` (an id as `proposals` shows it); `typed`
    as it is when no id does (the store then says there is no such proposal)."""
    matches = [p.id for p in store.proposals() if p.id.startswith(typed)]
    if len(matches) > 1 and typed not in matches:
        raise click.UsageError(f"{typed!r} is the start of {len(matches)} proposal ids: type more of it")
    return matches[0] if len(matches) == 1 else typed


def _row(proposal: Proposal, short_id: str) -> tuple[Any, ...]:
    content = "" if proposal.content is None else _render.one_line(proposal.content, 60)
    return (
        short_id,
        proposal.status,
        proposal.path,
        _render.human_size(proposal.bytes),
        proposal.actor,
        _render.when(proposal.created_at),
        proposal.reason,
        content,
    )


_DECISION_OPTIONS = (
    click.option("--trusted", is_flag=True, help="Open a trusted handle (may accept into read-only prefixes)."),
    click.option("--actor", help="Who decides (recorded in the audit trail and the commit)."),
    click.option("--reason", help="Why (recorded in the audit trail and the commit)."),
)


def _decision(name: str, verb: str) -> click.Command:
    """The ``accept`` or ``discard`` command (`verb`), registered on `memory` as `name`."""

    def command(
        proposal_id: str, target: Target, trusted: bool, actor: str | None, reason: str | None, json_output: bool
    ) -> None:
        from flyteplugins_memory import AccessDenied

        store = open_store(target, trusted=trusted)
        decide = store.accept if verb == "accept" else store.discard
        full_id = resolve_id(store, proposal_id)
        try:
            proposal = decide(full_id, actor=actor, reason=reason)
        except AccessDenied as exc:
            if trusted:
                raise
            raise type(exc)(f"{exc} (add --trusted to {verb} under a read-only prefix)") from None
        _report(store, proposal, json_output)

    command.__doc__ = {
        "accept": "Accept draft proposal ID: write its content to its path and mark it accepted (one commit).",
        "discard": "Discard proposal ID (a draft, or an accepted one: its file stays as it is).",
    }[verb]
    for option in reversed(_DECISION_OPTIONS):
        command = option(command)
    return memory.command(name)(click.argument("proposal_id", metavar="ID")(store_options(json_option(command))))


def _report(store: MemoryStore, proposal: Proposal, json_output: bool) -> None:
    if json_output:
        _render.emit_json({"uri": store.remote_path, "proposal": proposal.model_dump()})
        return
    _render.show(store.remote_path, f"{proposal.status} {proposal.id} -> {proposal.path}")


accept = _decision("accept", "accept")
discard = _decision("discard", "discard")
