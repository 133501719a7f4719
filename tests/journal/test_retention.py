"""Issue 12, part B: the store's retention policy (`set_retention`, `retention`), gc applying it to
journal blobs and ``versions/`` snapshots (also as a dry run), and files with a ttl. Local disk and S3
(moto); what landed is checked in storage through the backend's own filesystem."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from datetime import timedelta

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import (
    ConcurrencyError,
    GcResult,
    InvalidArgument,
    InvalidPath,
    InvalidRetention,
    MemoryStore,
    RetentionPolicy,
    StorageError,
)
from flyteplugins_memory._api.upkeep import expiry as _expiry
from flyteplugins_memory._journal import gc as _gc
from flyteplugins_memory._journal.versions import version_order
from flyteplugins_memory._rules.layout import version_name, versions_dir_name
from flyteplugins_memory._rules.retention_policy import persisted_policy

HOURS = 3600.0


def later(monkeypatch, hours: float) -> None:
    """Every handle's clock (reads of a ttl, gc) runs `hours` ahead of the real one."""
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + hours * HOURS)


def snapshots(backend, key: str, path: str) -> list[str]:
    """The ``versions/`` snapshots of `path` in storage (read through the backend), oldest first."""
    directory = versions_dir_name(path) + "/"
    return sorted((n for n in backend.objects(key) if n.startswith(directory)), key=version_order)


def anywhere(backend, key: str, needle: bytes) -> list[str]:
    return [n for n, d in backend.stored(key).items() if needle in d]


def newest_record(backend, key: str) -> dict:
    journal = backend.journal(key)
    logs = sorted((n for n in journal if n.startswith("meta/.journal/log/")), key=lambda n: int(n[19:-5]))
    return json.loads(journal[logs[-1]])


def versioned(key: str, n: int) -> MemoryStore:
    """A store (``keep_versions``) where ``doc.txt`` was written `n` times, one save each, and ``gone.txt``
    written then deleted."""
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("gone.txt", "short-lived")
    for i in range(n):
        store.write_text("doc.txt", f"draft {i}")
        store.save()
    store.delete("gone.txt")
    store.save()
    return store


# -- the policy ------------------------------------------------------------------------------------------


def test_set_retention_is_persisted_audited_and_seen_by_every_handle(durable_backend, key):
    store = MemoryStore.create(key=key)
    assert store.retention == RetentionPolicy()  # none: every snapshot kept
    other = MemoryStore.get_or_create(key=key)
    policy = store.set_retention(keep_last=3, max_age=timedelta(days=7), actor="ops", reason="bound history")
    assert policy == RetentionPolicy(3, timedelta(days=7))
    assert MemoryStore.get_or_create(key=key).retention == policy
    assert other.retention == RetentionPolicy()  # as of its loaded state, until it refreshes
    other.refresh()
    assert other.retention == policy
    assert newest_record(durable_backend, key)["ext"]["retention"] == {
        "keep_last": 3,
        "max_age_seconds": 7 * 24 * HOURS,
        "max_age": {"days": 7, "seconds": 0, "microseconds": 0},
    }
    event = MemoryStore.get_or_create(key=key).audit_tail(1)[0]
    assert event["op"] == "set_retention" and event["actor"] == "ops" and event["reason"] == "bound history"
    assert event["retention"]["keep_last"] == 3
    assert event["previous"] == {"keep_last": None, "max_age_seconds": None, "max_age": None}
    assert store.log(limit=1)[0].kind == "settings"
    store.set_retention(None, None, actor="ops", reason="keep everything again")
    assert MemoryStore.get_or_create(key=key).retention == RetentionPolicy()


