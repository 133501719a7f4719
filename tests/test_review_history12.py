"""Hostile review of issue 12 (history/restore/diff/time travel, retention and TTL, export/import): each
test is a defect found by trying to break those features, checked in storage (a new handle, upstream's
`MemoryStore`, or the backend's objects) where storage is involved. Every test here fails until its
defect is fixed."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import tarfile
import time
import tracemalloc
from datetime import timedelta

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import InvalidPath, MemoryStore, MemoryStoreError, RetentionPolicy, UnsafeArchive
from flyteplugins_memory._api import expiry as _expiry
from flyteplugins_memory._api.archive import export as _export
from flyteplugins_memory._journal import gc as _gc
from flyteplugins_memory._rules.layout import versions_dir_name

HOURS = 3600.0


def later(monkeypatch, hours: float) -> None:
    """Every handle's clock (reads of a ttl, gc) runs `hours` ahead of the real one."""
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + hours * HOURS)


def snapshots(backend, key: str, path: str) -> list[str]:
    directory = versions_dir_name(path) + "/"
    return sorted(n for n in backend.objects(key) if n.startswith(directory))


def archive_members(path) -> tuple[list[tuple[str, bytes]], dict]:
    with tarfile.open(path, "r:gz") as tar:
        read = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    manifest = json.loads(dict(read)["manifest.json"])
    return [(n, d) for n, d in read if n != "manifest.json"], manifest


