"""Examples are documentation that runs: every ``workflows/NN_*.py`` script runs to completion."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

WORKFLOWS = sorted((pathlib.Path(__file__).parent.parent / "workflows").glob("[0-9][0-9]_*.py"))


def test_there_are_workflows():
    assert WORKFLOWS


@pytest.mark.parametrize("script", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_runs(script):
    text = script.read_text()
    assert '"""' in text and "Run: " in text, "each example has a docstring with a Run: line"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip()
