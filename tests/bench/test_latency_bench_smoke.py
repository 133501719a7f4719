"""The latency benchmark runs end to end (tiny sizes; the real run is `make bench`), and its round-trip
measure counts what it says: requests issued together once, requests one after another each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from repo import REPO

SCRIPT = REPO / "benchmarks" / "latency_bench.py"
sys.path.insert(0, str(SCRIPT.parent))

from latency_bench import waves_and_peak  # noqa: E402


def test_waves_count_the_longest_chain_of_requests_one_after_another():
    together = [(0.0, 1.0)] * 5
    assert waves_and_peak(together) == (1, 5)
    one_after_another = [(0.0, 1.0), (1.0, 2.0), (2.5, 3.0)]
    assert waves_and_peak(one_after_another) == (3, 1)
    pool_of_two = [(0.0, 1.0), (0.0, 1.0), (1.0, 2.0), (1.0, 2.0), (2.0, 3.0)]  # 5 requests, 2 at a time
    assert waves_and_peak(pool_of_two) == (3, 2)
    overlapping_chain = [(0.0, 1.0), (0.5, 1.5), (1.2, 2.0)]  # the third waits for the first only
    assert waves_and_peak(overlapping_chain) == (2, 2)
    assert waves_and_peak([]) == (0, 0)


@pytest.mark.slow  # half a minute of moto, a proxy and upstream: the make test budget is tight
def test_latency_benchmark_prints_upstream_ours_and_the_floor(tmp_path):
    out = tmp_path / "table.md"
    tiny = ["--delays", "0,5", "--files", "20", "--entries", "40", "--megabytes", "1"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *tiny, "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=SCRIPT.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "| 5 ms | one-file change + save (20 files) |" in table
    assert table.count(" waves, peak ") >= 2 * 15  # every cell of both delays was measured