def build_archive(members: list[tuple[str, bytes]], manifest: dict) -> bytes:
    """A gzip'd tar of `members` and `manifest` (last), each member listed in it with its checksum."""
    for name, data in members:
        manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in [*members, ("manifest.json", json.dumps(manifest).encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


# -- TTL -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expired", "written"), [("x", "x/y"), ("x/y", "x")], ids=["file_then_dir", "dir_then_file"])
def test_writing_beside_an_expired_file_never_commits_a_file_and_a_directory_of_one_name(
    durable_backend, key, monkeypatch, expired, written
):
    """An expired file reads as missing, so the file-vs-directory check (`WorkingCopy._check_fits_tree`, which
    looks through `WorkingCopy.entry`, which hides expired entries) lets a write of ``x/y`` beside the expired
    file ``x`` (or ``x`` beside an expired ``x/y``) through, and the save COMMITS a state holding ``x``
    both as a file and as a directory. From then on every open, and gc, raises `UnsafeStoreContent`
    ("Commit 3 holds 'x' both as a file and as a directory"): the whole store is bricked by one write.
    The write must either be refused (`InvalidPath`) or replace the expired file; the store must open."""
    store = MemoryStore.create(key=key)
    store.write_text(expired, "scratch", ttl=timedelta(hours=1))
    store.save()
    later(monkeypatch, 2)
    writer = MemoryStore.open(key=key)
    assert not writer.exists(expired)
    try:
        writer.write_text(written, "hello")
        writer.save()
    except InvalidPath:
        pass  # refused before anything was committed: fine
    fresh = MemoryStore.open(key=key)  # bricked: UnsafeStoreContent
    assert fresh.list_paths("") in ([written], [])
    fresh.gc()


def test_gc_expiring_a_file_that_a_concurrent_save_rewrote_keeps_the_rewrite_in_upstreams_layout(
    durable_backend, key, monkeypatch
):
    """gc's expiry pass removes upstream's copy (the file ``x.md`` and its sidecar under the prefix)
    before it commits the deletion. When another handle rewrites the path between gc's look at the index
    and that removal, the expiry commit rightly loses (`ConcurrencyError`, logged), but the rewritten
    file and its sidecar are already deleted from the prefix: upstream's `MemoryStore` (and anything
    reading upstream's layout) sees the live, permanent file as gone, and later saves and `compact()`
    never put it back. The rewrite must survive in storage."""
    store = MemoryStore.create(key=key)
    store.write_text("x.md", "scratch", ttl=timedelta(hours=1))
    store.save()
    later(monkeypatch, 2)
    writer = MemoryStore.open(key=key)
    writer.list_paths("")
    original = _expiry.expired_snapshots

    async def racing(remote, shas):  # called after gc found x.md expired, before it removes anything
        def rewrite() -> None:
            writer.write_text("x.md", "KEEP ME", reason="rewritten after expiry")
            writer.save()

        await asyncio.to_thread(rewrite)
        return await original(remote, shas)

    monkeypatch.setattr(_expiry, "expired_snapshots", racing)
    MemoryStore.open(key=key).gc()
    monkeypatch.setattr(_expiry, "expired_snapshots", original)

    assert MemoryStore.open(key=key).read_text("x.md") == "KEEP ME"
    follow = MemoryStore.open(key=key)
    follow.write_text("other.md", "o")
    follow.save()
    objects = durable_backend.objects(key)
    assert objects.get("x.md") == b"KEEP ME"  # deleted by gc's expiry
    assert "meta/x.md.json" in objects
    assert "x.md" in UpstreamStore.get_or_create(key=key).list_paths()


def test_at_the_newest_commit_does_not_show_a_file_whose_ttl_ran_out(local_backend, key):
    """`store.at(commit)` ignores expiries: with the newest commit made after a file's ttl ran out, every
    handle reads the file as missing, but ``store.at(store.log()[0])`` lists it, says it exists and
    returns its content (`_api.time_travel.StoreAt` reads ``State.files`` without `_rules.ttl.is_expired`). A file
    written with a ttl (scratch, secrets) must not come back through time travel to a moment after it
    expired."""
    store = MemoryStore.create(key=key)
    store.write_text("x.md", "secret scratch", ttl=timedelta(seconds=1))
    store.save()
    time.sleep(1.2)
    store.write_text("y.md", "y")  # a commit made after x.md expired (real clock)
    store.save()
    assert store.list_paths("") == ["y.md"]
    past = store.at(store.log()[0])
    assert past.list_paths("") == ["y.md"]
    assert not past.exists("x.md")
    assert past.read_text("x.md") == ""
    assert past.current_sha("x.md") == ""


# -- retention -----------------------------------------------------------------------------------------


def test_a_max_age_of_timedelta_max_is_persisted_as_given_not_dropped(local_backend, key, monkeypatch):
    """`set_retention(max_age=timedelta.max)` is accepted and returned, but stored as float seconds that
    `_rules.retention_policy._positive_seconds` cannot turn back into a timedelta (OverflowError, swallowed):
    every handle then reads the policy as having NO age rule. With ``keep_last=1`` beside it, gc deletes
    every older snapshot that "keep everything younger than max_age" was set to keep."""
    store = MemoryStore.create(key=key, keep_versions=True)
    for i in range(3):
        store.write_text("doc.md", f"draft {i}")
        store.save()
    policy = store.set_retention(keep_last=1, max_age=timedelta.max)
    assert policy == RetentionPolicy(1, timedelta.max)
    assert MemoryStore.open(key=key).retention == policy  # max_age None
    later(monkeypatch, 48)
    MemoryStore.open(key=key).gc()
    assert len(snapshots(local_backend, key, "doc.md")) == 3  # the age rule keeps them all


def test_a_dry_run_reports_the_snapshots_gc_then_removes(local_backend, key, monkeypatch):
    """docs/decisions/0069: "gc(dry_run=True) plans exactly what gc() would do". With an expired file whose
    content is also held by an older snapshot, the dry run counts that snapshot twice (once in the expiry
    pass, once in the policy pass, which still sees the file live) and counts a snapshot the real gc
    keeps (after the expiry, it is the path's newest): it reports 4 snapshots, gc removes 2."""
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("x.md", "b")
    store.save()
    store.write_text("x.md", "c")
    store.save()
    store.write_text("x.md", "b", ttl=timedelta(hours=1))
    store.save()
    store.set_retention(keep_last=1)
    later(monkeypatch, 48)
    before = set(snapshots(local_backend, key, "x.md"))
    dry = MemoryStore.open(key=key).gc(dry_run=True)
    real = MemoryStore.open(key=key).gc()
    removed = before - set(snapshots(local_backend, key, "x.md"))
    assert real.versions == len(removed)
    assert dry.versions == len(removed)  # 4 != 2


# -- history, diff, time travel --------------------------------------------------------------------------


@pytest.mark.parametrize("separator", ["\r", "\x0c", "\x1c", "\x85", "\u2028"], ids=["cr", "ff", "fs", "nel", "ls"])
def test_diff_says_no_newline_only_at_the_end_of_a_file_that_lacks_one(local_backend, key, separator):
    """`_rules.diff.unified_diff` splits with `str.splitlines`, which also breaks at \\r, form feed, \\x1c-\\x1e,
    NEL, U+2028/2029; every such "line" then does not end in \\n, so the diff gets a
    "\\ No newline at end of file" marker in the middle of the file: a malformed unified diff (patch and
    git apply reject it) for text that ends with a newline on both sides. Lines are \\n-separated."""
    store = MemoryStore.create(key=key)
    store.write_text("a.md", f"x{separator}y\n")
    store.save()
    store.write_text("a.md", "z\n")
    store.save()
    new, old = store.history("a.md")
    diff = store.diff("a.md", old.version_id, new.version_id)
    assert diff.startswith(f"--- a.md@{old.version_id}\n+++ a.md@{new.version_id}\n")
    assert "No newline at end of file" not in diff
    assert f"-x{separator}y\n" in diff


# -- export and import -----------------------------------------------------------------------------------


def test_an_export_racing_a_concurrent_save_imports_as_a_readable_store(durable_backend, key, tmp_path, monkeypatch):
    """Export lists the objects, then reads them. A save by another handle in between overwrites the
    in-place file under the prefix (and copies the old bytes to a new journal blob, which was not listed):
    the archive gets the NEW file bytes with the OLD journal (which names the old sha256 and no blob of
    it). The export succeeds, its manifest checks out, and the imported store cannot read the file
    (`CorruptStore`: "Stored content of 'a.md' is missing or does not match its sha256"): a silently
    corrupt backup. An export must be one consistent committed state (or fail)."""
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "old content")
    store.write_text("b.md", "bee")
    store.save()
    other = MemoryStore.open(key=key)
    other.list_paths("")
    original = _export._names

    async def racing(remote):
        names = await original(remote)

        def rewrite() -> None:
            other.write_text("a.md", "NEW content")
            other.save()

        await asyncio.to_thread(rewrite)
        return names

    monkeypatch.setattr(_export, "_names", racing)
    store.export(tmp_path / "backup.tar.gz")
    monkeypatch.setattr(_export, "_names", original)

    copy = MemoryStore.import_store(str(tmp_path / "backup.tar.gz"), key=key + "-copy")
    fresh = MemoryStore.open(key=copy.key)
    assert fresh.read_text("a.md") in ("old content", "NEW content")  # CorruptStore
    assert fresh.read_text("b.md") == "bee"


def test_an_import_whose_journal_does_not_open_leaves_nothing_behind(local_backend, key, tmp_path):
    """README: "A refused import stores nothing; one that fails while storing removes what it stored."
    An archive edited by hand (a commit record replaced, its checksum updated in the manifest) passes the
    spool's checks, is copied, and only then fails to open (`CorruptStore`): every object stays, the key
    is taken (``create`` raises `StoreAlreadyExists`) and the store there cannot be opened."""
    source = MemoryStore.create(key=key)
    source.write_text("a.md", "a")
    source.save()
    source.export(tmp_path / "real.tar.gz")
    members, manifest = archive_members(tmp_path / "real.tar.gz")
    edited = [(n, b"{not a commit record" if n.startswith("journal/log/") else d) for n, d in members]
    (tmp_path / "edited.tar.gz").write_bytes(build_archive(edited, manifest))

    with pytest.raises(MemoryStoreError):
        MemoryStore.import_store(str(tmp_path / "edited.tar.gz"), key="copy")
    assert local_backend.stored("copy") == {}
    assert not MemoryStore.exists(key="copy")
    MemoryStore.create(key="copy")  # the key is free again


def test_an_archive_holding_a_file_and_a_directory_of_one_name_is_refused(durable_backend, key, tmp_path):
    """The spool checks each member name on its own, never that ``store/a.md`` and ``store/a.md/evil.md``
    cannot both be objects of a store. On S3 the import stores both: our handle opens, but upstream's
    `MemoryStore` cannot (`FileExistsError` downloading it). On local disk the write fails half-way
    (`StorageError`, not the `UnsafeArchive` an untrusted archive's refusal is). Refused, nothing stored."""
    source = MemoryStore.create(key=key)
    source.write_text("a.md", "a")
    source.save()
    source.export(tmp_path / "real.tar.gz")
    members, manifest = archive_members(tmp_path / "real.tar.gz")
    data = build_archive([*members, ("store/a.md/evil.md", b"evil")], manifest)
    (tmp_path / "clash.tar.gz").write_bytes(data)

    with pytest.raises(UnsafeArchive):
        MemoryStore.import_store(str(tmp_path / "clash.tar.gz"), key="copy")
    assert durable_backend.stored("copy") == {}


def test_a_tar_header_bomb_is_refused_without_holding_it_in_memory(local_backend, tmp_path):
    """A 255 KB archive whose first header is a GNU long-name record declaring 128 MiB (zeros): tarfile
    reads a long name (and a pax header) into memory in full, and `_api.archive.spool._Bounded` only stops
    the stream at ``max_total_bytes`` + 4 MiB (8 GiB by default), so the import holds hundreds of MiB
    (about twice the declared size) before refusing. An archive of ~8 MB gets to the default bound, i.e.
    many GiB of RAM: the compression-bomb defence does not hold for bytes that are no member's data.
    A member name is at most a few KiB; memory must stay bounded far below the total limit."""
    declared = 128 << 20
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        info = tarfile.TarInfo("././@LongLink")
        info.type, info.size = tarfile.GNUTYPE_LONGNAME, declared
        gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
        for _ in range(declared >> 20):
            gz.write(bytes(1 << 20))
    assert len(raw.getvalue()) < 1 << 20
    (tmp_path / "bomb.tar.gz").write_bytes(raw.getvalue())
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArchive):
            MemoryStore.import_store(str(tmp_path / "bomb.tar.gz"), key="copy")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert local_backend.stored("copy") == {}


