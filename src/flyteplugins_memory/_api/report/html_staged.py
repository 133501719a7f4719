"""Pure: the Proposals card (every staged change with its status, a draft's content folded) and the
Record logs card (each log's newest records, as JSON lines)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .markup import card, code, folded, more, plural, size, table, text, when

if TYPE_CHECKING:
    from ..._rules.proposals import Proposal
    from .build import Snapshot
    from .extras import LogRows

#: characters of one log's records shown
_RECORDS_CHARS = 20_000
_STATUS = {"draft": "fmr-op-update", "accepted": "fmr-op-write", "discarded": "fmr-op-delete"}


def proposals_card(s: Snapshot) -> str:
    if not s.proposals:
        return ""
    rows = [_proposal_row(p) for p in s.proposals]
    widths = ["fmr-w-id", "", "fmr-w-status", "fmr-w-who", "fmr-w-who"]
    body = table(["id", "path", "status", "proposed", "decision"], rows, widths)
    hidden = more(f"{plural(s.proposals_hidden, 'older proposal')} not shown.") if s.proposals_hidden else ""
    return card("Proposals", plural(len(s.proposals) + s.proposals_hidden, "proposal"), body + hidden)


def _proposal_row(p: Proposal) -> str:
    status = f'<span class="fmr-badge {_STATUS.get(p.status, "")}">{text(p.status, 20)}</span>'
    path = f'<span class="fmr-mono fmr-path">{text(p.path, 300)}</span> <span class="fmr-dim">{size(p.bytes)}</span>'
    if p.content is not None:
        path = folded(path, code(p.content))
    why = f'<div class="fmr-dim">{text(p.reason, 300)}</div>' if p.reason else ""
    proposed = f'{text(p.actor, 200)} <span class="fmr-dim fmr-time">{when(p.created_at)}</span>{why}'
    return (
        f'<tr><td class="fmr-mono fmr-id" title="{text(p.id, 100)}">{text(p.id[:12], 12)}</td><td>{path}</td>'
        f"<td>{status}</td><td>{proposed}</td><td>{_decision(p)}</td></tr>"
    )


def _decision(p: Proposal) -> str:
    if p.decided_at is None:
        return '<span class="fmr-dim">pending</span>'
    why = f'<div class="fmr-dim">{text(p.decision_reason, 300)}</div>' if p.decision_reason else ""
    return f'{text(p.decided_by or "", 200)} <span class="fmr-dim fmr-time">{when(p.decided_at)}</span>{why}'


def logs_card(s: Snapshot) -> str:
    logs = [log for log in s.logs if log.session is None]
    if not logs:
        return ""
    hidden = more(f"{plural(s.logs_hidden, 'more log')} not shown.") if s.logs_hidden else ""
    return card("Record logs", plural(len(logs), "log"), "".join(_log(log) for log in logs) + hidden)


def _log(log: LogRows) -> str:
    left = log.count - len(log.records)
    hidden = more(f"{plural(left, 'older record')} not shown.") if left else ""
    name = f'<span class="fmr-mono fmr-path">{text(log.name, 300)}</span>'
    summary = f"{name} <small>{plural(log.count, 'record')}</small>"
    return folded(summary, hidden + _records(log.records))


def _records(records: Sequence[object]) -> str:
    if not records:
        return more("No records.")
    lines = "\n".join(json.dumps(r, ensure_ascii=False, sort_keys=True, default=str) for r in records)
    return code(lines[:_RECORDS_CHARS], max(0, len(lines) - _RECORDS_CHARS))