@pytest.mark.parametrize(
    "max_age", [timedelta.max, timedelta(days=999_999_999, microseconds=1), timedelta(days=40_000, microseconds=7)]
)
def test_a_long_max_age_is_persisted_exactly_and_stays_readable_by_earlier_releases(durable_backend, key, max_age):
    """Review of issue 12 (#8): float seconds round ``timedelta.max`` past timedelta's range; the exact
    form round-trips, and the seconds field (all an earlier release reads) still converts."""
    store = MemoryStore.create(key=key)
    store.set_retention(keep_last=1, max_age=max_age)
    assert MemoryStore.open(key=key).retention == RetentionPolicy(1, max_age)
    stored = newest_record(durable_backend, key)["ext"]["retention"]
    assert timedelta(seconds=stored["max_age_seconds"]) - max_age < timedelta(seconds=1)  # an earlier reader's rule
    assert persisted_policy({"retention": {"keep_last": 1, "max_age_seconds": stored["max_age_seconds"]}}).max_age


@pytest.mark.parametrize(
    "stored, expected",
    [
        ({"max_age_seconds": timedelta.max.total_seconds()}, timedelta.max),  # as this release first stored it
        ({"max_age_seconds": 1e300}, timedelta.max),
        ({"max_age_seconds": 60.0, "max_age": {"days": 0, "seconds": 60, "microseconds": 5}}, timedelta(0, 60, 5)),
        ({"max_age_seconds": 60.0, "max_age": {"days": "0", "seconds": 60, "microseconds": 0}}, timedelta(0, 60)),
        ({"max_age_seconds": 60.0, "max_age": {"days": 10**10, "seconds": 0, "microseconds": 0}}, timedelta(0, 60)),
        ({"max_age_seconds": None, "max_age": {"days": -1, "seconds": 0, "microseconds": 0}}, None),
        ({"max_age_seconds": float("nan")}, None),
    ],
)
def test_a_persisted_max_age_is_read_leniently_and_never_as_a_shorter_rule(stored, expected):
    assert persisted_policy({"retention": stored}).max_age == expected


@pytest.mark.parametrize(
    "keep_last, max_age",
    [
        (0, None),
        (-1, None),
        (True, None),
        (2.5, None),
        ("3", None),
        (None, timedelta(0)),
        (None, timedelta(-1)),
        (None, 3600),
    ],
)
def test_bad_policy_is_refused_before_anything_changes(durable_backend, key, keep_last, max_age):
    store = MemoryStore.create(key=key)
    before = durable_backend.journal(key)
    with pytest.raises(InvalidRetention) as raised:
        store.set_retention(keep_last, max_age)
    assert isinstance(raised.value, InvalidArgument) and isinstance(raised.value, ValueError)
    assert durable_backend.journal(key) == before


def test_concurrent_policy_changes_are_a_compare_and_swap(durable_backend, key):
    MemoryStore.create(key=key)
    first, second = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    first.set_retention(keep_last=2)
    with pytest.raises(ConcurrencyError):
        second.set_retention(keep_last=5)
    assert MemoryStore.get_or_create(key=key).retention == RetentionPolicy(keep_last=2)
    second.refresh()
    assert second.set_retention(keep_last=5) == MemoryStore.get_or_create(key=key).retention


def test_a_policy_change_merges_with_a_concurrent_save(durable_backend, key):
    MemoryStore.create(key=key)
    writer, admin = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    writer.write_text("a.txt", "a")
    writer.save()
    admin.set_retention(keep_last=1)
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("a.txt") == "a" and reopened.retention.keep_last == 1


# -- gc applies it -----------------------------------------------------------------------------------------


def test_gc_keeps_the_last_n_snapshots_of_each_path(durable_backend, key):
    store = versioned(key, 5)
    assert len(snapshots(durable_backend, key, "doc.txt")) == 5
    assert store.gc(window=timedelta(0)).versions == 0  # no policy: every snapshot stays
    store.set_retention(keep_last=2)
    assert store.gc().versions == 0  # every snapshot is younger than the default window (24 hours)

    result = store.gc(window=timedelta(0))

    kept = snapshots(durable_backend, key, "doc.txt")
    assert len(kept) == 2 and result.versions == 3 + 0  # gone.txt holds 2 (its write, its tombstone)
    assert [durable_backend.objects(key)[n].decode() for n in kept] == ["draft 3", "draft 4"]
    assert len(snapshots(durable_backend, key, "gone.txt")) == 2
    assert result.objects >= result.versions and result.bytes > 0
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.read_text("doc.txt") == "draft 4"
    assert [reopened.read_version(v) for v in reopened.list_versions("doc.txt")] == ["draft 3", "draft 4"]
    assert not anywhere(durable_backend, key, b"draft 0")  # neither a snapshot nor a journal blob holds it


