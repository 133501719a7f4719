"""Verbs about what happened in a store: ``messages`` (the transcript), ``log`` (commits), ``audit``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import rich_click as click

from . import _render
from ._app import json_option, memory, store_options
from ._target import Target, open_store

if TYPE_CHECKING:
    from flyteplugins_memory import Commit


@memory.command("messages")
@click.option("--tail", type=click.IntRange(min=1), help="Only the last N messages.")
@store_options
@json_option
def messages(tail: int | None, target: Target, json_output: bool) -> None:
    """The transcript: every message (or the last N), with its role and content."""
    store = open_store(target)
    first = max(0, len(store.messages) - tail) if tail else 0
    shown = store.messages[first:]
    if json_output:
        _render.emit_json(shown)
        return
    rows = ((first + i, message.get("role", ""), _message_text(message)) for i, message in enumerate(shown))
    caption = f"{len(shown)} of {_render.count(len(store.messages), 'message')}"
    _render.show(store.remote_path, _render.table(("#", "role", "content"), rows), caption)


def _message_text(message: dict[str, Any]) -> str:
    """A message's content, its tool calls and the call a tool result answers, on one line each."""
    content = message.get("content")
    lines = [content if isinstance(content, str) else json.dumps(content, default=str)] if content else []
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        lines += [_call_text(call) for call in calls]
    elif calls:  # not OpenAI's shape (a hand-written or foreign transcript): shown as it is
        lines.append(f"→ {_render.one_line(json.dumps(calls, default=str), 120)}")
    if message.get("tool_call_id"):
        lines.append(f"(result of {message['tool_call_id']})")
    return "\n".join(lines)


def _call_text(call: object) -> str:
    """One entry of ``tool_calls`` as ``→ name(arguments)``; an entry of any other shape as its JSON."""
    function = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return f"→ {_render.one_line(json.dumps(call, default=str), 120)}"
    return f"→ {function.get('name', '?')}({_render.one_line(str(function.get('arguments', '')), 120)})"


@memory.command("log")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Newest N commits.")
@click.option("--path", "path", help="Only the commits that wrote or deleted this path.")
@store_options
@json_option
def log(limit: int, path: str | None, target: Target, json_output: bool) -> None:
    """The commits, newest first: time, actor, reason and the paths each changed."""
    store = open_store(target)
    commits = store.log(limit, path)
    if json_output:
        _render.emit_json(commits)
        return
    rows = ((c.seq, _render.when(c.time), c.kind, c.actor, c.reason, _changes(c)) for c in commits)
    columns = ("#", "time", "kind", "actor", "reason", "changes")
    _render.show(store.remote_path, _render.table(columns, rows), _render.count(len(commits), "commit"))


def _changes(commit: Commit) -> str:
    parts = [f"+ {p}" for p in commit.wrote] + [f"- {p}" for p in commit.deleted]
    if commit.appended:
        parts.append("+" + _render.count(commit.appended, "message"))
    if commit.rewrote:
        parts.append("transcript rewritten")
    return "\n".join(parts)


@memory.command("audit")
@click.option("--tail", type=click.IntRange(min=1), default=20, show_default=True, help="Last N events.")
@store_options
@json_option
def audit(tail: int, target: Target, json_output: bool) -> None:
    """The audit trail, oldest first: every write and delete with its actor and reason."""
    store = open_store(target)
    events = store.audit_tail(tail)
    if json_output:
        _render.emit_json(events)
        return
    rows = (
        (_render.when(str(e.get("ts", ""))), e.get("actor"), e.get("op"), e.get("path"), e.get("reason"))
        for e in events
    )
    columns = ("time", "actor", "op", "path", "reason")
    _render.show(store.remote_path, _render.table(columns, rows), _render.count(len(events), "event"))
