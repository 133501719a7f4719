"""Pure: the Transcript card (the store's messages as a chat, each with its time) and the Sessions card
(each ``store.session(name)``'s newest messages, folded, the same way)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .markup import card, folded, more, plural, text, to_json, when

if TYPE_CHECKING:
    from .build import Snapshot
    from .extras import LogRows

#: roles with a style of their own; any other role is shown as "other" (a role is never a class name)
_ROLES = ("user", "assistant", "system", "tool")


def transcript_card(s: Snapshot) -> str:
    total = len(s.messages) + s.messages_hidden
    hidden = more(f"{plural(s.messages_hidden, 'older message')} not shown.") if s.messages_hidden else ""
    times = [*s.message_times, *[""] * (len(s.messages) - len(s.message_times))]
    chat = "".join(message(m, t) for m, t in zip(s.messages, times, strict=True)) or more("No messages.")
    return card("Transcript", plural(total, "message"), f'{hidden}<div class="fmr-chat">{chat}</div>')


def sessions_card(logs: Sequence[LogRows]) -> str:
    """Sessions (``store.session(name)``): one fold per session, its newest messages as a chat."""
    sessions = [log for log in logs if log.session is not None]
    if not sessions:
        return ""
    folds = "".join(_session(log) for log in sessions)
    return card("Sessions", plural(len(sessions), "session"), folds)


def _session(log: LogRows) -> str:
    left = log.count - len(log.records)
    hidden = more(f"{plural(left, 'older message')} not shown.") if left else ""
    chat = "".join(message(m, "") if isinstance(m, dict) else _not_a_message(m) for m in log.records)
    summary = f'<span class="fmr-mono">{text(log.session, 300)}</span> <small>{plural(log.count, "message")}</small>'
    return folded(summary, f'{hidden}<div class="fmr-chat">{chat}</div>')


def _not_a_message(record: object) -> str:
    return f'<div class="fmr-msg fmr-other"><pre class="fmr-code">{text(record)}</pre></div>'


def message(item: dict[str, Any], time: str) -> str:
    role = item.get("role")
    kind = role if isinstance(role, str) and role in _ROLES else "other"
    label = text(role, 100) if role is not None else "(no role)"
    body = _content(item.get("content"))
    calls = item.get("tool_calls")
    calls_html = "".join(_tool_call(c) for c in calls) if isinstance(calls, list) else ""
    if calls is not None and not isinstance(calls, list):
        calls_html = f'<div class="fmr-call"><pre>{text(calls)}</pre></div>'
    return (
        f'<div class="fmr-msg fmr-{kind}"><div class="fmr-role"><b>{label}</b>{_about(item, kind)}'
        f"{_time(time)}</div>{body}{calls_html}</div>"
    )


def _time(time: str) -> str:
    if not time:
        return ""
    shown = "unsaved" if time == "unsaved" else when(time)
    return f' <span class="fmr-msg-time">{shown}</span>'


def _about(item: dict[str, Any], kind: str) -> str:
    """What a role line adds: a tool result's tool and call id, another message's ``name``."""
    name = item.get("name")
    parts = [f"result of {text(name, 200)}" if kind == "tool" and name is not None else ""]
    if kind != "tool" and name is not None:
        parts.append(text(name, 200))
    if item.get("tool_call_id") is not None:
        parts.append(f'<span class="fmr-mono fmr-hash">{text(item["tool_call_id"], 200)}</span>')
    shown = [p for p in parts if p]
    return f' <span class="fmr-dim">· {" · ".join(shown)}</span>' if shown else ""


def _content(content: object) -> str:
    """A message's content: text as text, a list of parts by their text where they have one, else JSON."""
    if content is None or content == "":
        return ""
    if isinstance(content, list) and all(_is_text_part(p) for p in content):
        content = "\n".join(p["text"] for p in content)
    return f'<p class="fmr-body">{text(content)}</p>'


def _is_text_part(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)


def _tool_call(call: object) -> str:
    """One entry of ``tool_calls`` (OpenAI's shape: ``{"id", "type", "function": {"name", "arguments"}}``)."""
    if not isinstance(call, dict):
        return f'<div class="fmr-call"><pre>{text(call)}</pre></div>'
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    name = function.get("name", call.get("name", "?"))
    call_id = call.get("id")
    ident = f' <span class="fmr-dim fmr-mono fmr-hash">{text(call_id, 200)}</span>' if call_id is not None else ""
    arguments = function.get("arguments", call.get("arguments"))
    return (
        f'<div class="fmr-call">calls <b class="fmr-mono">{text(name, 200)}</b>{ident}'
        f"<pre>{text(_arguments(arguments))}</pre></div>"
    )


def _arguments(arguments: object) -> object:
    """Tool arguments as sent (a JSON string, usually) made readable: parsed and re-indented if JSON."""
    if isinstance(arguments, str):
        try:
            return to_json(json.loads(arguments))
        except ValueError:
            return arguments
    return "" if arguments is None else arguments
