"""Running the released code of an exact commit, as a task built from an older image would.

`released_source(commit, into)` extracts ``src/flyteplugins_memory`` of that commit (``git archive``) and
`run_released` runs one of the programs below in a child process whose import path puts that code first;
the parent checks what the child saw and what landed in storage. Programs print one JSON line.

    python tests/support/released.py <program> <src dir> '<json config>'
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys
import tarfile

#: The last release before journal objects could evolve (0.2: journal outside the store prefix, strict
#: record models that forbid unknown fields).
BEFORE_EVOLUTION = "1fce8fc"
#: The last commit before checkpoints were split into parts (0.3.0: format 1, inline file lists).
BEFORE_PARTS = "aa5ffa8"
#: Issue 9's release (0.4.0: partitioned checkpoints), the one deployed before issue 11's features.
ISSUE_9_RELEASE = "370d8ce"
#: The last commit before binary search segments and docs that carry their expiry (docs/decisions/0155).
BEFORE_BINARY_SEGMENTS = "5fa6779"
REPO = pathlib.Path(__file__).resolve().parents[2]


def released_source(commit: str, into: pathlib.Path) -> pathlib.Path:
    """The ``src`` directory of `commit`, extracted under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit, "src/flyteplugins_memory"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def start_released(src: pathlib.Path, program: str, config: dict) -> subprocess.Popen:
    """Start `program` of this file in a child process that runs the released code at `src`."""
    return subprocess.Popen(
        [sys.executable, __file__, program, str(src), json.dumps(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(src)},
    )


def result_of(child: subprocess.Popen) -> dict:
    """What a child started by `start_released` printed last (it must exit cleanly)."""
    out, err = child.communicate(timeout=300)
    if child.returncode != 0:
        raise AssertionError(f"released program failed:\n{err[-4000:]}")
    return json.loads(out.strip().splitlines()[-1])


def run_released(src: pathlib.Path, program: str, config: dict) -> dict:
    """Run `program` of this file with the released code at `src`; returns what it printed."""
    return result_of(start_released(src, program, config))


def _outcome(call) -> dict:
    from flyteplugins_memory import MemoryStoreError

    try:
        return {"result": call(), "error": "", "message": ""}
    except MemoryStoreError as exc:
        return {"result": None, "error": type(exc).__name__, "message": str(exc)}


def write(config: dict) -> dict:
    """Create or open the store and save each of `writes` ({path: text}) as its own commit."""
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.get_or_create(key=config["key"])
    for path, text in config["writes"].items():
        store.write_text(path, text, actor="released")
        store.append({"role": "user", "content": path})
        store.save()
    return {"files": store.list_paths()}


def read(config: dict) -> dict:
    """Open the store and read every file, or report the typed error opening gave."""
    from flyteplugins_memory import MemoryStore

    def files() -> dict:
        store = MemoryStore.get_or_create(key=config["key"])
        return {p: store.read_text(p) for p in store.list_paths()}

    return _outcome(files)


def save_after(config: dict) -> dict:
    """Open the store, wait until the parent says go (it commits meanwhile), then write and save."""
    import time

    from flyteplugins_memory import MemoryStore

    store = MemoryStore.get_or_create(key=config["key"])
    pathlib.Path(config["ready"]).touch()
    while not os.path.exists(config["go"]):
        time.sleep(0.01)
    store.write_text("released.txt", "from the released version")
    return _outcome(lambda: str(store.save()) and None)


def search(config: dict) -> dict:
    """Open the store, search for `query`, then save each of `writes` ({path: text}) as its own commit."""
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.get_or_create(key=config["key"])
    hits = [hit.path for hit in store.search(config["query"])]
    for path, text in config.get("writes", {}).items():
        store.write_text(path, text, actor="released")
        store.save()
    return {"hits": hits}


PROGRAMS = {"write": write, "read": read, "save_after": save_after, "search": search}


if __name__ == "__main__":
    program, source, raw = sys.argv[1], pathlib.Path(sys.argv[2]), json.loads(sys.argv[3])
    sys.path.insert(0, str(source))  # the released package, before any installed one
    sys.path.append(os.path.dirname(__file__))
    import flyteplugins_memory

    assert pathlib.Path(flyteplugins_memory.__file__).is_relative_to(source), flyteplugins_memory.__file__
    from workers import setup

    setup(raw)
    print(json.dumps(PROGRAMS[program](raw)), flush=True)
