"""A progress bar on stderr for long work, shown only to a person watching a terminal.

Off with ``--json`` and whenever stderr is not a TTY, so scripts and logs see no animation frames.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


def wanted(json_output: bool) -> bool:
    """Whether to draw: a person at a terminal, not a script reading JSON."""
    return not json_output and sys.stderr.isatty()


@contextmanager
def working(description: str, *, enabled: bool) -> Iterator[None]:
    """A pulsing bar with the elapsed time while the body runs (the store reports no fraction done)."""
    if not enabled:
        yield
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as progress:
        progress.add_task(description, total=None)
        yield
