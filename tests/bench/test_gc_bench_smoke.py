"""The gc benchmark runs end to end (tiny sizes; the real run, 10,000 commits, is in docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

from repo import REPO

SCRIPT = REPO / "benchmarks" / "gc_bench.py"


def test_gc_benchmark_prints_the_short_history_beside_the_long_one(tmp_path):
    out = tmp_path / "table.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--commits", "3,12", "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "| 3 | first gc |" in table and "| 12 | after 50 more commits |" in table and "| 12 | dry run |" in table
