"""How commands print: rich tables for people on stdout, JSON for scripts (``--json``), errors on stderr.

With ``--json`` stdout carries exactly one JSON document and nothing else (no tables, no progress, no
colour); human output goes through a rich `Console` that is plain when stdout is not a terminal. Stored
strings reach a person's terminal only through `printable`: an escape sequence an agent wrote (a colour, a
window title, a cursor move) shows as its characters and is never run by the terminal.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

#: width of tables when stdout is not a terminal (rich's default of 80 columns folds most paths)
PIPE_WIDTH = 160
#: longest text one table cell shows (a 5 MB message would take rich minutes to fold); --json has it all
MAX_CELL = 2000
#: what a terminal would act on rather than print: C0 controls but newline and tab, DEL, C1 controls, and
#: the bidirectional overrides that reorder what is shown ("Trojan source")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every control character shown as its escape (``\\x1b``), so printing it runs nothing."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


def cell(value: Any) -> Text:
    """A table cell: plain text (never rich markup), control characters escaped, clipped to `MAX_CELL`."""
    text = printable("" if value is None else str(value))
    if len(text) > MAX_CELL:
        text = text[:MAX_CELL] + f"… (+{len(text) - MAX_CELL:,} characters; --json shows all)"
    return Text(text)


def stdout() -> Console:
    """A console on the current stdout (looked up per call, so a redirected stdout is honoured)."""
    terminal = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if terminal else PIPE_WIDTH, highlight=False, soft_wrap=False)


def emit_json(value: Any) -> None:
    """Print `value` as one JSON document on stdout (dataclasses and other objects as plain data)."""
    sys.stdout.write(json.dumps(plain(value), indent=2, ensure_ascii=False, default=str) + "\n")


def plain(value: Any) -> Any:
    """`value` as JSON-ready data: dataclasses become dicts, tuples lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table in flyte's CLI style: bold headers, cells folded rather than cut. Cells are `cell`s:
    stored strings are never read as rich markup nor run as escape sequences."""
    shown = Table(header_style="bold")
    for column in columns:
        shown.add_column(column, overflow="fold")
    for row in rows:
        shown.add_row(*(cell(value) for value in row))
    return shown


def show(heading: str | None, body: Any, footer: str = "") -> None:
    """`body` (a table, or plain text) under a bold `heading` line, with a `footer` line below it."""
    console = stdout()
    if heading:
        console.print(Text(printable(heading), style="bold"))
    console.print(Text(printable(body)) if isinstance(body, str) else body)
    if footer:
        console.print(Text(printable(footer), style="dim"))


def human_size(size: int) -> str:
    """``1.5 KiB`` style sizes (bytes as they are below 1 KiB)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def count(number: int, noun: str) -> str:
    """``1 file``, ``2 files``: a count with its noun in the right number."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def when(timestamp: str) -> str:
    """An ISO-8601 UTC timestamp as ``2026-05-01 12:00:00 UTC`` (anything else as it is)."""
    for suffix in ("+00:00", "Z"):
        if timestamp.endswith(suffix):
            return timestamp[: -len(suffix)].replace("T", " ") + " UTC"
    return timestamp


def one_line(text: str, limit: int = 200) -> str:
    """`text` on one line, cut at `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
