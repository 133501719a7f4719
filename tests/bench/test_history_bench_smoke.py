"""The history benchmark runs end to end (tiny sizes, local disk; the real run is `make bench`)."""

from __future__ import annotations

import subprocess
import sys

from repo import REPO

SCRIPT = REPO / "benchmarks" / "history_bench.py"


def test_history_benchmark_prints_ours_beside_upstream(tmp_path):
    out = tmp_path / "table.md"
    args = ["--commits", "6,12", "--limit", "2", "--no-s3", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, check=False, text=True, timeout=600
    )

    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "| local disk | 6 | 4 req" in table and "| local disk | 12 | 4 req" in table, table  # hint + probe + 2
    assert "upstream: open + read" in table
