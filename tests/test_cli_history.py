"""The CLI verbs about a file's past and a whole store's move: ``history``, ``diff``, ``restore``,
``gc --dry-run``, ``export`` and ``import`` (with their progress bars), each checked against what landed
in storage, read with a new handle or from disk."""

from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import pty
import subprocess
import sys
import tarfile

import pytest

from flyteplugins_memory import MemoryStore
from test_cli import _source_env, as_json, fails, ok, store_uri, stored_objects, where

PLAN_GOOD = "# Plan\n- read the brief\n- draft the outline\n"
PLAN_BAD = "oops\n"


@pytest.fixture
def root(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "raw")


@pytest.fixture
def plan(root: str) -> MemoryStore:
    """A store whose plan.md was written (c1), improved (c2) and then broken by a bad edit (c3)."""
    store = MemoryStore("plan", remote_path=store_uri(root, "plan"), keep_versions=True)
    store.write_text("plan.md", "# Plan\n- read the brief\n", actor="planner", reason="start")
    store.save()
    store.write_text("plan.md", PLAN_GOOD, actor="planner", reason="outline")
    store.save()
    store.write_text("plan.md", PLAN_BAD, actor="buggy-tool", reason="bad edit")
    store.save()
    return store


def reopened(root: str, key: str = "plan") -> MemoryStore:
    return MemoryStore.open(remote_path=store_uri(root, key))


# -- history, diff, restore -----------------------------------------------------------------------------------


def test_history_lists_versions_newest_first_as_the_store_does(plan: MemoryStore, root: str):
    listed = as_json("history", "plan.md", *where(root, "plan"))
    assert [v["version_id"] for v in listed] == ["c3", "c2", "c1"]
    assert [(v["actor"], v["reason"], v["size"]) for v in listed][:2] == [
        ("buggy-tool", "bad edit", len(PLAN_BAD)),
        ("planner", "outline", len(PLAN_GOOD)),
    ]
    assert listed == json.loads(json.dumps([v.__dict__ for v in reopened(root).history("plan.md")]))
    table = ok("history", "plan.md", "--limit", "2", *where(root, "plan"))
    assert "c3" in table and "c2" in table and "c1" not in table and "buggy-tool" in table


def test_history_of_a_deleted_file_shows_the_deletion(plan: MemoryStore, root: str):
    plan.delete("plan.md", actor="cleaner")
    plan.save()
    listed = as_json("history", "plan.md", *where(root, "plan"))
    assert listed[0]["deleted"] is True and listed[0]["actor"] == "cleaner"
    assert "deleted" in ok("history", "plan.md", *where(root, "plan"))


def test_diff_between_versions_and_against_the_current_content(plan: MemoryStore, root: str):
    out = ok("diff", "plan.md", "c2", "c3", *where(root, "plan"))
    assert out.startswith("--- plan.md@c2\n+++ plan.md@c3\n")
    assert "-- draft the outline\n" in out and "+oops\n" in out
    assert ok("diff", "plan.md", "c3", *where(root, "plan")) == ""  # c3 is the current content
    shown = as_json("diff", "plan.md", "c1", *where(root, "plan"))
    assert shown["b"] is None and shown["diff"] == reopened(root).diff("plan.md", "c1")


def test_restore_writes_the_version_back_as_a_new_audited_commit(plan: MemoryStore, root: str):
    before = set(stored_objects(root))
    out = ok("restore", "plan.md", "c2", "--actor", "reviewer", "--reason", "undo the bad edit", *where(root, "plan"))
    assert "restored plan.md to c2 (commit 4)" in out
    store = reopened(root)
    assert store.read_text("plan.md") == PLAN_GOOD
    newest = store.history("plan.md")[0]
    assert (newest.version_id, newest.actor, newest.reason) == ("c4", "reviewer", "undo the bad edit")
    assert store.read_version("plan.md", "c3") == PLAN_BAD  # history is not rewritten
    assert before <= set(stored_objects(root))  # nothing removed
    event = store.audit_tail(1)[0]
    assert (event["actor"], event["path"], event["reason"]) == ("reviewer", "plan.md", "undo the bad edit")
    on_disk = pathlib.Path(store_uri(root, "plan"), "plan.md").read_text()
    assert on_disk == PLAN_GOOD  # upstream's layout: the file object itself holds the restored content


def test_restore_json_and_restoring_a_deletion(plan: MemoryStore, root: str):
    plan.delete("plan.md")
    plan.save()  # c4: the deletion
    back = as_json("restore", "plan.md", "c2", *where(root, "plan"))
    assert back["deleted"] is False and back["commit"] == 5 and reopened(root).read_text("plan.md") == PLAN_GOOD
    gone = as_json("restore", "plan.md", "c4", *where(root, "plan"))
    assert gone["deleted"] is True and not reopened(root).exists("plan.md")


def test_bad_versions_and_paths_fail_with_one_line_and_change_nothing(plan: MemoryStore, root: str):
    before = stored_objects(root)
    assert "c99" in fails(1, "restore", "plan.md", "c99", *where(root, "plan"))
    assert "nope" in fails(1, "diff", "plan.md", "nope", *where(root, "plan"))
    fails(2, "history", "../etc/passwd", *where(root, "plan"))
    fails(2, "history", "plan.md", "--limit", "0", *where(root, "plan"))
    assert stored_objects(root) == before


