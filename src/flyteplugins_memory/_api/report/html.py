"""Pure: a report `Snapshot` as HTML, with no scripts, no external URLs and every stored string escaped.

`render_fragment` is what a Flyte report tab takes (flyte puts a tab's HTML inside a ``<div>`` of its own
page, which has its own styles: ours are scoped under ``.fmr`` and set everything they rely on);
`render_document` wraps the same fragment into a standalone page; the styles live in ``report.css``.
Each card is built by its own module (`html_chat`, `html_files`, `html_history`, `html_staged`) from the
pieces in `markup`, through whose `text` every stored string passes (clipped, escaped). Cards stack in one
column, the widest content first: two columns left half the page empty beside a short transcript.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING

from .html_chat import sessions_card, transcript_card
from .html_files import files_card
from .html_history import commits_card, events_card
from .html_staged import logs_card, proposals_card
from .markup import size, text, when

if TYPE_CHECKING:
    from .build import Snapshot


@functools.cache
def _css() -> str:
    return resources.files(__name__.rpartition(".")[0]).joinpath("report.css").read_text(encoding="utf-8")


def render_document(snapshot: Snapshot) -> str:
    """A standalone page: the fragment in a document of its own (no scripts, no external URLs)."""
    title = text(f"Memory · {snapshot.key}", 200)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{title}</title></head>\n<body style="margin:0;background:#f6f7f9">\n'
        f"{render_fragment(snapshot)}\n</body></html>\n"
    )


def render_fragment(snapshot: Snapshot) -> str:
    """The page's content with its scoped styles, as a Flyte report tab takes it (no ``<html>``)."""
    cards = [
        transcript_card(snapshot),
        sessions_card(snapshot.logs),
        files_card(snapshot),
        commits_card(snapshot),
        proposals_card(snapshot),
        logs_card(snapshot),
        events_card(snapshot),
    ]
    stack = f'<div class="fmr-stack">{"".join(cards)}</div>'
    return f'<div class="fmr"><style>{_css()}</style>{_header(snapshot)}{stack}</div>'


def _header(s: Snapshot) -> str:
    files, messages = len(s.files) + s.files_hidden, len(s.messages) + s.messages_hidden
    drafts = sum(1 for p in s.proposals if p.status == "draft")
    stats = [
        (f"{files:,}", "file" if files == 1 else "files"),
        (size(s.total_bytes), "in shown files" if s.files_hidden else "in files"),
        (f"{messages:,}", "message" if messages == 1 else "messages"),
        (f"{len(s.commits)}{'+' if s.commits_more else ''}", "commit" if len(s.commits) == 1 else "commits"),
    ]
    if drafts:
        stats.append((f"{drafts:,}", "pending proposal" if drafts == 1 else "pending proposals"))
    chips = "".join(f'<span class="fmr-stat"><b>{n}</b>{word}</span>' for n, word in stats)
    warn = (
        '<p class="fmr-warn">This handle has unsaved changes: files, transcript and audit trail include them; '
        "the commit log shows saved commits only.</p>"
        if s.unsaved
        else ""
    )
    return (
        f'<header><h1>Memory <span class="fmr-key">{text(s.key, 200)}</span></h1>'
        f'<div class="fmr-loc">{text(s.location or "(not saved yet)", 1000)}</div>'
        f'<div class="fmr-stats">{chips}</div>'
        f'<p class="fmr-note">This handle\'s view, generated {when(s.generated_at)} UTC; all times UTC. '
        "Click a file, a change or a log to open it.</p>"
        f"{warn}</header>"
    )
