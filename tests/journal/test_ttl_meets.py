"""Where a file's ttl meets the other features (issue 23, defects 3 and 4): relabelling, restore, history
(read_version, diff, list_versions), merge, proposals, export/import, scopes, read-only prefixes, purge and
gc. Local disk and moto S3; what landed is checked in storage itself (byte scans of the store prefix and
the journal)."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore, ReadOnlyPath, VersionExpired, VersionNotFound
from flyteplugins_memory._journal import gc as _gc
from flyteplugins_memory._rules.layout import version_name

HOURS = 3600.0
SECRET = "scratch secret 7f3a"


def later(monkeypatch, hours: float) -> None:
    """Every handle's clock (reads of a ttl, gc) runs `hours` ahead of the real one."""
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + hours * HOURS)


def anywhere(backend, key: str, needle: str) -> list[str]:
    """Every stored object of `key` (store prefix and journal) whose bytes hold `needle`."""
    return [n for n, d in backend.stored(key).items() if needle.encode() in d]


def newest_entry(backend, key: str, path: str) -> dict:
    """`path`'s file record in the newest commit record in storage."""
    journal = backend.journal(key)
    logs = sorted((n for n in journal if n.startswith("meta/.journal/log/")), key=lambda n: int(n[19:-5]))
    return json.loads(journal[logs[-1]])["delta"]["files"][path]


def scratch_store(key: str, **options) -> MemoryStore:
    """A store holding ``scratch.md`` (SECRET, ttl one hour) and ``keep.md`` (permanent)."""
    store = MemoryStore.create(key=key, **options)
    store.write_text("scratch.md", SECRET, ttl=timedelta(hours=1), metadata={"kind": "scratch"})
    store.write_text("keep.md", "kept")
    store.save()
    return store


# -- defect 3: ttl x set_metadata (and every other rewrite of an entry) ----------------------------------


def test_relabelling_a_file_written_with_ttl_keeps_its_expiry(durable_backend, key, monkeypatch):
    store = scratch_store(key, keep_versions=True)
    due = newest_entry(durable_backend, key, "scratch.md")["ext"]["expires_at"]
    other = MemoryStore.open(key=key)
    other.set_metadata("scratch.md", {"kind": "relabelled"}, actor="labeller")
    other.save()
    entry = newest_entry(durable_backend, key, "scratch.md")
    assert entry["ext"] == {"expires_at": due, "metadata": {"kind": "relabelled"}}
    assert MemoryStore.open(key=key).get_meta("scratch.md").metadata == {"kind": "relabelled"}

    later(monkeypatch, 2)
    assert not MemoryStore.open(key=key).exists("scratch.md")
    assert store.gc(window=timedelta(0)).expired == ("scratch.md",)
    store.gc(window=timedelta(0))
    assert anywhere(durable_backend, key, SECRET) == []


def test_relabelling_merges_with_a_concurrent_save_and_keeps_the_expiry(durable_backend, key, monkeypatch):
    scratch_store(key)
    due = newest_entry(durable_backend, key, "scratch.md")["ext"]["expires_at"]
    first, second = MemoryStore.open(key=key), MemoryStore.open(key=key)
    first.set_metadata("scratch.md", {"kind": "seen"})
    second.write_text("other.md", "other")
    second.save()
    first.save()  # rebases onto the other save: different paths merge
    assert newest_entry(durable_backend, key, "scratch.md")["ext"]["expires_at"] == due
    later(monkeypatch, 2)
    assert MemoryStore.open(key=key).list_paths() == ["keep.md", "other.md"]


def test_set_metadata_of_an_expired_file_finds_no_file(durable_backend, key, monkeypatch):
    store = scratch_store(key)
    later(monkeypatch, 2)
    assert store.set_metadata("scratch.md", {"kind": "late"}) is None
    assert not store.has_unsaved_changes()


def test_accepting_a_proposal_onto_a_ttl_file_writes_new_permanent_content(durable_backend, key, monkeypatch):
    """An accept writes the proposal's content, as `write_text` without a ttl does (docs/decisions/0084)."""
    store = scratch_store(key)
    proposal = store.propose("scratch.md", "reviewed and kept", actor="drafter")
    store.save()
    store.accept(proposal.id, actor="reviewer")
    assert "expires_at" not in newest_entry(durable_backend, key, "scratch.md").get("ext", {})
    later(monkeypatch, 2)
    assert MemoryStore.open(key=key).read_text("scratch.md") == "reviewed and kept"


