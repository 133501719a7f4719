"""How commands print: rich tables for people on stdout, JSON for scripts (``--json``), errors on stderr.

With ``--json`` stdout carries exactly one JSON document and nothing else (no tables, no progress, no
colour); human output goes through a rich `Console` that is plain when stdout is not a terminal.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

#: width of tables when stdout is not a terminal (rich's default of 80 columns folds most paths)
PIPE_WIDTH = 160


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
    """A rich table in flyte's CLI style: bold headers, cells folded rather than cut. Cells are plain
    text: stored strings are never read as rich markup."""
    shown = Table(header_style="bold")
    for column in columns:
        shown.add_column(column, overflow="fold")
    for row in rows:
        shown.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    return shown


def show(heading: str | None, body: Any, footer: str = "") -> None:
    """`body` (a table, or plain text) under a bold `heading` line, with a `footer` line below it."""
    console = stdout()
    if heading:
        console.print(Text(heading, style="bold"))
    console.print(Text(body) if isinstance(body, str) else body)
    if footer:
        console.print(Text(footer, style="dim"))


def human_size(size: int) -> str:
    """``1.5 KiB`` style sizes (bytes as they are below 1 KiB)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


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
