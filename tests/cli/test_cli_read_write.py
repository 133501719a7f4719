"""``cat --bytes`` / ``--output``, the ``write`` verb, ``ls --depth``, and flyte's ``-of json`` under
``flyte memory``: through click's runner and, where the issue asks, as a subprocess."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from datetime import timedelta

import pytest
from click.testing import CliRunner

from flyteplugins_memory import MemoryStore
from flyteplugins_memory.cli import memory
from repo import REPO

BINARY = bytes(range(256))


@pytest.fixture
def uri(tmp_path: pathlib.Path) -> str:
    location = str(tmp_path / "store")
    store = MemoryStore("cli", remote_path=location)
    store.write_text("notes/a.md", "tea", actor="planner")
    store.write_text("notes/deep/b/c.md", "deep", actor="planner")
    store.write_text("top.md", "top")
    store.write_bytes("bin/x.bin", BINARY)
    store.save()
    return location


def run(*args: str, input: bytes | str | None = None):
    return CliRunner().invoke(memory, list(args), input=input)


def failing(code: int, *args: str) -> str:
    result = run(*args)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    return result.stderr


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}


# -- cat of a binary file ---------------------------------------------------------------------------------------


def test_cat_bytes_writes_the_stored_bytes_to_a_pipe(uri: str):
    done = subprocess.run(
        [sys.executable, "-m", "flyteplugins_memory.cli", "cat", "bin/x.bin", "--bytes", "--uri", uri],
        env=_env(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, BINARY, b"")


def test_cat_output_writes_a_file_and_refuses_to_replace_one(uri: str, tmp_path: pathlib.Path):
    out = tmp_path / "x.bin"
    assert run("cat", "bin/x.bin", "--output", str(out), "--uri", uri).exit_code == 0
    assert out.read_bytes() == BINARY
    assert "--force" in failing(2, "cat", "bin/x.bin", "--output", str(out), "--uri", uri)
    assert run("cat", "notes/a.md", "-o", str(out), "-f", "--uri", uri).exit_code == 0
    assert out.read_bytes() == b"tea"


def test_cat_output_into_a_missing_folder_fails(uri: str, tmp_path: pathlib.Path):
    assert "create it first" in failing(2, "cat", "bin/x.bin", "-o", str(tmp_path / "no" / "x.bin"), "--uri", uri)
    assert not (tmp_path / "no").exists()


def test_cat_of_a_binary_file_names_bytes_and_output(uri: str):
    message = failing(1, "cat", "bin/x.bin", "--uri", uri)
    assert "--bytes" in message and "--output" in message


# -- write ------------------------------------------------------------------------------------------------------


def test_write_from_stdin_with_metadata_actor_and_reason(uri: str):
    result = run(
        "write", "notes/new.md", "--metadata", "topic=tea", "--metadata", "n=3", "--actor", "me",
        "--reason", "why", "--uri", uri, input="hello\n",
    )  # fmt: skip
    assert result.exit_code == 0, (result.stdout, result.stderr)
    store = MemoryStore.open(remote_path=uri)
    meta = store.get_meta("notes/new.md")
    assert store.read_text("notes/new.md") == "hello\n"
    assert meta is not None and meta.metadata == {"topic": "tea", "n": 3}
    assert (meta.updated_by, meta.reason) == ("me", "why")
    assert store.log(1)[0].actor == "me"


def test_write_from_a_file_keeps_binary_bytes(uri: str, tmp_path: pathlib.Path):
    source = tmp_path / "in.bin"
    source.write_bytes(BINARY[::-1])
    result = run("write", "bin/y.bin", "--from", str(source), "--uri", uri, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["kind"] == "bytes"
    assert MemoryStore.open(remote_path=uri).read_bytes("bin/y.bin") == BINARY[::-1]
    forced = run("write", "t.bin", "--bytes", "--uri", uri, "--json", input="text")
    assert json.loads(forced.stdout)["kind"] == "bytes"


def test_write_passes_the_ttl(uri: str, monkeypatch):
    seen: list[object] = []
    original = MemoryStore.write_text

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("ttl"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MemoryStore, "write_text", spy)
    assert run("write", "tmp.md", "--ttl", "90m", "--uri", uri, input="x").exit_code == 0
    assert seen == [timedelta(minutes=90)]
    assert "--ttl" in failing(2, "write", "tmp.md", "--ttl", "soon", "--uri", uri)


def test_write_refuses_bad_metadata_and_a_missing_store(uri: str, tmp_path: pathlib.Path):
    assert "KEY=VALUE" in failing(2, "write", "a.md", "--metadata", "oops", "--uri", uri)
    assert "no memory store" in failing(1, "write", "a.md", "--uri", str(tmp_path / "nothing"))


# -- ls --depth -------------------------------------------------------------------------------------------------


def test_ls_depth_folds_deeper_folders(uri: str):
    document = json.loads(run("ls", "--depth", "1", "--uri", uri, "--json").stdout)
    assert [f["path"] for f in document["files"]] == ["top.md"]
    assert document["folded"] == [
        {"path": "bin/", "files": 1, "bytes": 256},
        {"path": "notes/", "files": 2, "bytes": 7},
    ]
    under = json.loads(run("ls", "notes", "--depth", "1", "--uri", uri, "--json").stdout)
    assert [f["path"] for f in under["files"]] == ["notes/a.md"]
    assert under["folded"] == [{"path": "notes/deep/", "files": 1, "bytes": 4}]
    table = run("ls", "--depth", "1", "--uri", uri).stdout
    assert "(2 files below --depth)" in table and "(1 file below --depth)" in table and "a.md" not in table
    assert "4 files" in table


def test_ls_without_depth_is_unchanged(uri: str):
    document = json.loads(run("ls", "--uri", uri, "--json").stdout)
    assert "folded" not in document and len(document["files"]) == 4


# -- flyte's global output format -------------------------------------------------------------------------------


def test_flyte_output_format_json_is_honoured(uri: str):
    from flyte.cli.main import main as flyte_main

    result = CliRunner().invoke(flyte_main, ["-of", "json", "memory", "ls", "--uri", uri])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert next(f["path"] for f in json.loads(result.stdout)["files"]) == "bin/x.bin"
    table = CliRunner().invoke(flyte_main, ["memory", "ls", "--uri", uri])
    assert table.exit_code == 0 and "┃ path" in table.stdout


def test_flyte_output_format_json_as_a_subprocess(uri: str):
    flyte = str(pathlib.Path(sys.executable).parent / "flyte")
    (pathlib.Path(uri).parent / "raw").mkdir()
    done = subprocess.run(
        [flyte, "-of", "json", "memory", "keys", "--root", str(pathlib.Path(uri).parent / "raw")],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
