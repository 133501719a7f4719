"""Pure: the small pieces every section of the report is made of, and the one way stored text enters it.

Whatever comes from the store goes through `text`, which clips it and escapes it with
``html.escape(..., quote=True)`` (safe in text and in quoted attributes); the markup around it is ours.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence

#: longest text shown for one value (a message, a tool's arguments, a reason); the rest is counted
MAX_TEXT = 4000
_ISO = re.compile(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)")


def text(value: object, limit: int = MAX_TEXT) -> str:
    """`value` as escaped text, clipped to `limit` characters with a count of what was cut."""
    raw = value if isinstance(value, str) else to_json(value)
    if len(raw) <= limit:
        return html.escape(raw, quote=True)
    return html.escape(raw[:limit], quote=True) + f"… (+{len(raw) - limit:,} characters)"


def to_json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def when(value: object) -> str:
    """An ISO-8601 timestamp as ``YYYY-MM-DD HH:MM:SS`` (UTC); anything else as escaped text."""
    match = _ISO.match(value) if isinstance(value, str) else None
    return f"{match[1]} {match[2]}" if match else text(value, 40)


def size(count: int | None) -> str:
    """``1.5 KiB`` style sizes (the CLI's unit family), bytes as they are below 1 KiB."""
    if count is None:
        return "—"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def card(title: str, count: str, body: str) -> str:
    return f'<section class="fmr-card"><h2>{title} <small>{count}</small></h2>{body}</section>'


def more(message: str) -> str:
    return f'<p class="fmr-more">{message}</p>'


def table(headers: Sequence[str], rows: Iterable[str], widths: Sequence[str] = ()) -> str:
    """A table; `widths` (CSS classes, one per column, ``""`` for none) keep short columns from wrapping."""
    classes = [*widths, *[""] * (len(headers) - len(widths))]
    head = "".join(f'<th class="{c}">{h}</th>' if c else f"<th>{h}</th>" for h, c in zip(headers, classes, strict=True))
    # in a box of its own that scrolls sideways on a narrow screen, rather than widening the page
    return f'<div class="fmr-scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def folded(summary: str, body: str, *, opened: bool = False) -> str:
    """A collapsible block (``<details>``: no script needed to open it)."""
    return f"<details{' open' if opened else ''}><summary>{summary}</summary>{body}</details>"


def code(value: str, clipped: int = 0, unit: str = "characters") -> str:
    cut = f'<div class="fmr-more">… {plural(clipped, unit[:-1])} more not shown</div>' if clipped else ""
    return f'<pre class="fmr-code">{text(value, len(value))}</pre>{cut}'