def test_an_import_of_an_export_keeps_the_expiry(durable_backend, key, monkeypatch, tmp_path):
    store = scratch_store(key)
    store.export(tmp_path / "store.tar.gz")
    copy_key = f"{key}-copy"
    copy = MemoryStore.import_store(tmp_path / "store.tar.gz", key=copy_key)
    assert copy.read_text("scratch.md") == SECRET
    later(monkeypatch, 2)
    assert MemoryStore.open(key=copy_key).list_paths() == ["keep.md"]
    assert copy.gc().expired == ("scratch.md",)
    assert anywhere(durable_backend, copy_key, SECRET) == []


# -- defect 4: ttl x history ------------------------------------------------------------------------------


def test_an_expired_version_is_readable_through_no_history_path(durable_backend, key, monkeypatch):
    store = scratch_store(key, keep_versions=True)
    version = store.history("scratch.md")[0]
    assert not version.expired and store.read_version("scratch.md", version.version_id) == SECRET
    later(monkeypatch, 2)
    handle = MemoryStore.open(key=key)
    listed = handle.history("scratch.md")
    assert [(v.version_id, v.expired) for v in listed] == [(version.version_id, True)]
    with pytest.raises(VersionExpired):
        handle.read_version("scratch.md", version.version_id)
    with pytest.raises(VersionExpired):
        handle.diff("scratch.md", version.version_id)
    with pytest.raises(VersionExpired):
        handle.restore("scratch.md", version.version_id)
    assert issubclass(VersionExpired, VersionNotFound)
    assert not handle.has_unsaved_changes()
    for name in handle.list_versions("scratch.md"):  # no snapshot shows the expired content
        assert SECRET not in handle.read_version(name)
    seq = handle.log(limit=1)[0].seq
    assert not handle.at(seq).exists("scratch.md")
    assert [hit.path for hit in handle.search("secret")] == []
    assert SECRET not in handle.report()


def test_a_version_rewritten_before_its_ttl_ran_out_expires_all_the_same(durable_backend, key, monkeypatch):
    """The ttl belongs to the content written with it: a later permanent rewrite of the path does not
    make the earlier version readable for ever."""
    store = scratch_store(key, keep_versions=True)
    store.write_text("scratch.md", "the permanent text")
    store.save()
    old = store.history("scratch.md")[1]
    later(monkeypatch, 2)
    handle = MemoryStore.open(key=key)
    assert handle.read_text("scratch.md") == "the permanent text"
    assert [v.expired for v in handle.history("scratch.md")] == [False, True]
    with pytest.raises(VersionExpired):
        handle.read_version("scratch.md", old.version_id)
    handle.gc()  # the default window: expired content goes whatever the window keeps
    assert anywhere(durable_backend, key, SECRET) == []
    assert MemoryStore.open(key=key).read_text("scratch.md") == "the permanent text"


def test_restoring_a_version_whose_ttl_has_not_run_out_keeps_its_expiry(durable_backend, key, monkeypatch):
    store = scratch_store(key, keep_versions=True)
    due = newest_entry(durable_backend, key, "scratch.md")["ext"]["expires_at"]
    first = store.history("scratch.md")[0].version_id
    store.delete("scratch.md")
    store.save()
    store.restore("scratch.md", first, actor="restorer")
    store.save()
    assert newest_entry(durable_backend, key, "scratch.md")["ext"] == {
        "expires_at": due,
        "metadata": {"kind": "scratch"},
    }
    later(monkeypatch, 2)
    assert not MemoryStore.open(key=key).exists("scratch.md")
    with pytest.raises(VersionExpired):
        store.restore("scratch.md", first)


def test_expired_content_is_gone_from_storage_after_gc_with_the_default_window(durable_backend, key, monkeypatch):
    store = scratch_store(key, keep_versions=True)
    store.set_metadata("scratch.md", {"kind": "again"})
    store.save()
    assert store.search("secret")  # the search index holds its words now
    store.save()
    assert anywhere(durable_backend, key, SECRET)
    later(monkeypatch, 2)
    assert store.gc().expired == ("scratch.md",)
    assert anywhere(durable_backend, key, SECRET) == []
    fresh = MemoryStore.open(key=key)
    assert fresh.list_paths() == ["keep.md"] and fresh.read_text("keep.md") == "kept"
    assert [hit.path for hit in fresh.search("kept")] == ["keep.md"]


def test_content_also_written_without_ttl_stays_for_that_write(durable_backend, key, monkeypatch):
    """Bytes a live permanent file holds are that file's content: expiry of another path's copy leaves
    them."""
    store = scratch_store(key)
    store.write_text("copy.md", SECRET)
    store.save()
    later(monkeypatch, 2)
    store.gc()
    assert MemoryStore.open(key=key).read_text("copy.md") == SECRET


