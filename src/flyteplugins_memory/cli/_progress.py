"""Progress bars on stderr for long work, shown only to a person watching a terminal: a pulsing one
(`working`) where the store reports no fraction done, a bar of bytes (`bytes_bar`) where it does.

Off with ``--json`` and whenever stderr is not a TTY, so scripts and logs see no animation frames.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ._render import human_size

if TYPE_CHECKING:
    from rich.progress import TaskID

    from flyteplugins_memory import ProgressCallback


def wanted(json_output: bool) -> bool:
    """Whether to draw: a person at a terminal, not a script reading JSON."""
    return not json_output and sys.stderr.isatty()


@contextmanager
def working(description: str, *, enabled: bool) -> Iterator[None]:
    """A pulsing bar with the elapsed time while the body runs (the store reports no fraction done)."""
    if not enabled:
        yield
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as progress:
        progress.add_task(description, total=None)
        yield


#: what each phase of a `ProgressCallback` is called on the bar
_PHASES = {"export": "archiving", "check": "checking the archive", "store": "storing"}


@contextmanager
def bytes_bar(*, enabled: bool) -> Iterator[ProgressCallback | None]:
    """A bar of bytes done out of the total, fed by the `ProgressCallback` it yields (None when not
    `enabled`); each phase the operation reports gets its own line."""
    if not enabled:
        yield None
        return
    # rich.progress loads only where a bar is drawn
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),  # KiB/MiB, as every size the CLI prints
        binary_speed(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as progress:
        tasks: dict[str, TaskID] = {}

        def report(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = progress.add_task(_PHASES.get(phase, phase), total=total or None)
            progress.update(tasks[phase], completed=done, total=total or None)

        yield report


def binary_speed() -> Any:
    """A transfer-speed column in KiB/s and MiB/s (rich's `TransferSpeedColumn` is decimal, kB/s), so one
    bar never mixes unit families."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class BinarySpeed(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            shown = "?" if speed is None else f"{human_size(int(speed))}/s"
            return Text(shown, style="progress.data.speed")

    return BinarySpeed()
