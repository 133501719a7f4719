"""The sync/``.aio`` wrappers keep parameter and return types: pyright checks tests/api/typing/public_api.py.

Every ``reveal_type`` there must show the type its ``# expect:`` comment names, and the file must have no
errors (its deliberately wrong calls carry ignores that pyright reports when they suppress nothing).
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

from repo import REPO

ROOT = REPO
SNIPPET = pathlib.Path(__file__).resolve().parent / "typing" / "public_api.py"


def _pyright(path: pathlib.Path) -> dict:
    # run from the project root: pyright reads [tool.pyright] there and resolves the package from src/
    command = [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable, str(path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def _expected(path: pathlib.Path) -> dict[int, str]:
    """Line number (1-based) -> the type its ``# expect:`` comment names."""
    lines = path.read_text().splitlines()
    return {n: m.group(1) for n, line in enumerate(lines, 1) if (m := re.search(r"\)  # expect: (.+)$", line))}


def test_public_api_types_survive_the_wrapper():
    report = _pyright(SNIPPET)
    diagnostics = report["generalDiagnostics"]
    errors = [d for d in diagnostics if d["severity"] == "error"]
    assert errors == []
    revealed = {
        d["range"]["start"]["line"] + 1: m.group(1)
        for d in diagnostics
        if d["severity"] == "information" and (m := re.match(r'Type of ".*" is "(.*)"$', d["message"]))
    }
    expected = _expected(SNIPPET)
    assert len(expected) >= 20
    assert revealed == expected


def test_a_wrong_call_that_the_checker_misses_fails_the_check(tmp_path):
    # the snippet's ignores are live: one that suppresses nothing is an error
    probe = tmp_path / "probe.py"
    probe.write_text(SNIPPET.read_text().replace("store.exists(3)  # pyright", 'store.exists("x")  # pyright'))
    report = _pyright(probe)
    rules = [d.get("rule") for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert rules == ["reportUnnecessaryTypeIgnoreComment"]