def test_keep_last_one_keeps_the_live_content_and_nothing_else(durable_backend, key):
    store = versioned(key, 3)
    store.set_retention(keep_last=1)
    store.gc(window=timedelta(0))
    assert [durable_backend.objects(key)[n] for n in snapshots(durable_backend, key, "doc.txt")] == [b"draft 2"]
    assert len(snapshots(durable_backend, key, "gone.txt")) == 1  # the deleted path's newest: its tombstone


def test_max_age_removes_old_snapshots_but_never_the_live_content(durable_backend, key, monkeypatch):
    store = versioned(key, 3)
    store.set_retention(max_age=timedelta(hours=1))
    assert store.gc(window=timedelta(0)).versions == 0  # all younger than an hour
    later(monkeypatch, 2)
    result = store.gc(window=timedelta(0))
    assert [durable_backend.objects(key)[n] for n in snapshots(durable_backend, key, "doc.txt")] == [b"draft 2"]
    assert snapshots(durable_backend, key, "gone.txt") == []  # not live: nothing of it is younger than max_age
    assert result.versions == 2 + 2
    assert MemoryStore.get_or_create(key=key).read_text("doc.txt") == "draft 2"


def test_max_age_longer_than_the_window_keeps_the_journal_states_it_covers(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key)
    for i in range(3):
        store.write_text("doc.txt", f"journal draft {i}")
        store.save()
    pinned = store.log(limit=3)[-1].seq
    store.set_retention(max_age=timedelta(hours=3))
    later(monkeypatch, 2)
    assert store.gc(window=timedelta(0)).commits == ()  # max_age supersedes the window: all kept
    assert anywhere(durable_backend, key, b"journal draft 0")
    later(monkeypatch, 4)
    result = store.gc(window=timedelta(0))
    assert pinned in result.commits and not anywhere(durable_backend, key, b"journal draft 0")
    assert MemoryStore.get_or_create(key=key).read_text("doc.txt") == "journal draft 2"


def test_a_dry_run_reports_what_gc_removes_and_removes_nothing(durable_backend, key):
    store = versioned(key, 4)
    store.set_retention(keep_last=1)
    before = durable_backend.stored(key)
    planned = store.gc(window=timedelta(0), dry_run=True)
    assert durable_backend.stored(key) == before
    assert planned.dry_run and planned.versions == 3 + 1 and planned.objects > planned.versions
    done = store.gc(window=timedelta(0))
    assert (done.objects, done.bytes, done.versions, done.commits) == (
        planned.objects,
        planned.bytes,
        planned.versions,
        planned.commits,
    )
    assert not done.dry_run and set(durable_backend.stored(key)) < set(before)
    with pytest.raises(InvalidArgument):
        store.gc(dry_run="yes")  # type: ignore[arg-type]


def test_gc_costs_requests_in_what_it_removes_not_in_history(durable_backend, key, io_counter):
    store = MemoryStore.create(key=key)
    counts = {}
    for rounds in (5, 40):
        for i in range(rounds):
            store.write_text("doc.txt", f"round {rounds} draft {i}")
            store.save()
        store.gc(window=timedelta(0))  # the history so far is collected
        store.write_text("doc.txt", f"after {rounds}")
        store.save()
        io_counter.reset()
        result = store.gc(window=timedelta(0))
        counts[rounds] = (io_counter.count(), result.objects)
    assert counts[5] == counts[40]  # the same removal after 5 or 40 commits: the same requests


# -- ttl ---------------------------------------------------------------------------------------------------


