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
import textwrap
import time
from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._journal import gc as _gc
from test_cli import DOMAIN, ORG, PROJECT, _source_env, as_json, fails, ok, store_uri, stored_objects, where

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
    # the heading names the store's path: a long temporary path wraps it, so words are compared, not lines
    assert "would remove" in " ".join(ok("gc", "--window", "0", "--dry-run", *where(root, "plan")).split())
    done = as_json("gc", "--window", "0", "--yes", *where(root, "plan"))
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


# -- interrupted and failed exports and imports, restoring a deletion, gc --dry-run beside an expiry ---------------

#: how long a subprocess may take before it counts as hung (each one does a few local-disk operations)
HUNG = 30


@pytest.fixture
def plan_in_three_versions(root: str) -> MemoryStore:
    """plan.md written three times (one, two, three) by the planner, every version kept."""
    store = MemoryStore("plan", remote_path=store_uri(root, "plan"), keep_versions=True)
    for text in ("one\n", "two\n", "three\n"):
        store.write_text("plan.md", text, actor="planner")
        store.save()
    return store


class Cancelled(Exception):
    """What a progress callback raises to cancel (a "cancel" button)."""


def _cancel_once_started(phase: str, done: int, total: int) -> None:
    if done > 0:
        raise Cancelled(phase)


def _cancel_while_storing(phase: str, done: int, total: int) -> None:
    if phase == "store" and done > 0:
        raise Cancelled(phase)


_INTERRUPTED = textwrap.dedent(
    """
    import os, sys
    from flyteplugins_memory import MemoryStore

    uri, archive, dest, copy, phase = sys.argv[1:6]

    def progress(name, done, total):
        if name == phase:
            raise KeyboardInterrupt

    try:
        if phase == "export":
            MemoryStore.open(remote_path=uri).export(dest, progress=progress)
        else:
            MemoryStore.import_store(archive, remote_path=copy, progress=progress)
    except KeyboardInterrupt:
        print("interrupted")
    """
)


@pytest.mark.parametrize("phase", ["export", "check", "store"])
def test_a_progress_callback_raising_keyboard_interrupt_aborts_instead_of_hanging(
    plan_in_three_versions, root, tmp_path, phase
):
    """`ProgressCallback`: "an exception it raises aborts the operation as any failure does (an export
    leaves no archive, an import nothing stored)". A callback raising KeyboardInterrupt (a UI's cancel, a
    Ctrl-C that lands while the callback runs) instead kills the package's event-loop thread (the
    BaseException escapes ``loop.run_forever``), and the sync call waiting on that loop blocks forever: the
    process hangs in every phase (and every later call of the package in it hangs too)."""
    archive = tmp_path / "plan.tar.gz"
    plan_in_three_versions.export(archive)
    dest, copy = tmp_path / "again.tar.gz", store_uri(root, "copy")
    command = [sys.executable, "-c", _INTERRUPTED, store_uri(root, "plan"), str(archive), str(dest), copy, phase]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=_source_env(), timeout=HUNG, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a KeyboardInterrupt raised by the {phase!r} progress callback hung the process")
    assert done.returncode == 0 and "interrupted" in done.stdout, done.stderr[-2000:]
    assert not dest.exists()
    assert not pathlib.Path(copy).exists() or not any(p.is_file() for p in pathlib.Path(copy).rglob("*"))


def test_a_failed_export_does_not_destroy_the_archive_already_at_dest(plan_in_three_versions, tmp_path):
    """A nightly ``flyte-memory export /backups/plan.tar.gz`` that fails (a storage error, a cancel) must not
    take last night's good archive with it. `export` opens DEST for writing in place (truncating it at once:
    a reader sees a 0-byte archive for the whole export) and its cleanup then deletes whatever is at DEST, so
    the previous backup is gone (a device node or /dev/stdout at DEST is unlinked the same way). `report`
    writes beside the file and renames; export should too."""
    dest = tmp_path / "plan.tar.gz"
    plan_in_three_versions.export(dest)
    good = dest.read_bytes()
    with pytest.raises(Cancelled):
        plan_in_three_versions.export(dest, progress=_cancel_once_started)
    assert dest.exists(), "the failed export deleted the archive that was already at DEST"
    assert dest.read_bytes() == good


_NO_CREDENTIALS = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
}


