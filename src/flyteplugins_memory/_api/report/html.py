"""Pure: a report `Snapshot` as HTML, with no scripts, no external URLs and every stored string escaped.

`render_fragment` is what a Flyte report tab takes (flyte puts a tab's HTML inside a ``<div>`` of its own
page, which has its own styles: ours are scoped under ``.fmr`` and set everything they rely on);
`render_document` wraps the same fragment into a standalone page; the styles live in ``report.css``.
Whatever comes from the store (keys, paths, message contents of any JSON type, tool arguments, actors,
reasons, audit fields) goes through `_text`, which clips it and escapes it with
``html.escape(..., quote=True)``; the markup around it is ours.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..._journal.commit_log import Commit
    from .build import FileRow, Snapshot

#: longest text shown for one value (a message, a tool's arguments, a reason); the rest is counted
MAX_TEXT = 4000
#: roles with a style of their own; any other role is shown as "other" (a role is never a class name)
_ROLES = ("user", "assistant", "system", "tool")
_ISO = re.compile(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)")


@functools.cache
def _css() -> str:
    return resources.files(__name__.rpartition(".")[0]).joinpath("report.css").read_text(encoding="utf-8")


def render_document(snapshot: Snapshot) -> str:
    """A standalone page: the fragment in a document of its own (no scripts, no external URLs)."""
    title = _text(f"Memory · {snapshot.key}", 200)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{title}</title></head>\n<body style="margin:0;background:#f6f7f9">\n'
        f"{render_fragment(snapshot)}\n</body></html>\n"
    )


def render_fragment(snapshot: Snapshot) -> str:
    """The page's content with its scoped styles, as a Flyte report tab takes it (no ``<html>``)."""
    side = [_files(snapshot), _commits(snapshot), _events(snapshot)]
    return (
        f'<div class="fmr"><style>{_css()}</style>{_header(snapshot)}'
        f'<div class="fmr-grid"><div class="fmr-col">{_transcript(snapshot)}</div>'
        f'<div class="fmr-col">{"".join(side)}</div></div></div>'
    )


# -- text ------------------------------------------------------------------------------------------


def _text(value: object, limit: int = MAX_TEXT) -> str:
    """`value` as escaped text, clipped to `limit` characters with a count of what was cut."""
    text = value if isinstance(value, str) else _json(value)
    if len(text) <= limit:
        return html.escape(text, quote=True)
    return html.escape(text[:limit], quote=True) + f"… (+{len(text) - limit:,} characters)"


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _when(value: object) -> str:
    """An ISO-8601 timestamp as ``YYYY-MM-DD HH:MM:SS`` (UTC); anything else as escaped text."""
    match = _ISO.match(value) if isinstance(value, str) else None
    return f"{match[1]} {match[2]}" if match else _text(value, 40)


def _size(size: int | None) -> str:
    if size is None:
        return "—"
    if size < 1024:
        return f"{size} B"
    scaled = float(size)
    for unit in ("KB", "MB", "GB"):
        scaled /= 1024
        if scaled < 1024 or unit == "GB":
            return f"{scaled:.1f} {unit}"
    return ""  # unreachable: the loop returns at "GB"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _card(title: str, count: str, body: str) -> str:
    return f'<section class="fmr-card"><h2>{title} <small>{count}</small></h2>{body}</section>'


def _more(text: str) -> str:
    return f'<p class="fmr-more">{text}</p>'


def _table(headers: Sequence[str], rows: Iterable[str]) -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


# -- header ----------------------------------------------------------------------------------------


def _header(s: Snapshot) -> str:
    files, messages = len(s.files) + s.files_hidden, len(s.messages) + s.messages_hidden
    stats = [
        (f"{files:,}", "file" if files == 1 else "files"),
        (_size(s.total_bytes), "in shown files" if s.files_hidden else "in files"),
        (f"{messages:,}", "message" if messages == 1 else "messages"),
        (f"{len(s.commits)}{'+' if s.commits_more else ''}", "commit" if len(s.commits) == 1 else "commits"),
    ]
    chips = "".join(f'<span class="fmr-stat"><b>{n}</b>{word}</span>' for n, word in stats)
    warn = (
        '<p class="fmr-warn">This handle has unsaved changes: files, transcript and audit trail include them; '
        "the commit log shows saved commits only.</p>"
        if s.unsaved
        else ""
    )
    return (
        f'<header><h1>Memory <span class="fmr-key">{_text(s.key, 200)}</span></h1>'
        f'<div class="fmr-loc">{_text(s.location or "(not saved yet)", 1000)}</div>'
        f'<div class="fmr-stats">{chips}</div>'
        f'<p class="fmr-note">This handle\'s view, generated {_when(s.generated_at)} UTC; all times UTC.</p>'
        f"{warn}</header>"
    )