def test_an_expired_file_reads_as_missing_on_every_handle(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key)
    store.write_text("scratch/note.txt", "for an hour", ttl=timedelta(hours=1))
    store.write_json("scratch/plan.json", {"step": 1}, ttl=timedelta(hours=3))
    store.write_bytes("scratch/blob.bin", b"\x00\x01", ttl=timedelta(hours=1))
    store.write_text("keep.txt", "kept")
    store.save()
    entry = newest_record(durable_backend, key)["delta"]["files"]["scratch/note.txt"]
    assert entry["ext"]["expires_at"] > time.time() + 0.9 * HOURS
    second = MemoryStore.get_or_create(key=key)
    assert second.read_text("scratch/note.txt") == "for an hour"
    assert [hit.path for hit in second.search("hour")] == ["scratch/note.txt"]
    later(monkeypatch, 2)
    for handle in (store, second, MemoryStore.get_or_create(key=key)):
        assert handle.read_text("scratch/note.txt") == "" == handle.read_text("never-written.txt")
        assert handle.read_text("scratch/note.txt", default="gone") == "gone"
        assert handle.read_bytes("scratch/blob.bin") is None and handle.get_meta("scratch/note.txt") is None
        assert not handle.exists("scratch/note.txt")
        assert handle.list_paths() == ["keep.txt", "scratch/plan.json"]
        assert handle.read_json("scratch/plan.json") == {"step": 1}
    assert [hit.path for hit in MemoryStore.get_or_create(key=key).search("hour")] == []
    # the bytes are still in upstream's layout until gc
    assert "scratch/note.txt" in durable_backend.upstream_view(key)


def test_gc_deletes_expired_files_audited_and_removes_their_bytes(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key, keep_versions=False)
    store.write_text("scratch/note.txt", "secret for an hour", ttl=timedelta(hours=1))
    store.write_text("keep.txt", "kept")
    store.save()
    later(monkeypatch, 2)
    planned = store.gc(window=timedelta(0), dry_run=True)
    assert planned.expired == ("scratch/note.txt",) and "scratch/note.txt" in durable_backend.upstream_view(key)

    result = store.gc(window=timedelta(0))

    assert result.expired == ("scratch/note.txt",)
    view = durable_backend.upstream_view(key)
    assert "scratch/note.txt" not in view and "meta/scratch%2Fnote.txt.json" not in view
    events = MemoryStore.get_or_create(key=key).audit_tail(0)
    assert [(e["op"], e["path"], e["actor"]) for e in events if e["op"] == "expired"] == [
        ("expired", "scratch/note.txt", "gc")
    ]
    assert "scratch/note.txt" not in newest_state_paths(key)
    store.gc(window=timedelta(0))  # the expiry commit is the newest now: the earlier states go
    assert not anywhere(durable_backend, key, b"secret for an hour")
    assert store.gc(window=timedelta(0)).expired == ()
    assert MemoryStore.get_or_create(key=key).read_text("keep.txt") == "kept"


def newest_state_paths(key: str) -> list[str]:
    """What a new handle lists with the clock put back (expiry not applied by reading)."""
    return MemoryStore.get_or_create(key=key).list_paths()


def test_a_rewrite_without_ttl_makes_the_file_permanent(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "temporary", ttl=timedelta(minutes=5))
    store.save()
    second = MemoryStore.get_or_create(key=key)
    second.write_text("a.txt", "permanent")
    second.save()
    assert "ext" not in newest_record(durable_backend, key)["delta"]["files"]["a.txt"]
    later(monkeypatch, 1)
    assert MemoryStore.get_or_create(key=key).read_text("a.txt") == "permanent"
    assert store.gc(window=timedelta(0)).expired == ()


def test_a_file_rewritten_after_it_expired_lives_again(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "old", ttl=timedelta(minutes=5))
    store.save()
    later(monkeypatch, 1)
    assert not store.exists("a.txt")
    store.write_text("a.txt", "new", expected_sha="")  # missing: a create
    store.save()
    assert MemoryStore.get_or_create(key=key).read_text("a.txt") == "new"
    assert store.gc(window=timedelta(0)).expired == ()


