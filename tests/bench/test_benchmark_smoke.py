"""The benchmark script runs end to end (tiny sizes; the real run is `make bench`)."""

from __future__ import annotations

import subprocess
import sys

from repo import REPO

SCRIPT = REPO / "benchmarks" / "sync_bench.py"


def test_benchmark_prints_a_side_by_side_table(tmp_path):
    out = tmp_path / "table.md"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--sizes",
            "5",
            "--repeats",
            "1",
            "--writes",
            "5",
            "--no-race",
            "--scale",
            "300",
            "--scale-saves",
            "5",
            "--files",
            "5",
            "--megabytes",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "Ours only, 300 files" in table and "per save** amortized" in table  # the scale table
    assert "| 5 | off | open |" in table and "| 5 | on | save |" in table and "write_text (local)" in table
    for backend in ("local disk", "moto S3"):  # the bulk-save and large-file table (`bulk_bench`)
        operations = (
            "write + save of 5 new 1 KiB files",
            "write + save of one 1 MB file",
            "fresh open + read_text of it",
        )
        for operation in operations:
            assert f"| {backend} | {operation} |" in table, (backend, operation)


def test_search_benchmark_prints_its_table(tmp_path):
    out = tmp_path / "search.md"
    script = SCRIPT.parent / "search_bench.py"
    args = [sys.executable, str(script), "--entries", "20", "--saves", "2", "--no-s3", "--out", str(out)]
    done = subprocess.run(args, capture_output=True, check=False, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "Search over 20 entries" in table and "| local disk | ours: warm search (median) |" in table
    assert "naive scan" in table and "upstream" in table and "per one-file save" in table


def test_export_benchmark_prints_its_table(tmp_path):
    out = tmp_path / "export.md"
    script = SCRIPT.parent / "export_bench.py"
    args = [sys.executable, str(script), "--files", "20", "--repeats", "1", "--out", str(out)]
    done = subprocess.run(args, capture_output=True, check=False, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    table = out.read_text()
    assert "Export + import of a 20-file store" in table
    assert "| local disk |" in table and "| S3 (moto) |" in table
