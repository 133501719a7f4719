"""The maintenance benchmark runs end to end (tiny sizes; the real run is `make bench`)."""

from __future__ import annotations

import subprocess
import sys

from repo import REPO

SCRIPT = REPO / "benchmarks" / "maintenance_bench.py"


def test_maintenance_benchmark_prints_upstream_beside_ours(tmp_path):
    out = tmp_path / "table.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--saves", "3", "--commits", "5", "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "| upstream |" in table and "| ours |" in table and "| 5 | first gc |" in table
