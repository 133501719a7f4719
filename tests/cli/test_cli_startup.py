"""What starting the CLI and importing the package load: counted, never timed (timings are
benchmarks/import_bench.py's). ``flyte-memory --help`` and ``--version`` and ``import flyteplugins_memory``
load none of the store's modules (journal, storage, handle, adapters, facade) nor ``flyte.ai.agents``; the
first use of a public name loads them all, exactly as an eager import did (decision 0164)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import flyteplugins_memory
from flyteplugins_memory.cli import memory
from repo import REPO

#: printed at exit by the child: the modules it loaded
_REPORT = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: sys.__stderr__.write('\\nLOADED ' + json.dumps(sorted(sys.modules)) + '\\n'))\n"
)
#: the store's own layers: nothing of them may load to print help or a version
HEAVY = ("_api", "_handle", "_journal", "_rules", "storage", "adapters", "testing", "errors")


def loaded_by(code: str) -> list[str]:
    """The modules in `sys.modules` when a fresh interpreter has run `code` (this checkout's package)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _REPORT + code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    line = next(line for line in done.stderr.splitlines() if line.startswith("LOADED "))
    return json.loads(line.removeprefix("LOADED "))


def ours(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] == "flyteplugins_memory"]


def heavy(modules: list[str]) -> list[str]:
    return [m for m in ours(modules) if m.split(".")[1:2] and m.split(".")[1] in HEAVY]


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["ls", "--help"], ["cat", "--help"]])
def test_help_and_version_load_nothing_of_the_store(argv: list[str]):
    modules = loaded_by(f"from flyteplugins_memory.cli import main; main({argv!r})")
    assert heavy(modules) == [], heavy(modules)
    assert "flyte" not in modules and "fsspec" not in modules and "pydantic" not in modules
    # the package itself, the command modules, and for --version the one module that knows it
    assert {m for m in ours(modules) if not m.startswith("flyteplugins_memory.cli")} <= {
        "flyteplugins_memory",
        "flyteplugins_memory._base",
        "flyteplugins_memory._base.version",
    }


def test_importing_the_package_loads_one_module_of_it():
    modules = loaded_by("import flyteplugins_memory")
    assert ours(modules) == ["flyteplugins_memory"]
    assert "flyte" not in modules


def test_the_first_public_name_used_loads_the_whole_surface():
    modules = loaded_by(
        "import flyteplugins_memory as m\n"
        "assert m.__version__\n"
        "from flyteplugins_memory import StoreNotFound\n"
        "assert StoreNotFound.__module__ == 'flyteplugins_memory', StoreNotFound.__module__\n"
        "assert set(m.__all__) <= set(vars(m)) and set(m.__all__) <= set(dir(m))\n"
    )
    assert "flyteplugins_memory._api.store" in modules and "flyte.ai.agents" in modules


def test_the_surface_exports_what_the_package_lists():
    from flyteplugins_memory._api import surface

    assert surface.__all__ == flyteplugins_memory.__all__
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = flyteplugins_memory.no_such_name  # type: ignore[attr-defined]


def test_version():
    result = CliRunner().invoke(memory, ["--version"])
    assert result.exit_code == 0 and result.output == f"flyteplugins-memory {flyteplugins_memory.__version__}\n"


def test_version_as_a_subprocess():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "flyteplugins_memory.cli", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.startswith("flyteplugins-memory ")


def test_help_renders_as_text():
    """No reStructuredText markup reaches a reader: double backticks never, in any command's help."""
    runner = CliRunner()
    texts = [runner.invoke(memory, ["--help"]).output]
    texts += [runner.invoke(memory, [name, "--help"]).output for name in memory.list_commands(None)]  # type: ignore[arg-type]
    assert all("Usage:" in text for text in texts)
    assert not [text for text in texts if "`" in text]  # Markdown, as flyte renders it: `code` shows as code
