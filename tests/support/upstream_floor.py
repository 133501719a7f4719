"""Run flyte-sdk's own agent tests against our store (the floor of the drop-in promise).

Usage::

    python tests/support/upstream_floor.py /path/to/flyte-sdk          # a checkout, or a bare git directory

Copies ``tests/flyte/ai/agents/test_agent.py`` and ``tests/conftest.py`` from that flyte-sdk into a scratch
folder (nothing of theirs enters this repository), points the test module's imports of ``MemoryStore``,
the errors, ``MESSAGES_PATH`` and the four path helpers at ours, and runs pytest there. Deliberate
differences are listed in docs/decisions/0026-upstream-s-tests-that-we-pass-differently.md. Needs no
network once the checkout exists; CI does not run it because fetching flyte-sdk would.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile

TEST = "tests/flyte/ai/agents/test_agent.py"
CONFTEST = "tests/conftest.py"
ANCHOR = "from flyte.models import PathRewrite, RawDataPath\n"
OURS = """
# --- pointed at flyteplugins-memory by tests/support/upstream_floor.py ---
from flyteplugins_memory import MESSAGES_PATH, AccessDenied, ConcurrencyError, MemoryStore, MemoryStoreError
from flyteplugins_memory._rules.location import join_remote_path as _join_remote_path
from flyteplugins_memory._rules.location import rewrite_mounted_path as _normalize_raw_data_path
from flyteplugins_memory._rules.location import storage_root as _storage_root
from flyteplugins_memory._rules.paths import validate_segment as _ensure_namespace_segment


def _memory_storage_root(raw_data_path, *, path_rewrite=None):
    return _storage_root(raw_data_path, path_rewrite)
"""
PYTEST_INI = "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"


def read_from(sdk: pathlib.Path, name: str) -> str:
    if (sdk / name).is_file():
        return (sdk / name).read_text()
    return subprocess.run(
        ["git", "--git-dir", str(sdk), "show", f"HEAD:{name}"], check=True, capture_output=True, text=True
    ).stdout


def main(sdk: pathlib.Path, pytest_args: list[str]) -> int:
    source = read_from(sdk, TEST)
    if ANCHOR not in source:
        raise SystemExit(f"{TEST} changed shape: cannot find {ANCHOR.strip()!r} to point imports after")
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="upstream-floor-"))
    (scratch / "test_agent_against_ours.py").write_text(source.replace(ANCHOR, ANCHOR + OURS, 1))
    (scratch / "conftest.py").write_text(read_from(sdk, CONFTEST))
    (scratch / "pytest.ini").write_text(PYTEST_INI)
    print(f"running upstream's agent tests against flyteplugins-memory in {scratch}")
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args], cwd=scratch)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sys.exit(main(pathlib.Path(sys.argv[1]), sys.argv[2:]))