def test_an_export_after_the_ttl_ran_out_holds_no_expired_content(durable_backend, key, monkeypatch, tmp_path):
    import tarfile

    scratch_store(key, keep_versions=True)
    later(monkeypatch, 2)
    handle = MemoryStore.open(key=key)
    handle.export(tmp_path / "late.tar.gz")
    with tarfile.open(tmp_path / "late.tar.gz", "r:gz") as tar:
        data = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]  # type: ignore[union-attr]
    assert not [d for d in data if SECRET.encode() in d]
    copy = MemoryStore.import_store(tmp_path / "late.tar.gz", key=f"{key}-late")
    assert copy.list_paths() == ["keep.md"] and copy.read_text("keep.md") == "kept"
    assert [v.expired for v in copy.history("scratch.md")] == [True]
    with pytest.raises(VersionExpired):
        copy.read_version("scratch.md", copy.history("scratch.md")[0].version_id)
    assert [hit.path for hit in copy.search("kept")] == ["keep.md"]


def test_an_export_before_gc_holds_no_label_of_an_expired_file(durable_backend, key, monkeypatch, tmp_path):
    export_of_an_expired_file_holds_nothing_of_it(durable_backend, key, monkeypatch, tmp_path, 0)


def test_an_export_before_gc_holds_no_label_of_an_expired_file_in_index_parts(
    local_backend, key, monkeypatch, tmp_path
):
    """320 files: the checkpoint's file index is split into parts, and the part holding the expired entry is
    archived cut again without its labels (local disk only, as for gc's scrub of parts above)."""
    export_of_an_expired_file_holds_nothing_of_it(local_backend, key, monkeypatch, tmp_path, 320)