# -- files -----------------------------------------------------------------------------------------


def _files(s: Snapshot) -> str:
    if not s.files:
        return _card("Files", "none", _more("No files."))
    rows = _tree_rows(s.files)
    more = _more(f"{_plural(s.files_hidden, 'more file')} not shown.") if s.files_hidden else ""
    table = _table(["path", "size", "versions", "last written"], rows)
    return _card("Files", _plural(len(s.files) + s.files_hidden, "file"), table + more)


def _tree_rows(files: Sequence[FileRow]) -> list[str]:
    """Rows of a tree: a directory row where a directory starts (with its total size), then its files."""
    totals = _directory_totals(files)
    rows: list[str] = []
    opened: list[str] = []
    for row in files:
        *dirs, name = row.path.split("/")
        shared = _shared_prefix(opened, dirs)
        for depth in range(shared, len(dirs)):
            prefix = "/".join(dirs[: depth + 1])
            rows.append(_directory_row(dirs[depth], depth, totals.get(prefix, 0)))
        opened = dirs
        rows.append(_file_row(row, name, len(dirs)))
    return rows


def _directory_totals(files: Sequence[FileRow]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for row in files:
        parts = row.path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            totals[prefix] = totals.get(prefix, 0) + (row.size or 0)
    return totals


def _shared_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    shared = 0
    while shared < min(len(a), len(b)) and a[shared] == b[shared]:
        shared += 1
    return shared


def _indent(depth: int) -> str:
    return f'style="padding-left:{8 + 18 * min(depth, 12)}px"'


def _directory_row(name: str, depth: int, total: int) -> str:
    return (
        f'<tr class="fmr-dir"><td class="fmr-mono" {_indent(depth)}>{_text(name, 300)}/</td>'
        f'<td class="fmr-num">{_size(total)}</td><td></td><td></td></tr>'
    )


def _file_row(row: FileRow, name: str, depth: int) -> str:
    written = f'{_text(row.actor, 200)} <span class="fmr-dim">· {_when(row.updated_at)}</span>'
    if row.reason:
        written += f'<div class="fmr-dim">{_text(row.reason, 300)}</div>'
    return (
        f'<tr><td class="fmr-mono" {_indent(depth)} title="{_text(row.path, 1000)}">{_text(name, 300)}</td>'
        f'<td class="fmr-num">{_size(row.size)}</td><td class="fmr-num">{row.versions or "—"}</td>'
        f"<td>{written if row.actor or row.updated_at else '—'}</td></tr>"
    )


# -- transcript ------------------------------------------------------------------------------------


def _transcript(s: Snapshot) -> str:
    total = len(s.messages) + s.messages_hidden
    more = _more(f"{_plural(s.messages_hidden, 'older message')} not shown.") if s.messages_hidden else ""
    chat = "".join(_message(m) for m in s.messages) or _more("No messages.")
    return _card("Transcript", _plural(total, "message"), f'{more}<div class="fmr-chat">{chat}</div>')


def _message(message: dict[str, Any]) -> str:
    role = message.get("role")
    kind = role if isinstance(role, str) and role in _ROLES else "other"
    label = _text(role, 100) if role is not None else "(no role)"
    body = _content(message.get("content"))
    calls = message.get("tool_calls")
    calls_html = "".join(_tool_call(c) for c in calls) if isinstance(calls, list) else ""
    if calls is not None and not isinstance(calls, list):
        calls_html = f'<div class="fmr-call"><pre>{_text(calls)}</pre></div>'
    return (
        f'<div class="fmr-msg fmr-{kind}"><div class="fmr-role"><b>{label}</b>{_about(message, kind)}</div>'
        f"{body}{calls_html}</div>"
    )


def _about(message: dict[str, Any], kind: str) -> str:
    """What a role line adds: a tool result's tool and call id, another message's ``name``."""
    name = message.get("name")
    parts = [f"result of {_text(name, 200)}" if kind == "tool" and name is not None else ""]
    if kind != "tool" and name is not None:
        parts.append(_text(name, 200))
    if message.get("tool_call_id") is not None:
        parts.append(f'<span class="fmr-mono">{_text(message["tool_call_id"], 200)}</span>')
    shown = [p for p in parts if p]
    return f' <span class="fmr-dim">· {" · ".join(shown)}</span>' if shown else ""


def _content(content: object) -> str:
    """A message's content: text as text, a list of parts by their text where they have one, else JSON."""
    if content is None or content == "":
        return ""
    if isinstance(content, list) and all(_is_text_part(p) for p in content):
        content = "\n".join(p["text"] for p in content)
    return f'<p class="fmr-body">{_text(content)}</p>'


def _is_text_part(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)


def _tool_call(call: object) -> str:
    """One entry of ``tool_calls`` (OpenAI's shape: ``{"id", "type", "function": {"name", "arguments"}}``)."""
    if not isinstance(call, dict):
        return f'<div class="fmr-call"><pre>{_text(call)}</pre></div>'
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    name = function.get("name", call.get("name", "?"))
    call_id = call.get("id")
    ident = f' <span class="fmr-dim fmr-mono">{_text(call_id, 200)}</span>' if call_id is not None else ""
    arguments = function.get("arguments", call.get("arguments"))
    return (
        f'<div class="fmr-call">calls <b class="fmr-mono">{_text(name, 200)}</b>{ident}'
        f"<pre>{_text(_arguments(arguments))}</pre></div>"
    )


def _arguments(arguments: object) -> object:
    """Tool arguments as sent (a JSON string, usually) made readable: parsed and re-indented if JSON."""
    if isinstance(arguments, str):
        try:
            return _json(json.loads(arguments))
        except ValueError:
            return arguments
    return "" if arguments is None else arguments


# -- commits and audit -----------------------------------------------------------------------------


def _commits(s: Snapshot) -> str:
    rows = [_commit_row(c) for c in s.commits]
    body = _table(["#", "when", "who / why", "changes"], rows) if rows else _more("No commits.")
    more = _more("Older commits not shown.") if s.commits_more else ""
    count = f"newest {len(s.commits)}" if s.commits_more else _plural(len(s.commits), "commit")
    return _card("Commit log", count, body + more)


def _commit_row(c: Commit) -> str:
    kind = f' <span class="fmr-badge">{_text(c.kind, 40)}</span>' if c.kind not in ("save", "") else ""
    why = f'<div class="fmr-dim">{_text(c.reason, 300)}</div>' if c.reason else ""
    return (
        f'<tr><td class="fmr-num">{c.seq}</td><td class="fmr-time">{_when(c.time)}</td>'
        f"<td>{_text(c.actor, 200)}{kind}{why}</td><td>{_changes(c)}</td></tr>"
    )


def _changes(c: Commit) -> str:
    parts = [f'<span class="fmr-op-write fmr-badge">+</span> {_paths(c.wrote)}' if c.wrote else ""]
    parts.append(f'<span class="fmr-op-delete fmr-badge">&minus;</span> {_paths(c.deleted)}' if c.deleted else "")
    parts.append(_plural(c.appended, "message") + " appended" if c.appended else "")
    parts.append("messages rewritten" if c.rewrote else "")
    return "<br>".join(p for p in parts if p) or '<span class="fmr-dim">—</span>'


def _paths(paths: Sequence[str], shown: int = 6) -> str:
    names = ", ".join(_text(p, 300) for p in paths[:shown])
    rest = f' <span class="fmr-dim">+{len(paths) - shown} more</span>' if len(paths) > shown else ""
    return f'<span class="fmr-mono">{names}</span>{rest}'


def _events(s: Snapshot) -> str:
    rows = [_event_row(e) for e in s.events]
    body = _table(["when", "who", "what"], rows) if rows else _more("No audit events.")
    more = _more("Older events not shown.") if s.events_more else ""
    count = f"newest {len(s.events)}" if s.events_more else _plural(len(s.events), "event")
    return _card("Audit trail", count, body + more)


def _event_row(event: dict[str, Any]) -> str:
    op = event.get("op", "?")
    badge = f"fmr-op-{op}" if op in ("create", "update", "write", "delete") else ""
    why = f'<div class="fmr-dim">{_text(event["reason"], 300)}</div>' if event.get("reason") else ""
    return (
        f'<tr><td class="fmr-time">{_when(event.get("ts", ""))}</td><td>{_text(event.get("actor", ""), 200)}</td>'
        f'<td><span class="fmr-badge {badge}">{_text(op, 40)}</span> '
        f'<span class="fmr-mono">{_text(event.get("path", ""), 300)}</span>{why}</td></tr>'
    )