@pytest.mark.parametrize("ttl", [timedelta(0), timedelta(seconds=-1), 60, "1h"])
def test_a_bad_ttl_is_refused_before_anything_is_written(durable_backend, key, ttl):
    store = MemoryStore.create(key=key)
    for write in (
        lambda: store.write_text("a.txt", "x", ttl=ttl),
        lambda: store.write_json("a.json", {"x": 1}, ttl=ttl),
        lambda: store.write_bytes("a.bin", b"x", ttl=ttl),
    ):
        with pytest.raises(InvalidRetention):
            write()
    assert not store.has_unsaved_changes() and store.list_paths() == []


def test_gc_result_keeps_its_fields():
    assert GcResult() == GcResult(0, 0, (), 0, (), False)  # positional order of the old fields kept


# -- review of issue 12: writes beside expired files, gc's expiry order, dry runs ---------------------------


def test_a_write_beside_expired_files_deletes_them_in_its_commit(durable_backend, key, monkeypatch):
    """#1: expired ``x`` (a file) and ``d/a``, ``d/b`` (a directory's only files) are in the way of ``x/y``
    and ``d``: the writes delete them in the same commit (op ``expired``), and storage holds no clash."""
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("x", "scratch", ttl=timedelta(hours=1))
    store.write_text("d/a", "a", ttl=timedelta(hours=1))
    store.write_text("d/b", "b", ttl=timedelta(hours=1))
    store.save()
    later(monkeypatch, 2)
    writer = MemoryStore.open(key=key, keep_versions=True)
    writer.write_text("x/y", "hello", reason="new notes")
    writer.write_text("d", "now a file")
    assert (writer.root / "x" / "y").read_text() == "hello" and (writer.root / "d").read_text() == "now a file"
    writer.save()

    fresh = MemoryStore.open(key=key)
    assert fresh.list_paths() == ["d", "x/y"]
    objects = durable_backend.upstream_view(key)
    assert objects["x/y"] == b"hello" and objects["d"] == b"now a file"
    assert not {"x", "d/a", "d/b", "meta/x.json", "meta/d%2Fa.json"} & set(objects)
    expired = [(e["op"], e["path"], e["reason"]) for e in fresh.audit_tail(0) if e["op"] == "expired"]
    assert sorted(expired) == [("expired", p, "ttl expired") for p in ("d/a", "d/b", "x")]
    assert fresh.gc(window=timedelta(0)).expired == ()


def test_a_write_beside_a_live_file_is_still_refused_even_with_expired_ones_there(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key)
    store.write_text("d/old", "o", ttl=timedelta(hours=1))
    store.write_text("d/live", "l")
    store.write_text("f", "live file")
    store.save()
    later(monkeypatch, 2)
    writer = MemoryStore.open(key=key)
    for path in ("d", "f/y"):
        with pytest.raises(InvalidPath):
            writer.write_text(path, "x")
    assert not writer.has_unsaved_changes()


def test_two_handles_writing_a_file_and_a_directory_of_one_name_conflict(durable_backend, key):
    """#1, the merge path: ``x`` and ``x/y`` written by two handles from one base; the second save
    conflicts (the store never commits both) and keeps its change for a retry."""
    MemoryStore.create(key=key).save()
    first, second = MemoryStore.open(key=key), MemoryStore.open(key=key)
    first.write_text("x", "file")
    second.write_text("x/y", "under")
    first.save()
    with pytest.raises(ConcurrencyError) as raised:
        second.save()
    assert "x/y" in raised.value.paths and second.has_unsaved_changes()
    assert MemoryStore.open(key=key).list_paths() == ["x"]
    assert "x/y" not in durable_backend.upstream_view(key)  # on S3, created in place before the commit; removed
    assert UpstreamStore.get_or_create(key=key).list_paths() == ["x"]