def test_restore_into_a_read_only_prefix_is_refused(root: str):
    store = MemoryStore("ro", remote_path=store_uri(root, "ro"), trusted=True)
    store.write_text("memory/fact.md", "one", actor="seed")
    store.save()
    store.set_read_only_prefixes(["memory/"], actor="admin")
    before = stored_objects(root)
    assert "read-only" in fails(2, "restore", "memory/fact.md", "c1", *where(root, "ro")).lower()
    assert stored_objects(root) == before


# -- gc --dry-run ------------------------------------------------------------------------------------------------


def test_gc_dry_run_removes_nothing_and_says_what_gc_then_removes(plan: MemoryStore, root: str):
    before = stored_objects(root)
    planned = as_json("gc", "--window", "0", "--dry-run", *where(root, "plan"))
    assert planned["dry_run"] is True and planned["objects"] > 0
    assert stored_objects(root) == before
    assert "would remove" in ok("gc", "--window", "0", "--dry-run", *where(root, "plan"))
    done = as_json("gc", "--window", "0", *where(root, "plan"))
    assert (done["dry_run"], done["objects"], done["bytes"]) == (False, planned["objects"], planned["bytes"])
    assert len(before) - len(stored_objects(root)) <= done["objects"]  # some are emptied, not deleted
    assert reopened(root).read_text("plan.md") == PLAN_BAD  # the current version stays


# -- export and import -------------------------------------------------------------------------------------------


def test_export_then_import_makes_the_same_store_under_a_new_key(plan: MemoryStore, root: str, tmp_path):
    plan.append({"role": "user", "content": "make a plan"})
    plan.save()
    archive = tmp_path / "plan.tar.gz"
    exported = as_json("export", str(archive), *where(root, "plan"))
    assert exported["members"] > 0 and archive.stat().st_size == exported["bytes"]
    imported = as_json("import", str(archive), "--actor", "ops", "--reason", "move", *where(root, "copy"))
    assert imported["uri"] == store_uri(root, "copy") and imported["files"] == 1
    copy = reopened(root, "copy")
    assert copy.read_text("plan.md") == PLAN_BAD and copy.messages == [{"role": "user", "content": "make a plan"}]
    assert [v.version_id for v in copy.history("plan.md")] == ["c3", "c2", "c1"]
    assert copy.log(1)[0].actor == "ops"
    assert "exported" in ok("export", str(tmp_path / "again.tar.gz"), *where(root, "plan"))


def test_import_by_uri_and_into_a_taken_key(plan: MemoryStore, root: str, tmp_path):
    archive = tmp_path / "plan.tar.gz"
    ok("export", str(archive), *where(root, "plan"))
    target = store_uri(root, "by-uri")
    assert "imported" in ok("import", str(archive), "--uri", target)
    assert MemoryStore.open(remote_path=target).read_text("plan.md") == PLAN_BAD
    before = stored_objects(root)
    assert "already exists" in fails(1, "import", str(archive), *where(root, "plan"))
    assert stored_objects(root) == before


def test_import_refuses_a_hostile_archive_and_stores_nothing(plan: MemoryStore, root: str, tmp_path):
    hostile = tmp_path / "evil.tar.gz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    hostile.write_bytes(buffer.getvalue())
    before = stored_objects(root)
    fails(1, "import", str(hostile), *where(root, "evil"))
    assert stored_objects(root) == before
    bomb = tmp_path / "bomb.tar.gz"
    ok("export", str(bomb), *where(root, "plan"))
    assert "more than" in fails(1, "import", str(bomb), "--max-total-bytes", "10", *where(root, "small"))
    assert stored_objects(root) == before
    fails(2, "import", str(bomb), "--max-member-bytes", "0", *where(root, "small"))
    assert "no archive" in fails(1, "import", str(tmp_path / "absent.tar.gz"), *where(root, "x")).lower()
    assert gzip.decompress(bomb.read_bytes())  # the archive itself was fine: only the limit refused it


def test_export_and_import_draw_a_bar_of_bytes_on_a_terminal(plan: MemoryStore, root: str, tmp_path):
    """Run as a user does, stderr on a pseudo-terminal: the bar is drawn there, stdout keeps the table."""
    script = str(pathlib.Path(sys.executable).parent / "flyte-memory")
    archive = str(tmp_path / "plan.tar.gz")
    exported = _on_a_terminal([script, "export", archive, *where(root, "plan")])
    assert "archiving" in exported and "exported" in exported
    imported = _on_a_terminal([script, "import", archive, *where(root, "copy")])
    assert "checking the archive" in imported and "storing" in imported and "imported" in imported
    assert reopened(root, "copy").read_text("plan.md") == PLAN_BAD
    piped = subprocess.run(
        [script, "export", archive + "2", *where(root, "plan")], capture_output=True, env=_source_env(), check=False
    )
    assert piped.returncode == 0 and piped.stderr == b""  # no terminal: no bar


def _on_a_terminal(command: list[str]) -> str:
    """What `command` wrote to a pseudo-terminal (its stdout and stderr) once it exited 0."""
    leader, follower = pty.openpty()
    env = {**_source_env(), "COLUMNS": "120", "TERM": "xterm"}
    process = subprocess.Popen(command, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=120) == 0, b"".join(chunks)[-2000:]
    return b"".join(chunks).decode(errors="replace")