def _without_aws_credentials(tmp_path: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in _source_env().items() if not k.startswith("AWS_") or k == "AWS_CA_BUNDLE"}
    return {**env, **_NO_CREDENTIALS, "HOME": str(tmp_path), "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.mark.parametrize("verb", ["export", "import"])
def test_an_s3_archive_without_credentials_is_one_error_line_not_a_traceback(
    plan_in_three_versions, root, tmp_path, verb
):
    """CLI contract: a command that cannot be done prints exactly one ``error: ...`` line on stderr, no
    traceback, and nothing on stdout. ``export s3://...`` and ``import s3://...`` without AWS credentials
    raise botocore's NoCredentialsError (not an OSError nor a MemoryStoreError), which the group lets
    through: a full traceback on stderr and, under ``--json``, "Filtered traceback ... NoCredentialsError"
    on stdout. The store's own storage calls wrap the same error as StorageError; the archive's do not."""
    script = str(pathlib.Path(sys.executable).parent / "flyte-memory")
    names = where(root, "plan") if verb == "export" else where(root, "fresh")
    command = [script, verb, "s3://review-no-such-bucket/plan.tar.gz", *names, "--json"]
    done = subprocess.run(
        command, capture_output=True, text=True, env=_without_aws_credentials(tmp_path), timeout=120, check=False
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert done.stdout == ""


def test_a_failed_import_leaves_no_key_that_keys_lists(plan_in_three_versions, root, tmp_path):
    """import_store: "A failure in 4 or 5 removes what it wrote ... so the key is free again". On local
    disk the undo removes the objects but leaves the directories the copy made (the prefix, its
    ``meta/.journal``, the journal directory), so ``flyte-memory keys`` and `MemoryStore.list_keys` list a
    store that ``ls`` says does not exist (`delete_store` removes such empty directories for this reason)."""
    archive = tmp_path / "plan.tar.gz"
    plan_in_three_versions.export(archive)
    with pytest.raises(Cancelled):
        MemoryStore.import_store(
            archive, key="ghost", org=ORG, project=PROJECT, domain=DOMAIN, root=root, progress=_cancel_while_storing
        )
    namespace = ["--org", ORG, "--project", PROJECT, "--domain", DOMAIN, "--root", root]
    assert as_json("keys", *namespace) == ["plan"]
    assert MemoryStore.list_keys("", org=ORG, project=PROJECT, domain=DOMAIN, root=root) == ["plan"]


def test_restoring_a_deletion_of_a_file_already_gone_does_not_claim_an_older_commit(root):
    """``restore PATH VERSION`` reports "the commit" of the restore (``--json``: ``commit``). Restoring a
    deletion while the file is already deleted changes nothing and saves nothing, yet the verb prints
    "deleted notes.md (commit 3)" / ``{"commit": 3, "deleted": true}``: commit 3 is an unrelated earlier
    save by someone else (it wrote other.md), which a script would take for the restore's own commit."""
    store = MemoryStore("r", remote_path=store_uri(root, "r"), keep_versions=True)
    store.write_text("notes.md", "n", actor="writer")
    store.save()  # c1
    store.delete("notes.md", actor="cleaner")
    store.save()  # c2: the deletion
    store.write_text("other.md", "o", actor="someone-else")
    store.save()  # c3: unrelated
    shown = as_json("restore", "notes.md", "c2", "--actor", "reviewer", *where(root, "r"))
    newest = MemoryStore.open(remote_path=store_uri(root, "r")).log(1)[0]
    if shown["commit"] is not None:
        assert shown["commit"] == newest.seq and newest.actor == "reviewer", (shown, newest)


def test_gc_dry_run_with_an_expired_file_is_a_lower_bound_of_what_gc_then_removes(root, monkeypatch):
    """With a file whose ttl ran out and ``--window 0``, the real gc first commits the expiry, so the
    commit before it (and the expired content only it names) leaves the window in the same run; the dry
    run plans the journal against today's newest commit. Decided (docs/decisions/0069, "gc(dry_run=True)"):
    the dry run names every expired file, changes nothing, and its journal figures are a lower bound;
    the next dry run shows the rest, and then matches the gc after it exactly."""
    store = MemoryStore("ttl", remote_path=store_uri(root, "ttl"), keep_versions=True)
    store.write_text("keep.md", "k")
    store.write_text("tmp.md", "t", ttl=timedelta(hours=1))
    store.save()
    store.write_text("keep.md", "k2")
    store.save()
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * 3600)  # tmp.md's ttl has run out
    before = stored_objects(root)
    planned = as_json("gc", "--window", "0", "--dry-run", *where(root, "ttl"))
    assert stored_objects(root) == before  # the dry run changes nothing
    done = as_json("gc", "--window", "0", "--yes", *where(root, "ttl"))
    assert done["expired"] == planned["expired"] == ["tmp.md"]
    assert set(planned["commits"]) <= set(done["commits"]) and planned["objects"] <= done["objects"]
    assert planned["bytes"] <= done["bytes"]
    assert not any(data == b"t" for data in stored_objects(root).values())  # the expired content is gone
    store.write_text("keep.md", "k3")
    store.save()
    again = as_json("gc", "--window", "0", "--dry-run", *where(root, "ttl"))
    after = as_json("gc", "--window", "0", "--yes", *where(root, "ttl"))
    assert (again["commits"], again["objects"], again["bytes"]) == (after["commits"], after["objects"], after["bytes"])