def export_of_an_expired_file_holds_nothing_of_it(backend, key: str, monkeypatch, tmp_path, files: int) -> None:
    """Not in issue 23's list (found by the model, `export_expired`): an export after the ttl ran out, before
    any gc, archived the expired file's labels inline in the records (and checkpoints, parts) holding its
    entry, and the import stored them again."""
    import tarfile

    store = MemoryStore.create(key=key)
    for i in range(files):
        store.write_text(f"bulk/{i:04d}.md", f"file {i}")
    store.write_text("scratch.md", SECRET, ttl=timedelta(hours=1), metadata={"ssn": "label-secret-91"})
    store.write_text("keep.md", "kept", metadata={"kind": "kept-label"})
    store.save()
    store.set_metadata("scratch.md", {"ssn": "label-secret-91", "seen": True})
    store.save()
    store.compact()  # the labels are in a checkpoint (and its parts) too
    store.write_text("after.md", "after")
    store.save()
    stored = anywhere(backend, key, "label-secret-91")
    assert any(f"/{'parts' if files else 'checkpoints'}/" in n for n in stored)
    later(monkeypatch, 2)
    MemoryStore.open(key=key).export(tmp_path / "late.tar.gz")
    with tarfile.open(tmp_path / "late.tar.gz", "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert [n for n, d in members.items() if b"label-secret-91" in d or SECRET.encode() in d] == []
    assert any(b"kept-label" in d for n, d in members.items() if "/log/" in n)
    assert any("/parts/" in n for n in members) == (files > 0)

    copy_key = f"{key}-late"
    MemoryStore.import_store(tmp_path / "late.tar.gz", key=copy_key)
    assert anywhere(backend, copy_key, "label-secret-91") == [] and anywhere(backend, copy_key, SECRET) == []
    copy = MemoryStore.open(key=copy_key)
    assert copy.list_paths() == sorted(["after.md", "keep.md", *(f"bulk/{i:04d}.md" for i in range(files))])
    assert copy.get_meta("keep.md").metadata == {"kind": "kept-label"}
    assert copy.list_paths(where={"kind": "kept-label"}) == ["keep.md"]
    assert copy.get_meta("scratch.md") is None and not copy.exists("scratch.md")
    versions = copy.history("scratch.md")
    assert versions and all(v.expired for v in versions)  # as at() of the source: written, then expired
    assert all(not copy.at(v.commit).exists("scratch.md") for v in versions)
    assert [hit.path for hit in copy.search("kept")] == ["keep.md"]
    copy.write_text("new.md", "new")
    copy.save()
    assert copy.gc().expired == ("scratch.md",)
    assert MemoryStore.open(key=copy_key).read_text("new.md") == "new"


def test_the_labels_of_an_expired_file_leave_the_search_index_when_a_live_file_holds_its_bytes(
    durable_backend, key, monkeypatch, tmp_path
):
    """The search index's doc of an expired file carries its labels; its content stays (``same.md`` holds
    the same bytes), so the segments holding that doc were kept by gc and archived by export."""
    import tarfile

    store = MemoryStore.create(key=key)
    store.write_text("scratch.md", "shared words", ttl=timedelta(hours=1), metadata={"ssn": "label-secret-35"})
    store.write_text("same.md", "shared words")
    store.save()
    assert [hit.path for hit in store.search("shared")] == ["same.md", "scratch.md"]
    store.write_text("later.md", "later")
    store.save()  # the index's segments are stored
    assert any("/search/" in n for n in anywhere(durable_backend, key, "label-secret-35"))
    later(monkeypatch, 2)
    handle = MemoryStore.open(key=key)
    handle.export(tmp_path / "late.tar.gz")
    with tarfile.open(tmp_path / "late.tar.gz", "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert [n for n, d in members.items() if b"label-secret-35" in d] == []
    copy = MemoryStore.import_store(tmp_path / "late.tar.gz", key=f"{key}-late")
    assert [hit.path for hit in copy.search("shared")] == ["same.md"]
    assert handle.gc().expired == ("scratch.md",)
    assert anywhere(durable_backend, key, "label-secret-35") == []
    assert [hit.path for hit in MemoryStore.open(key=key).search("shared")] == ["same.md"]


# -- ttl x scopes, read-only prefixes, purge --------------------------------------------------------------


def test_a_scope_relabels_and_restores_with_the_expiry_kept(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key, keep_versions=True)
    alice = store.scope("users/alice")
    alice.write_text("note.md", SECRET, ttl=timedelta(hours=1))
    store.save()
    due = newest_entry(durable_backend, key, "users/alice/note.md")["ext"]["expires_at"]
    alice.set_metadata("note.md", {"seen": True})
    store.save()
    assert newest_entry(durable_backend, key, "users/alice/note.md")["ext"]["expires_at"] == due
    later(monkeypatch, 2)
    assert alice.list_paths() == [] and not alice.exists("note.md")
    store.gc()
    assert anywhere(durable_backend, key, SECRET) == []


def test_a_ttl_file_in_a_read_only_prefix_still_expires_and_cannot_be_relabelled(durable_backend, key, monkeypatch):
    store = MemoryStore.create(key=key, trusted=True)
    store.write_text("policy/tmp.md", SECRET, ttl=timedelta(hours=1))
    store.save()
    store.set_read_only_prefixes(["policy"])
    agent = MemoryStore.open(key=key)
    with pytest.raises(ReadOnlyPath):
        agent.set_metadata("policy/tmp.md", {"kind": "x"})
    later(monkeypatch, 2)
    assert agent.gc().expired == ("policy/tmp.md",)  # the writer's promise: gone when due
    assert anywhere(durable_backend, key, SECRET) == []


def test_purging_a_ttl_file_before_it_expired(durable_backend, key, monkeypatch):
    store = scratch_store(key, keep_versions=True)
    store.write_text("later.md", "later secret 51", ttl=timedelta(hours=1))
    store.save()
    store.purge("scratch.md")
    assert anywhere(durable_backend, key, SECRET) == []
    later(monkeypatch, 2)
    store.gc()
    assert anywhere(durable_backend, key, "later secret 51") == []
    assert MemoryStore.open(key=key).list_paths() == ["keep.md"]


def test_purging_a_ttl_file_after_it_expired_removes_every_copy(durable_backend, key, monkeypatch):
    store = scratch_store(key, keep_versions=True)
    later(monkeypatch, 2)
    assert not store.exists("scratch.md")
    store.purge("scratch.md")  # expired: reads as missing, and purge still removes every copy
    assert anywhere(durable_backend, key, SECRET) == []
    assert MemoryStore.open(key=key).list_paths() == ["keep.md"]
    assert store.gc().expired == ()


def test_the_labels_of_an_expired_file_are_gone_from_storage_after_gc(durable_backend, key, monkeypatch):
    labels_of_an_expired_file_go_with_gc(durable_backend, key, monkeypatch, 0)


def test_the_labels_of_an_expired_file_go_from_a_partitioned_checkpoint_too(local_backend, key, monkeypatch):
    """320 files: the checkpoint's file index is split into parts (local disk only: on moto S3 the byte
    scans of 700 objects cost tens of seconds, and the parts are the same objects there)."""
    labels_of_an_expired_file_go_with_gc(local_backend, key, monkeypatch, 320)


def labels_of_an_expired_file_go_with_gc(backend, key: str, monkeypatch, files: int) -> None:
    store = MemoryStore.create(key=key)
    for i in range(files):
        store.write_text(f"bulk/{i:04d}.md", f"file {i}")
    store.write_text("scratch.md", SECRET, ttl=timedelta(hours=1), metadata={"ssn": "label-secret-77"})
    store.write_text("keep.md", "kept", metadata={"kind": "kept-label"})
    store.save()
    store.set_metadata("scratch.md", {"ssn": "label-secret-77", "seen": True})
    store.save()
    store.compact()  # the labels are in a checkpoint (and its parts) too
    assert anywhere(backend, key, "label-secret-77")
    later(monkeypatch, 2)
    assert store.gc().expired == ("scratch.md",)
    assert anywhere(backend, key, "label-secret-77") == [] and anywhere(backend, key, SECRET) == []
    fresh = MemoryStore.open(key=key)
    assert fresh.get_meta("keep.md").metadata == {"kind": "kept-label"}
    assert fresh.list_paths(where={"kind": "kept-label"}) == ["keep.md"]
    assert [v.expired for v in fresh.history("scratch.md")][1:] == [True, True]
    assert len(fresh.list_paths("bulk")) == files


def test_a_snapshot_an_earlier_release_took_of_a_ttl_write_expires_with_it(durable_backend, key, monkeypatch):
    """This release takes no snapshot of a ttl write; one an earlier release took reads as expired."""
    store = scratch_store(key, keep_versions=True)
    name = version_name("scratch.md", "2026-01-01T00:00:00+00:00", hashlib.sha256(SECRET.encode()).hexdigest())
    durable_backend.put(key, name, SECRET.encode())
    assert store.read_version(name) == SECRET
    later(monkeypatch, 2)
    handle = MemoryStore.open(key=key)
    for read in (
        lambda: handle.read_version(name),
        lambda: handle.read_version_bytes(name),
        lambda: handle.read_version("scratch.md", name),
        lambda: handle.restore("scratch.md", name),
    ):
        with pytest.raises(VersionExpired):
            read()
    handle.gc()
    assert anywhere(durable_backend, key, SECRET) == []


@pytest.mark.parametrize("keep_versions", [False, True])  # its versions/ snapshot goes too
def test_an_expired_file_deleted_by_a_write_beside_it_leaves_no_text_in_the_search_index(
    local_backend, key, monkeypatch, keep_versions
):
    """gc() reads the commits it drops for entries whose ttl ran out (decision 0173): nothing kept says so."""
    store = MemoryStore.create(key=key, keep_versions=keep_versions)
    store.write_text("x", f"{SECRET} words", ttl=timedelta(hours=1))
    for i in range(40):  # a large first segment: later merges of small ones leave it alone
        store.write_text(f"bulk/{i}.md", f"bulk file number {i} " * 20)
    store.save()
    for i in range(3):
        other = MemoryStore.open(key=key)
        other.write_text(f"n{i}.md", f"note {i}")
        other.save()
    later(monkeypatch, 2)
    writer = MemoryStore.open(key=key)
    writer.write_text("x/y", "hello")  # deletes the expired x in its commit (op expired)
    writer.save()
    assert writer.gc(window=timedelta(0)).expired == ()
    assert anywhere(local_backend, key, SECRET) == []


def test_gc_reads_a_binary_segment_for_an_expired_paths_labels():
    """gc() looks for an expired path's labels in each segment (its content may live on in another path):
    a binary segment is decoded for them, not counted as unreadable (which removed every segment, the one
    the newest index names included, whenever an expired file had labels)."""
    from flyteplugins_memory._journal.gc import _labels_of
    from flyteplugins_memory._rules.search_forms import encode_segment
    from flyteplugins_memory._rules.search_text import make_doc

    meta = ("2026-01-01T00:00:00+00:00", "agent", "", 5)
    plain = make_doc("a" * 64, b"hello", meta, {})
    labelled = make_doc("b" * 64, b"hello", meta, {"tag": "x"})
    segment = encode_segment({"tmp.md": labelled, "copy.md": plain}, "test")
    assert _labels_of(segment, frozenset({"tmp.md"})) is True
    assert _labels_of(segment, frozenset({"copy.md"})) is False  # a row without labels
    assert _labels_of(segment, frozenset({"other.md"})) is False  # no row of the path
    assert _labels_of(b"not a segment", frozenset({"other.md"})) is True  # unreadable: removed, to be safe