def test_an_archive_with_bytes_after_its_end_is_refused_or_audited_with_its_own_checksum(local_backend, key, tmp_path):
    """Junk appended after the gzip stream is never read: tarfile stops at the end-of-archive blocks. The
    import is accepted and audits ``archive_sha256`` as the hash of the bytes it happened to read, which
    is not the sha256 of the archive at `src`. Either the archive is refused (it is not a gzip file:
    ``gzip -t`` and `gzip.decompress` reject it) or the audited checksum is the archive's."""
    source = MemoryStore.create(key=key)
    source.write_text("a.md", "a")
    source.save()
    source.export(tmp_path / "real.tar.gz")
    data = (tmp_path / "real.tar.gz").read_bytes() + b"JUNK" * 4096
    (tmp_path / "junk.tar.gz").write_bytes(data)
    try:
        copy = MemoryStore.import_store(str(tmp_path / "junk.tar.gz"), key="copy")
    except UnsafeArchive as refused:
        assert refused.reason == "not_archive"
        assert local_backend.stored("copy") == {}
        return
    event = copy.audit_tail(1)[-1]
    assert event["op"] == "import"
    assert event["archive_sha256"] == hashlib.sha256(data).hexdigest()


def test_an_export_into_the_stores_own_prefix_is_refused(local_backend, key):
    """`export(dest)` with `dest` under the store's own prefix writes the archive there: it becomes an
    object upstream's `MemoryStore` lists and downloads as a file of the store (ours does not: the two
    disagree), and the next export archives it as a ``file`` (counted in `counts`), nesting backups.
    Writing into the store behind its back must be refused."""
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "a")
    store.save()
    dest = local_backend.prefix(key) + "/backup.tar.gz"
    with pytest.raises(MemoryStoreError):
        store.export(dest)
    assert "backup.tar.gz" not in local_backend.objects(key)
    assert UpstreamStore.get_or_create(key=key).list_paths() == MemoryStore.open(key=key).list_paths() == ["a.md"]
