"""Messages that help a user through the first hour: each names what to type next (issue 27's list).
Through click's runner, one case as a subprocess."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from click.testing import CliRunner

from flyteplugins_memory import MemoryStore
from flyteplugins_memory.cli import memory
from flyteplugins_memory.cli._render import human_size
from flyteplugins_memory.cli._staged import SHORT_ID, short_ids
from repo import REPO


@pytest.fixture
def uri(tmp_path: pathlib.Path) -> str:
    location = str(tmp_path / "store")
    store = MemoryStore("cli", remote_path=location)
    store.write_text("notes/a.md", "tea")
    store.save()
    store.write_text("notes/a.md", "green tea")
    store.save()
    return location


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(memory, list(args), input=input)


def failing(code: int, *args: str, input: str | None = None) -> str:
    result = run(*args, input=input)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip() and "[y/N]" not in line]
    assert len(lines) == 1 and lines[0].startswith("error: ") and result.stdout == "", result.stderr
    return lines[0]


# -- proposals: short ids that accept and discard take ----------------------------------------------------------


def test_proposals_show_short_ids_that_accept_and_discard_take(uri: str):
    store = MemoryStore.open(remote_path=uri)
    first = store.propose("notes/b.md", "b")
    second = store.propose("notes/c.md", "c")
    store.save()
    table = run("proposals", "--uri", uri).stdout
    assert first.id[:SHORT_ID] in table and first.id not in table
    assert run("accept", first.id[:SHORT_ID], "--uri", uri).exit_code == 0
    assert run("discard", second.id[:SHORT_ID], "--uri", uri).exit_code == 0
    statuses = {p.id: p.status for p in MemoryStore.open(remote_path=uri).proposals()}
    assert statuses == {first.id: "accepted", second.id: "discarded"}
    assert "proposal" in failing(1, "accept", "ffffffffff", "--uri", uri).lower()


def test_short_ids_grow_until_unique():
    ids = ["abcdefgh11", "abcdefgh22", "zzzzzzzzzz"]
    assert short_ids(ids) == {"abcdefgh11": "abcdefgh1", "abcdefgh22": "abcdefgh2", "zzzzzzzzzz": "zzzzzzzz"}


def test_an_ambiguous_prefix_asks_for_more(uri: str):
    store = MemoryStore.open(remote_path=uri)
    ids = {store.propose(f"notes/p{i}.md", "x").id for i in range(40)}
    store.save()
    common = next(c for c in "0123456789abcdef" if sum(i.startswith(c) for i in ids) > 1)
    assert "type more" in failing(2, "discard", common, "--uri", uri)


def test_refusing_under_a_read_only_prefix_names_trusted(uri: str):
    MemoryStore.open(remote_path=uri, trusted=True).set_read_only_prefixes(["memory/"])
    store = MemoryStore.open(remote_path=uri)
    draft = store.propose("memory/m.md", "m")
    store.save()
    assert "--trusted" in failing(2, "accept", draft.id, "--uri", uri)
    assert "--trusted" in failing(2, "discard", draft.id[:SHORT_ID], "--uri", uri)
    assert run("accept", draft.id, "--trusted", "--uri", uri).exit_code == 0


# -- export and report ------------------------------------------------------------------------------------------


def test_export_onto_an_existing_file_names_force(uri: str, tmp_path: pathlib.Path):
    dest = tmp_path / "a.tar.gz"
    dest.write_bytes(b"old")
    message = failing(2, "export", str(dest), "--uri", uri)
    assert "--force" in message and "overwrite" not in message
    assert run("export", str(dest), "--force", "--uri", uri).exit_code == 0


@pytest.mark.parametrize("verb", [["export"], ["report", "--html"]])
def test_export_and_report_into_a_missing_folder_fail(uri: str, tmp_path: pathlib.Path, verb: list[str]):
    target = tmp_path / "no-such-folder" / "out.file"
    assert "create it first" in failing(2, *verb, str(target), "--uri", uri)
    assert not target.parent.exists()


# -- purge and gc ask and refuse as rm does ---------------------------------------------------------------------


def test_purge_of_a_path_that_never_existed_exits_like_rm(uri: str):
    rm = failing(1, "rm", "never.md", "--yes", "--uri", uri)
    purge = failing(1, "purge", "never.md", "--yes", "--uri", uri)
    assert "no file 'never.md'" in rm and "no file 'never.md'" in purge


def test_gc_window_zero_asks_first(uri: str):
    assert "aborted" in failing(1, "gc", "--window", "0s", "--uri", uri, input="n\n")
    assert len(MemoryStore.open(remote_path=uri).log(10)) == 2  # nothing collected
    assert run("gc", "--window", "0s", "--uri", uri, input="y\n").exit_code == 0
    assert run("gc", "--window", "0", "--yes", "--json", "--uri", uri).exit_code == 0
    assert "[y/N]" not in run("gc", "--window", "24h", "--uri", uri).stderr  # a real window: nothing asked


# -- a missing root -------------------------------------------------------------------------------------------


def test_a_missing_local_root_is_said(tmp_path: pathlib.Path):
    missing = str(tmp_path / "nonexistent")
    assert "no storage root" in failing(1, "keys", "--root", missing)
    assert f"(the storage root {missing} does not exist)" in failing(1, "ls", "--key", "k", "--root", missing)
    (tmp_path / "nonexistent").mkdir()
    assert "storage root" not in failing(1, "ls", "--key", "k", "--root", missing)  # only the store is missing


def test_a_missing_root_as_a_subprocess(tmp_path: pathlib.Path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "flyteplugins_memory.cli", "keys", "--root", str(tmp_path / "nope")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and done.stderr.startswith("error: no storage root") and done.stdout == ""


# -- one unit family ------------------------------------------------------------------------------------------


def test_sizes_and_progress_bars_use_binary_units():
    from flyteplugins_memory.cli import _progress

    assert human_size(1536) == "1.5 KiB"
    source = pathlib.Path(_progress.__file__).read_text()
    assert "DownloadColumn(binary_units=True)" in source  # rich's default is kB: the one place to say KiB
    assert "TransferSpeedColumn()" not in source  # decimal only in rich

    from rich.progress import Progress

    with Progress(_progress.binary_speed(), disable=True) as progress:
        progress.add_task("x", total=None)
        task = progress.tasks[0]
        task.finished_speed = 3 * 1024 * 1024
        assert str(_progress.binary_speed().render(task)) == "3.0 MiB/s"


def test_json_of_proposals_keeps_full_ids(uri: str):
    store = MemoryStore.open(remote_path=uri)
    draft = store.propose("notes/z.md", "z")
    store.save()
    listed = json.loads(run("proposals", "--json", "--uri", uri).stdout)["proposals"]
    assert [p["id"] for p in listed] == [draft.id]


# -- storage: retries said while they happen, credentials named after a failure ---------------------------------


class NoCredentialsError(Exception):
    """Named as botocore names its error: what the CLI recognises is the name and message, not the class."""


def test_a_credentials_failure_names_the_settings(uri: str, monkeypatch):
    from flyteplugins_memory import StorageError

    def refused(*args, **kwargs):
        try:
            raise NoCredentialsError("Unable to locate credentials")
        except NoCredentialsError as exc:
            raise StorageError("Storage operation read failed under s3://bucket: Unable to locate credentials") from exc

    monkeypatch.setattr(MemoryStore, "list_paths", refused)
    message = failing(1, "ls", "--uri", uri)
    assert "AWS_ACCESS_KEY_ID" in message and "GOOGLE_APPLICATION_CREDENTIALS" in message


def test_a_read_only_refusal_gets_no_credentials_hint(uri: str):
    MemoryStore.open(remote_path=uri, trusted=True).set_read_only_prefixes(["notes/"])
    assert "credentials" not in failing(2, "rm", "notes/a.md", "--yes", "--uri", uri)


def test_retried_storage_calls_are_said_on_stderr(uri: str, monkeypatch):
    from fsspec.implementations.local import LocalFileSystem

    from flyteplugins_memory import RetryPolicy, set_retry_policy

    original = LocalFileSystem.cat_file
    failures = [TimeoutError("slow disk"), TimeoutError("slow disk")]

    def flaky(self, *args, **kwargs):
        if failures:
            raise failures.pop()
        return original(self, *args, **kwargs)

    previous = set_retry_policy(RetryPolicy(attempts=5, initial_delay=0.001, max_delay=0.001))
    try:
        monkeypatch.setattr(LocalFileSystem, "cat_file", flaky)
        result = run("cat", "notes/a.md", "--uri", uri)
    finally:
        set_retry_policy(previous)
    assert result.exit_code == 0 and result.stdout == "green tea", (result.stdout, result.stderr)
    retries = [line for line in result.stderr.splitlines() if line.startswith("retrying: ")]
    assert len(retries) == 2 and "slow disk" in retries[0] and "retry 1 of 4" in retries[0]


def test_a_missing_bucket_is_said(s3_backend):
    missing = "the bucket no-such-bucket does not exist"
    assert missing in failing(1, "ls", "--key", "k", "--root", "s3://no-such-bucket")
    assert missing in failing(1, "keys", "--root", "s3://no-such-bucket")
    bucket = "s3://" + s3_backend.raw_data_path.split("/")[2]
    assert "bucket" not in failing(1, "ls", "--key", "nobody", "--root", bucket)  # only the store is missing
    assert run("keys", "--root", bucket, "--json").exit_code == 0


# -- counts in their number ---------------------------------------------------------------------------------------


def test_captions_count_in_the_number_they_take(tmp_path: pathlib.Path):
    location = str(tmp_path / "one")
    store = MemoryStore("cli", remote_path=location)
    store.write_text("notes/a.md", "green tea")
    store.append({"role": "user", "content": "tea?"})
    store.save()
    outputs = {verb: run(*verb.split(), "--uri", location).stdout for verb in ("ls", "log", "search tea", "audit")}
    assert "1 file," in outputs["ls"] and "1 message in the transcript" in outputs["ls"], outputs["ls"]
    assert "1 commit" in outputs["log"] and "1 commits" not in outputs["log"], outputs["log"]
    assert "1 hit" in outputs["search tea"] and "1 hits" not in outputs["search tea"], outputs["search tea"]
    assert "+1 message" in outputs["log"] and "+1 messages" not in outputs["log"], outputs["log"]
    assert " 1 events" not in outputs["audit"], outputs["audit"]


def test_search_from_the_cli_finds_a_word_in_another_form(tmp_path: pathlib.Path):
    location = str(tmp_path / "stems")
    store = MemoryStore("cli", remote_path=location)
    store.write_text("trips/lisbon.md", "Two flights to Lisbon, booked.")
    store.write_text("trips/porto.md", "A train to Porto.")
    store.save()
    found = run("search", "flight", "--uri", location, "--json")
    assert found.exit_code == 0, found.stderr
    assert [hit["path"] for hit in json.loads(found.stdout)["hits"]] == ["trips/lisbon.md"], found.stdout
