"""Hostile review of the CLI verbs of commit 48400c9 (``history``, ``diff``, ``restore``, ``export``,
``import``, ``gc --dry-run``) and the export/import progress callbacks: each test is a defect found by
trying to break them, checked on disk or in storage where storage is involved. Every test here fails until
its defect is fixed."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._journal import gc as _gc
from test_cli import DOMAIN, ORG, PROJECT, _source_env, as_json, store_uri, stored_objects, where

#: how long a subprocess may take before it counts as hung (each one does a few local-disk operations)
HUNG = 30


@pytest.fixture
def root(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "raw")


@pytest.fixture
def plan(root: str) -> MemoryStore:
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


# -- progress callbacks -----------------------------------------------------------------------------------------

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
def test_a_progress_callback_raising_keyboard_interrupt_aborts_instead_of_hanging(plan, root, tmp_path, phase):
    """`ProgressCallback`: "an exception it raises aborts the operation as any failure does (an export
    leaves no archive, an import nothing stored)". A callback raising KeyboardInterrupt (a UI's cancel, a
    Ctrl-C that lands while the callback runs) instead kills the package's event-loop thread (the
    BaseException escapes ``loop.run_forever``), and the sync call waiting on that loop blocks forever: the
    process hangs in every phase (and every later call of the package in it hangs too)."""
    archive = tmp_path / "plan.tar.gz"
    plan.export(archive)
    dest, copy = tmp_path / "again.tar.gz", store_uri(root, "copy")
    command = [sys.executable, "-c", _INTERRUPTED, store_uri(root, "plan"), str(archive), str(dest), copy, phase]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=_source_env(), timeout=HUNG, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a KeyboardInterrupt raised by the {phase!r} progress callback hung the process")
    assert done.returncode == 0 and "interrupted" in done.stdout, done.stderr[-2000:]
    assert not dest.exists()
    assert not pathlib.Path(copy).exists() or not any(p.is_file() for p in pathlib.Path(copy).rglob("*"))


# -- export ------------------------------------------------------------------------------------------------------


def test_a_failed_export_does_not_destroy_the_archive_already_at_dest(plan, tmp_path):
    """A nightly ``flyte-memory export /backups/plan.tar.gz`` that fails (a storage error, a cancel) must not
    take last night's good archive with it. `export` opens DEST for writing in place (truncating it at once:
    a reader sees a 0-byte archive for the whole export) and its cleanup then deletes whatever is at DEST, so
    the previous backup is gone (a device node or /dev/stdout at DEST is unlinked the same way). `report`
    writes beside the file and renames; export should too."""
    dest = tmp_path / "plan.tar.gz"
    plan.export(dest)
    good = dest.read_bytes()
    with pytest.raises(Cancelled):
        plan.export(dest, progress=_cancel_once_started)
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
def test_an_s3_archive_without_credentials_is_one_error_line_not_a_traceback(plan, root, tmp_path, verb):
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


# -- import ------------------------------------------------------------------------------------------------------


def test_a_failed_import_leaves_no_key_that_keys_lists(plan, root, tmp_path):
    """import_store: "A failure in 4 or 5 removes what it wrote ... so the key is free again". On local
    disk the undo removes the objects but leaves the directories the copy made (the prefix, its
    ``meta/.journal``, the journal directory), so ``flyte-memory keys`` and `MemoryStore.list_keys` list a
    store that ``ls`` says does not exist (`delete_store` removes such empty directories for this reason)."""
    archive = tmp_path / "plan.tar.gz"
    plan.export(archive)
    with pytest.raises(Cancelled):
        MemoryStore.import_store(
            archive, key="ghost", org=ORG, project=PROJECT, domain=DOMAIN, root=root, progress=_cancel_while_storing
        )
    namespace = ["--org", ORG, "--project", PROJECT, "--domain", DOMAIN, "--root", root]
    assert as_json("keys", *namespace) == ["plan"]
    assert MemoryStore.list_keys("", org=ORG, project=PROJECT, domain=DOMAIN, root=root) == ["plan"]


# -- restore -----------------------------------------------------------------------------------------------------


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


# -- gc --dry-run ------------------------------------------------------------------------------------------------


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
    done = as_json("gc", "--window", "0", *where(root, "ttl"))
    assert done["expired"] == planned["expired"] == ["tmp.md"]
    assert set(planned["commits"]) <= set(done["commits"]) and planned["objects"] <= done["objects"]
    assert planned["bytes"] <= done["bytes"]
    assert not any(data == b"t" for data in stored_objects(root).values())  # the expired content is gone
    store.write_text("keep.md", "k3")
    store.save()
    again = as_json("gc", "--window", "0", "--dry-run", *where(root, "ttl"))
    after = as_json("gc", "--window", "0", *where(root, "ttl"))
    assert (again["commits"], again["objects"], again["bytes"]) == (after["commits"], after["objects"], after["bytes"])
