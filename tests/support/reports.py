"""Figures a test prints and keeps: the reliability and load tests report what they ran."""

from __future__ import annotations

import json
import os
import pathlib

__all__ = ["report"]


def report(name: str, figures: dict) -> None:
    """Print a test's figures, and keep them as JSON in FLYTEPLUGINS_MEMORY_REPORT_DIR when that is set
    (docs/reliability.md quotes them)."""
    print(name, json.dumps(figures))
    directory = os.environ.get("FLYTEPLUGINS_MEMORY_REPORT_DIR")
    if directory:
        pathlib.Path(directory).mkdir(parents=True, exist_ok=True)
        pathlib.Path(directory, f"{name}.json").write_text(json.dumps(figures, indent=1))
