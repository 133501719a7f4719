"""How long the command line and the package take to start, beside ``import flyte``.

Run: ``python benchmarks/import_bench.py [--runs 7] [--out table.md]``

Each row runs its command in a fresh interpreter `--runs` times and reports the median wall time (the
interpreter's own start included, shown in the first row) and, from one more run, how many modules it
loaded: all of them, and those of this package. ``import flyte`` is the yardstick the issue sets: the
package's import and ``flyte-memory --help`` should cost about as much. The last row loads the whole
library (the first use of any public name), for scale. Times depend on the machine and its load; module
counts do not (tests/cli/test_cli_startup.py asserts those, never a time).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

#: what each row runs, as ``python -c`` code
CASES = [
    ("python -c pass (the interpreter alone)", "pass"),
    ("import flyte", "import flyte"),
    ("import flyteplugins_memory", "import flyteplugins_memory"),
    ("flyte-memory --version", "from flyteplugins_memory.cli import main; main(['--version'])"),
    ("flyte-memory --help", "from flyteplugins_memory.cli import main; main(['--help'])"),
    ("flyte --help (flyte's own CLI)", "from flyte.cli.main import main; main(['--help'])"),
    ("flyte memory --help", "from flyte.cli.main import main; main(['memory', '--help'])"),
    ("first use: from flyteplugins_memory import MemoryStore", "from flyteplugins_memory import MemoryStore"),
]

#: printed at exit by the counting run: every module, and this package's
_COUNT = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.__stderr__.write("
    "'\\nMODULES %d %d\\n' % (len(sys.modules), sum(m.split('.')[0] == 'flyteplugins_memory' for m in sys.modules))))\n"
)


def _env() -> dict[str, str]:
    """This checkout's package first on the path; no colour or terminal width from the caller."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "100", "NO_COLOR": "1"}


def run_once(code: str) -> float:
    """Seconds for one fresh interpreter to run `code` (its output discarded)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, check=True)
    return time.perf_counter() - started


def modules_loaded(code: str) -> tuple[int, int]:
    """(all modules, this package's modules) in `sys.modules` when `code` has run."""
    done = subprocess.run([sys.executable, "-c", _COUNT + code], env=_env(), capture_output=True, text=True, check=True)
    line = next(line for line in done.stderr.splitlines() if line.startswith("MODULES "))
    total, ours = line.split()[1:]
    return int(total), int(ours)


def measure(runs: int) -> list[tuple[str, float, int, int]]:
    """One row per case: label, median seconds, modules, package modules."""
    rows = []
    for label, code in CASES:
        times = [run_once(code) for _ in range(runs)]
        rows.append((label, statistics.median(times), *modules_loaded(code)))
    return rows


def table(rows: list[tuple[str, float, int, int]], runs: int) -> str:
    """A markdown table, each time also as a multiple of ``import flyte``'s."""
    flyte = next(seconds for label, seconds, _, _ in rows if label == "import flyte")
    lines = [
        f"| command (median of {runs} fresh processes) | seconds | vs `import flyte` | modules | of them ours |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| `{label}` | {s:.3f} | {s / flyte:.2f} | {total} | {ours} |" for label, s, total, ours in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per row (the median is shown)")
    parser.add_argument("--out", type=pathlib.Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    text = table(measure(args.runs), args.runs)
    print(text, end="")
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