def test_a_file_that_expired_under_a_handle_that_never_saw_it_conflicts_then_writes(durable_backend, key, monkeypatch):
    """#1: a handle opened before ``x`` existed writes ``x/y`` after ``x`` (another handle's, with a ttl)
    expired: the save conflicts rather than commit both; after a refresh the write deletes ``x``."""
    store = MemoryStore.create(key=key)
    store.save()
    stale = MemoryStore.open(key=key)
    stale.list_paths()
    store.write_text("x", "scratch", ttl=timedelta(hours=1))
    store.save()
    later(monkeypatch, 2)
    stale.write_text("x/y", "hello")
    with pytest.raises(ConcurrencyError):
        stale.save()
    assert stale.refresh() == ["x/y"]
    stale.write_text("x/y", "hello")
    stale.save()
    assert MemoryStore.open(key=key).list_paths() == ["x/y"]
    assert "x" not in durable_backend.upstream_view(key)


def test_a_commit_is_refused_a_file_and_directory_clash_whatever_made_the_changes(local_backend, key):
    """The merge guard runs on a commit onto the handle's own base too, not only onto a concurrent save."""
    store = MemoryStore.create(key=key)
    store.write_text("x", "file")
    store.save()
    store.write_text("y/z", "z")
    view = store._checkout.working_copy
    view.changes.files["x/y"] = view.changes.files["y/z"]  # a change no admission would have let through
    view.unsaved["x/y"] = b"z"
    with pytest.raises(ConcurrencyError):
        store.save()
    assert MemoryStore.open(key=key).list_paths() == ["x"]


def test_a_gc_dying_after_its_expiry_commit_is_finished_by_the_next(durable_backend, key, monkeypatch):
    """#3: the upstream copies go after the commit; a gc killed in between leaves its pending-expiry marker
    in the journal, and the next gc removes the file, sidecar and snapshots, then the marker."""
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("x.md", "expired secret", ttl=timedelta(hours=1))
    store.write_text("keep.md", "kept")
    store.save()
    # a ttl write takes no snapshot now; one an earlier release took of the content
    sha = hashlib.sha256(b"expired secret").hexdigest()
    durable_backend.put(key, version_name("x.md", "2026-01-01T00:00:00+00:00", sha), b"expired secret")
    later(monkeypatch, 2)

    async def dies(*args, **kwargs):
        raise StorageError("killed")

    real = _expiry._finish
    monkeypatch.setattr(_expiry, "_finish", dies)
    with pytest.raises(StorageError):
        MemoryStore.open(key=key).gc()
    monkeypatch.setattr(_expiry, "_finish", real)
    assert MemoryStore.open(key=key).list_paths() == ["keep.md"]  # committed
    assert [n for n in durable_backend.journal(key) if "/expiring/" in n] and snapshots(durable_backend, key, "x.md")
    durable_backend.put(key, "x.md", b"expired secret")  # as if the commit's own projection had not run either
    durable_backend.put(key, "meta/x.md.json", b"{}")

    assert MemoryStore.open(key=key).gc().expired == ()
    view = durable_backend.upstream_view(key)
    assert "x.md" not in view and "meta/x.md.json" not in view and snapshots(durable_backend, key, "x.md") == []
    assert not [n for n in durable_backend.journal(key) if "/expiring/" in n]
    assert view["keep.md"] == b"kept"


