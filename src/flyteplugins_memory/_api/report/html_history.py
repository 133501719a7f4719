"""Pure: the Commit log card (each commit with its changes, the newest ones as diffs) and the Audit trail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .markup import card, folded, more, plural, table, text, when

if TYPE_CHECKING:
    from ..._journal.commit_log import Commit
    from .build import Snapshot
    from .contents import FileDiff


def commits_card(s: Snapshot) -> str:
    diffs = s.diffs or {}
    rows = [_commit_row(c, diffs.get(c.seq)) for c in s.commits]
    widths = ["fmr-w-seq", "fmr-w-time", "fmr-w-who", ""]
    body = table(["#", "when", "who / why", "changes"], rows, widths) if rows else more("No commits.")
    hidden = more("Older commits not shown.") if s.commits_more else ""
    count = f"newest {len(s.commits)}" if s.commits_more else plural(len(s.commits), "commit")
    return card("Commit log", count, body + hidden)


def _commit_row(c: Commit, diffs: list[FileDiff] | None) -> str:
    kind = f' <span class="fmr-badge">{text(c.kind, 40)}</span>' if c.kind not in ("save", "") else ""
    why = f'<div class="fmr-dim">{text(c.reason, 300)}</div>' if c.reason else ""
    ident = f'<div class="fmr-dim fmr-mono fmr-hash">{text(c.id, 100)}</div>' if c.id else ""
    return (
        f'<tr><td class="fmr-num">{c.seq}</td><td class="fmr-time">{when(c.time)}</td>'
        f"<td>{text(c.actor, 200)}{kind}{why}{ident}</td><td>{_changes(c, diffs)}</td></tr>"
    )


def _changes(c: Commit, diffs: list[FileDiff] | None) -> str:
    if diffs is not None:
        parts = [_diff(d) for d in diffs]
        left = len(c.wrote) + len(c.deleted) - len(diffs)
        parts.append(f'<span class="fmr-dim">+{left} more paths</span>' if left > 0 else "")
    else:
        parts = [f'<span class="fmr-op-write fmr-badge">+</span> {_paths(c.wrote)}' if c.wrote else ""]
        parts.append(f'<span class="fmr-op-delete fmr-badge">&minus;</span> {_paths(c.deleted)}' if c.deleted else "")
    parts.append(plural(c.appended, "message") + " appended" if c.appended else "")
    parts.append("messages rewritten" if c.rewrote else "")
    return "".join(f"<div>{p}</div>" for p in parts if p) or '<span class="fmr-dim">—</span>'


def _diff(d: FileDiff) -> str:
    badge = (
        '<span class="fmr-op-delete fmr-badge">&minus;</span>'
        if d.kind == "delete"
        else '<span class="fmr-op-write fmr-badge">+</span>'
    )
    summary = f'{badge} <span class="fmr-mono fmr-path">{text(d.path, 300)}</span>'
    if d.note:
        return f'{summary} <span class="fmr-dim">· {text(d.note, 200)}</span>'
    lines = "".join(_diff_line(line) for line in d.text.splitlines())
    cut = more(f"… {plural(d.clipped, 'line')} more not shown") if d.clipped else ""
    return folded(summary, f'<pre class="fmr-code fmr-diff">{lines}</pre>{cut}')


def _diff_line(line: str) -> str:
    """One line of a unified diff, coloured by its first character (file headers apart)."""
    kind = ""
    if line.startswith(("+++", "---")):
        kind = "fmr-d-head"
    elif line.startswith("@@"):
        kind = "fmr-d-hunk"
    elif line.startswith("+"):
        kind = "fmr-d-add"
    elif line.startswith("-"):
        kind = "fmr-d-del"
    shown = text(line, 2000)
    return f'<span class="{kind}">{shown}</span>\n' if kind else f"{shown}\n"


def _paths(paths: Sequence[str], shown: int = 6) -> str:
    names = ", ".join(text(p, 300) for p in paths[:shown])
    rest = f' <span class="fmr-dim">+{len(paths) - shown} more</span>' if len(paths) > shown else ""
    return f'<span class="fmr-mono fmr-path">{names}</span>{rest}'


def events_card(s: Snapshot) -> str:
    rows = [_event_row(e) for e in s.events]
    widths = ["fmr-w-time", "fmr-w-who", ""]
    body = table(["when", "who", "what"], rows, widths) if rows else more("No audit events.")
    hidden = more("Older events not shown.") if s.events_more else ""
    count = f"newest {len(s.events)}" if s.events_more else plural(len(s.events), "event")
    return card("Audit trail", count, body + hidden)


def _event_row(event: dict[str, Any]) -> str:
    op = event.get("op", "?")
    badge = f"fmr-op-{op}" if op in ("create", "update", "write", "delete") else ""
    why = f'<div class="fmr-dim">{text(event["reason"], 300)}</div>' if event.get("reason") else ""
    return (
        f'<tr><td class="fmr-time">{when(event.get("ts", ""))}</td><td>{text(event.get("actor", ""), 200)}</td>'
        f'<td><span class="fmr-badge {badge}">{text(op, 40)}</span> '
        f'<span class="fmr-mono fmr-path">{text(event.get("path", ""), 300)}</span>{why}</td></tr>'
    )
