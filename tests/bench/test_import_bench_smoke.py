"""benchmarks/import_bench.py: its table and its module count work (one fresh process; the real run, every
row 7 times, is in docs/performance.md)."""

from __future__ import annotations

import importlib.util

from repo import REPO

SCRIPT = REPO / "benchmarks" / "import_bench.py"


def _bench():
    spec = importlib.util.spec_from_file_location("import_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_counts_modules_and_prints_a_table_beside_import_flyte():
    bench = _bench()
    total, ours = bench.modules_loaded("import flyteplugins_memory")
    assert ours == 1 and total > 1
    text = bench.table([("import flyte", 0.4, 211, 0), ("import flyteplugins_memory", 0.1, total, ours)], runs=1)
    lines = text.splitlines()
    assert lines[0].startswith("| command (median of 1 fresh processes)") and "| 0.25 |" in lines[-1]
    assert {label for label, _ in bench.CASES} >= {"import flyte", "import flyteplugins_memory", "flyte-memory --help"}