def test_gc_loses_to_a_rewrite_of_the_same_bytes_without_a_ttl(durable_backend, key, monkeypatch):
    """#3: a rewrite that only drops the ttl keeps the file; gc's expiry commit, planned before it, must
    conflict (not merge over it) and remove nothing."""
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("x.md", "same bytes", ttl=timedelta(hours=1))
    store.save()
    later(monkeypatch, 2)
    original = _expiry.expired_snapshots

    async def racing(remote, shas):
        if shas:

            def rewrite() -> None:
                writer = MemoryStore.open(key=key, keep_versions=True)  # its snapshot must stay
                writer.write_text("x.md", "same bytes")
                writer.save()

            await asyncio.to_thread(rewrite)
        return await original(remote, shas)

    monkeypatch.setattr(_expiry, "expired_snapshots", racing)
    assert MemoryStore.open(key=key).gc().expired == ()
    monkeypatch.setattr(_expiry, "expired_snapshots", original)
    assert MemoryStore.open(key=key).read_text("x.md") == "same bytes"
    view = durable_backend.upstream_view(key)
    assert view["x.md"] == b"same bytes" and "meta/x.md.json" in view and snapshots(durable_backend, key, "x.md")
    assert not [n for n in durable_backend.journal(key) if "/expiring/" in n]


@pytest.mark.parametrize(
    "marker",
    [
        {"format": 1, "paths": {"../orphan.md": "0" * 64}},
        {"format": 1, "paths": {"orphan.md": "not a sha"}},
        {"format": 2, "paths": {"orphan.md": "0" * 64}},
        {"format": 1, "min_reader": 99, "paths": {"orphan.md": "0" * 64}},
        "not json",
    ],
)
def test_a_pending_expiry_gc_cannot_read_removes_nothing(local_backend, key, marker):
    """A marker from a newer version, or a malformed or hostile one, is left where it is and removes
    nothing (here: ``orphan.md``, an object the newest state does not hold, which a readable one would)."""
    store = MemoryStore.create(key=key)
    store.write_text("keep.md", "kept")
    store.save()
    name = "meta/.journal/expiring/planted.json"
    local_backend.put(key, name, marker.encode() if isinstance(marker, str) else json.dumps(marker).encode())
    local_backend.put(key, "orphan.md", b"behind the store's back")
    store.gc()
    assert {"keep.md", "orphan.md"} <= set(local_backend.upstream_view(key))
    assert name in local_backend.journal(key)


def test_a_readable_pending_expiry_of_a_path_the_store_holds_removes_nothing_of_it(local_backend, key):
    """A marker whose path the newest state holds (its commit never landed, or a later save wrote the
    path) leaves that path's copies alone; the marker goes once nothing is expired."""
    store = MemoryStore.create(key=key, keep_versions=True)
    store.write_text("keep.md", "kept")
    store.save()
    sha = store.current_sha("keep.md")
    name = "meta/.journal/expiring/planted.json"
    local_backend.put(key, name, json.dumps({"format": 1, "paths": {"keep.md": sha}}).encode())
    store.gc()
    view = local_backend.upstream_view(key)
    assert view["keep.md"] == b"kept" and "meta/keep.md.json" in view and snapshots(local_backend, key, "keep.md")
    assert name not in local_backend.journal(key)


@pytest.mark.parametrize("keep_versions", [False, True])
def test_a_dry_run_counts_what_the_real_gc_removes_beside_an_expiry(durable_backend, key, monkeypatch, keep_versions):
    """#9: with and without the tombstone snapshot the expiry commit writes (which ranks first)."""
    store = MemoryStore.create(key=key, keep_versions=True)
    for i, content in enumerate(["b", "c", "d", "b"]):
        store.write_text("x.md", content, ttl=timedelta(hours=1) if i == 3 else None)
        store.write_text("y.md", f"y{i}")
        store.save()
    store.set_retention(keep_last=2)
    later(monkeypatch, 48)
    before = set(durable_backend.upstream_view(key))
    dry = MemoryStore.open(key=key, keep_versions=keep_versions).gc(dry_run=True)
    assert set(durable_backend.upstream_view(key)) == before
    real = MemoryStore.open(key=key, keep_versions=keep_versions).gc()
    removed = before - set(durable_backend.upstream_view(key))
    removed_snapshots = {n for n in removed if n.startswith("versions/")}
    assert dry.versions == real.versions == len(removed_snapshots)
    assert dry.expired == real.expired == ("x.md",)


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
    returns its content (`_api.history.time_travel.StoreAt` reads ``State.files`` without
    `_rules.ttl.is_expired`). A file
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
