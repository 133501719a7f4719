"""Issue 23, purge where it meets other features: proposals (defect 1), labels (defect 2), the audit
(defect 10), and what a purge leaves to the read paths (at, history, log, search, report, restore) and to a
stale handle's next save. Every check scans storage itself: every object under the storage root (the store
prefix and the journal beside it) and, member by member, every export archive made after the purge."""

from __future__ import annotations

import io
import tarfile

import pytest

from flyteplugins_memory import ContentPurged, MemoryStore, VersionNotFound
from flyteplugins_memory._rules.layout import part_name
from flyteplugins_memory._rules.location import storage_root
from flyteplugins_memory.testing._kit import objects_under

SECRET = "sk-live-PROPOSED-9c2e-MUST-GO"
SSN = "078-05-1120-SSN-LABEL"
OTHER = "harmless-other-content"


def _root(backend) -> str:
    return backend.fs._strip_protocol(storage_root(backend.raw_data_path)).rstrip("/")


def everything(backend) -> dict[str, bytes]:
    """Every object under the storage root (stores, journals, archives), each archive's members too."""
    found: dict[str, bytes] = {}
    for name, data in objects_under(backend.fs, _root(backend)).items():
        found[name] = data
        if name.endswith(".tar.gz"):
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        extracted = archive.extractfile(member)
                        found[f"{name}!{member.name}"] = extracted.read() if extracted else b""
    return found


def holding(backend, *needles: str) -> list[str]:
    """The objects (and archive members) whose bytes hold any of `needles`."""
    encoded = [n.encode() for n in needles]
    return sorted(name for name, data in everything(backend).items() if any(n in data for n in encoded))


def export_to(backend, store: MemoryStore, name: str) -> None:
    store.export(f"{backend.raw_data_path}/exports/{name}.tar.gz")


def _proposal_then_accept(store: MemoryStore, path: str) -> str:
    proposal = store.propose(path, SECRET, reason="suggested", metadata={"ssn": SSN})
    store.save()
    store.write_text("other.md", OTHER)  # a commit that carries the pending draft inline
    store.save()
    store.accept(proposal.id)
    return proposal.id


# -- defect 1: purge x proposals ------------------------------------------------------------------------


def test_purge_removes_a_proposals_text_from_every_record_and_checkpoint(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    _proposal_then_accept(store, "notes/p.md")
    store.compact()  # a checkpoint too
    store.write_text("later.md", "later")
    store.save()
    export_to(durable_backend, store, "before")
    assert holding(durable_backend, SECRET)
    durable_backend.fs.rm_file(
        durable_backend.fs._strip_protocol(f"{durable_backend.raw_data_path}/exports/before.tar.gz")
    )

    store.purge("notes/p.md", actor="security", reason="leaked")

    assert holding(durable_backend, SECRET, SSN) == []
    export_to(durable_backend, store, "after")
    assert holding(durable_backend, SECRET, SSN) == []
    reopened = MemoryStore.get_or_create(key=key)
    (decided,) = reopened.proposals()
    assert decided.content is None and dict(decided.metadata) == {} and decided.status == "accepted"
    assert reopened.list_paths() == ["later.md", "other.md"]


def test_purge_of_a_path_with_a_pending_draft_discards_it_and_its_text(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes/p.md", "current")
    store.save()
    proposal = store.propose("notes/p.md", SECRET, metadata={"ssn": SSN})
    store.save()
    store.purge("notes/p.md")
    assert holding(durable_backend, SECRET, SSN) == []
    found = MemoryStore.get_or_create(key=key).proposal(proposal.id)
    assert found.status == "discarded" and found.content is None


def test_a_purge_of_a_path_deleted_long_ago_still_redacts_its_proposal(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    _proposal_then_accept(store, "notes/p.md")
    store.delete("notes/p.md")
    store.save()
    result = store.purge("notes/p.md")
    assert result.commit is not None  # a purge always commits: stale handles must rebase past it
    assert holding(durable_backend, SECRET, SSN) == []


# -- defect 2: purge x labels ---------------------------------------------------------------------------


def test_purge_removes_a_files_labels_from_every_stored_object_and_read_path(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("people/alice.md", "alice v1", metadata={"ssn": SSN, "team": "x"})
    store.save()
    first = store.log(limit=1)[0].seq
    store.write_text("people/alice.md", "alice v2", metadata={"ssn": SSN})
    store.write_text("keep.md", OTHER, metadata={"team": "x"})
    store.save()
    store.compact()
    store.set_metadata("people/alice.md", {"ssn": SSN, "again": True})
    store.save()
    assert holding(durable_backend, SSN)

    store.purge("people/alice.md", actor="dpo", reason="erasure request")

    assert holding(durable_backend, SSN) == []
    export_to(durable_backend, store, "after")
    assert holding(durable_backend, SSN) == []
    reopened = MemoryStore.get_or_create(key=key)
    past = reopened.at(first)
    meta = past.get_meta("people/alice.md")
    assert meta is None or dict(meta.metadata) == {}
    with pytest.raises(ContentPurged):
        past.read_text("people/alice.md")
    assert dict(reopened.get_meta("keep.md").metadata) == {"team": "x"}
    assert reopened.search(SSN) == [] and reopened.search("alice") == []
    assert SSN not in reopened.report()
    assert all(SSN not in repr(e) for e in reopened.history("people/alice.md"))
    assert all(SSN not in repr(c) for c in reopened.log(limit=50))


def test_purge_removes_labels_from_index_parts_and_recuts_them(durable_backend, key, monkeypatch):
    from flyteplugins_memory._rules import parts as _parts

    monkeypatch.setattr(_parts, "PART_TARGET_BYTES", 2048)  # small parts: a few files each
    monkeypatch.setattr(_parts, "PART_MAX_BYTES", 4096)
    monkeypatch.setattr(_parts, "PART_MIN_BYTES", 512)
    monkeypatch.setattr(_parts, "INLINE_MAX_BYTES", 2048)
    store = MemoryStore.get_or_create(key=key)
    for i in range(60):
        store.write_text(f"f/{i:04d}.md", f"file {i}", metadata={"n": i})
    store.write_text("f/0010-secret.md", "secret file", metadata={"ssn": SSN})
    store.save()
    store.compact()
    store.write_text("g.md", "after the checkpoint")  # a record on the partitioned checkpoint
    store.save()
    parts_before = {n for n in durable_backend.journal(key) if "/parts/" in n}
    assert len(parts_before) > 2 and holding(durable_backend, SSN)
    pinned = MemoryStore._deserialize(store._serialize())
    assert not pinned.exists("zzz.md")  # opened: its checkpoint names the old parts, none loaded
    before = store.log(limit=1)[0].seq

    store.purge("f/0010-secret.md")

    assert holding(durable_backend, SSN) == []
    parts_after = {n for n in durable_backend.journal(key) if "/parts/" in n}
    assert len(parts_before - parts_after) == 1  # the part that held the labels was cut again ...
    assert len(parts_after - parts_before) == 1  # ... under a new sha256; the others stay as they were
    reopened = MemoryStore.get_or_create(key=key)
    assert len(reopened.list_paths()) == 61 and dict(reopened.get_meta("f/0007.md").metadata) == {"n": 7}
    past = reopened.at(before)
    assert dict(past.get_meta("f/0010-secret.md").metadata) == {}
    # a handle that still names the old part learns it was purged, not that the store is corrupt
    with pytest.raises(ContentPurged, match="refresh"):
        pinned.list_paths()
    assert part_name("0" * 64).startswith("meta/.journal/parts/")


# -- stale handles --------------------------------------------------------------------------------------


def test_a_stale_handle_does_not_write_purged_labels_or_proposal_text_back(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("people/bob.md", "bob", metadata={"ssn": SSN})
    store.save()
    _proposal_then_accept(store, "notes/p.md")
    stale = MemoryStore.get_or_create(key=key)
    stale.list_paths()  # loaded: its state in memory holds the labels and the accepted proposal

    store.purge("people/bob.md")
    store.purge("notes/p.md")
    assert holding(durable_backend, SECRET, SSN) == []

    stale.write_text("stale.md", "from the stale handle")
    stale.append({"role": "user", "content": "hi"})
    stale.save()
    stale.compact()  # a checkpoint written from the stale handle's state
    assert holding(durable_backend, SECRET, SSN) == []
    assert MemoryStore.get_or_create(key=key).list_paths() == ["other.md", "stale.md"]


# -- defect 10: purge in the audit ----------------------------------------------------------------------


def test_a_purge_is_audited_as_a_purge_and_shown_in_the_log(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("creds.txt", SECRET)
    store.write_text("gone.txt", OTHER)
    store.save()
    store.delete("gone.txt", actor="cleaner", reason="tidy")
    store.save()
    store.purge("creds.txt", actor="security", reason="leaked key")
    reopened = MemoryStore.get_or_create(key=key)
    events = reopened.audit_tail(5)
    purge = events[-1]
    assert (purge["op"], purge["path"], purge["actor"], purge["reason"]) == (
        "purge",
        "creds.txt",
        "security",
        "leaked key",
    )
    assert {"ts", "op", "path", "old_sha", "new_sha", "actor", "reason", "version_file"} <= set(purge)
    assert purge["new_sha"] == "" and purge["old_sha"] != ""
    assert [e["op"] for e in events if e["path"] == "gone.txt"][-1] == "delete"
    newest = reopened.log(limit=1)[0]
    assert (newest.kind, newest.actor, newest.reason, newest.deleted) == (
        "purge",
        "security",
        "leaked key",
        ("creds.txt",),
    )
    assert reopened.history("creds.txt")[0].deleted and reopened.history("creds.txt")[0].actor == "security"


def test_a_purge_is_audited_even_on_a_handle_without_audit(local_backend, key):
    store = MemoryStore.get_or_create(key=key, audit=False)
    store.write_text("creds.txt", SECRET)
    store.save()
    store.purge("creds.txt", actor="security", reason="leaked")
    assert MemoryStore.get_or_create(key=key).audit_tail(1)[0]["op"] == "purge"


def test_the_cli_audit_shows_the_purge(local_backend, key):
    from click.testing import CliRunner

    from flyteplugins_memory.cli import memory

    store = MemoryStore.get_or_create(key=key)
    store.write_text("creds.txt", SECRET)
    store.save()
    store.purge("creds.txt", actor="security", reason="leaked")
    result = CliRunner().invoke(memory, ["audit", "--uri", store.remote_path, "--json"])
    assert result.exit_code == 0, result.output
    assert '"op": "purge"' in result.output


# -- interplay with the read paths ----------------------------------------------------------------------


def test_after_a_purge_no_read_path_brings_the_content_back(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("creds.txt", SECRET, metadata={"ssn": SSN})
    store.save()
    first = store.log(limit=1)[0].seq
    store.write_text("creds.txt", "rotated")
    store.save()
    store.purge("creds.txt")
    with pytest.raises((ContentPurged, VersionNotFound)):
        store.restore("creds.txt", f"c{first}")
    with pytest.raises((ContentPurged, VersionNotFound)):
        store.read_version("creds.txt", f"c{first}")
    assert not store.exists("creds.txt") and store.has_unsaved_changes() is False
    with pytest.raises(ContentPurged):
        store.at(first).read_text("creds.txt")
    assert store.search("rotated") == [] and store.search(SECRET) == []
    page = store.report()
    assert SECRET not in page and SSN not in page
    assert holding(durable_backend, SECRET, SSN, "rotated") == []


async def test_concurrent_purges_on_two_handles_both_land(durable_backend, key):
    store = await MemoryStore.get_or_create.aio(key=key)
    await store.write_text.aio("a.md", "alpha", metadata={"ssn": SSN})
    await store.write_text.aio("b.md", "bravo", metadata={"ssn": SSN})
    await store.save.aio()
    first, second = MemoryStore(key), MemoryStore(key)
    await first.list_paths.aio()
    await second.list_paths.aio()
    import asyncio

    results = await asyncio.gather(first.purge.aio("a.md"), second.purge.aio("b.md"))
    assert {r.path for r in results} == {"a.md", "b.md"}
    assert holding(durable_backend, SSN, "alpha", "bravo") == []
    reopened = await MemoryStore.get_or_create.aio(key=key)
    assert await reopened.list_paths.aio() == []
    assert [e["op"] for e in await reopened.audit_tail.aio(2)] == ["purge", "purge"]


def test_every_place_of_the_data_map_that_holds_content_in_the_journal_is_rewritten_by_purge():
    from flyteplugins_memory._journal.redact import HANDLED
    from flyteplugins_memory._rules.data_map import PLACES, Carries

    rewritten = {"commit_record", "checkpoint", "index_part"}
    user_data = Carries.CONTENT | Carries.LABELS | Carries.MESSAGES
    for place in PLACES:
        if set(place.objects) & rewritten and place.carries & user_data:
            assert place.name in HANDLED, place.name
    assert set(HANDLED) <= {p.name for p in PLACES}


def test_gc_export_and_import_after_a_purge_that_recut_parts(local_backend, key, monkeypatch):
    from datetime import timedelta

    from flyteplugins_memory._rules import parts as _parts

    monkeypatch.setattr(_parts, "PART_TARGET_BYTES", 2048)
    monkeypatch.setattr(_parts, "PART_MAX_BYTES", 4096)
    monkeypatch.setattr(_parts, "PART_MIN_BYTES", 512)
    monkeypatch.setattr(_parts, "INLINE_MAX_BYTES", 2048)
    store = MemoryStore.get_or_create(key=key)
    for i in range(40):
        store.write_text(f"f/{i:04d}.md", f"file {i}", metadata={"n": i})
    store.write_text("f/0005-secret.md", "secret file", metadata={"ssn": SSN})
    store.append({"role": "user", "content": "hi"})
    store.save()
    store.compact()
    store.write_text("g.md", "after")
    store.save()
    store.purge("f/0005-secret.md")
    archive = f"{local_backend.raw_data_path}/exports/after.tar.gz"
    store.export(archive)
    copy = MemoryStore.import_store(archive, key=f"{key}-copy")
    assert len(copy.list_paths()) == 41 and copy.read_text("f/0007.md") == "file 7"
    store.gc(window=timedelta(0))
    reopened = MemoryStore.get_or_create(key=key)
    assert len(reopened.list_paths()) == 41 and dict(reopened.get_meta("f/0039.md").metadata) == {"n": 39}
    assert holding(local_backend, SSN) == []


def test_a_purged_paths_versions_stay_unreadable_when_another_path_holds_the_same_bytes(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("mine.md", OTHER, metadata={"ssn": SSN})
    store.write_text("theirs.md", OTHER)
    store.save()
    first = store.log(limit=1)[0].seq
    result = store.purge("mine.md")
    assert result.kept_shas and holding(durable_backend, SSN) == []
    with pytest.raises(ContentPurged):
        store.at(first).read_text("mine.md")
    with pytest.raises(VersionNotFound):
        store.read_version("mine.md", f"c{first}")
    with pytest.raises(VersionNotFound):
        store.restore("mine.md", f"c{first}")
    assert dict(store.at(first).get_meta("mine.md").metadata) == {}
    assert store.at(first).read_text("theirs.md") == OTHER and store.read_text("theirs.md") == OTHER
    assert not store.exists("mine.md") and not store.has_unsaved_changes()


def test_purge_of_a_path_that_only_ever_had_a_proposal(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    proposal = store.propose("never/written.md", SECRET, metadata={"ssn": SSN})
    store.save()
    store.discard(proposal.id)
    assert holding(durable_backend, SECRET)
    store.purge("never/written.md", reason="a proposal held a secret")
    assert holding(durable_backend, SECRET, SSN) == []


def test_purge_of_a_file_whose_ttl_ran_out_deletes_it_for_good(local_backend, key, monkeypatch):
    import time
    from datetime import timedelta

    from flyteplugins_memory._journal import gc as _gc

    store = MemoryStore.get_or_create(key=key)
    store.write_text("tmp.md", SECRET, metadata={"ssn": SSN}, ttl=timedelta(hours=1))
    store.save()
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * 3600)  # its ttl ran out; gc has not run
    store.purge("tmp.md")
    monkeypatch.undo()  # back to now: a file that was not deleted would read as live again
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.list_paths() == [] and not reopened.exists("tmp.md")
    assert holding(local_backend, SECRET, SSN) == []


# -- stale handles' saves after a purge (found by the model, tests/reliability/test_model_regressions.py) ----------


@pytest.mark.parametrize("then", ["rewrite", "delete"])
def test_a_stale_handles_save_never_stores_purged_bytes_again(durable_backend, key, then):
    from flyteplugins_memory import ConcurrencyError

    writer = MemoryStore.get_or_create(key=key)
    writer.write_bytes("notes/c.bin", SECRET.encode())  # a new file: written in place, at its path
    writer.save()
    writer.read_bytes("notes/c.bin")  # held in its working root
    MemoryStore.get_or_create(key=key).purge("notes/c.bin")
    assert holding(durable_backend, SECRET) == []
    if then == "rewrite":
        writer.write_text("notes/c.bin", "new content")
        with pytest.raises(ConcurrencyError):
            writer.save()  # a conflict with the purge's delete
    else:
        writer.delete("notes/c.bin")
        writer.save()  # the same change as the purge's: it merges
    assert holding(durable_backend, SECRET) == []


def test_a_stale_handles_save_leaves_no_search_segment_of_purged_content(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", f"alpha {SECRET}", metadata={"ssn": SSN})
    store.save()
    stale = MemoryStore.get_or_create(key=key)
    assert stale.search("alpha")  # it holds the index's segments, a.txt's doc among them
    MemoryStore.get_or_create(key=key).purge("a.txt")
    assert holding(durable_backend, SECRET, SSN) == []
    stale.write_text("notes/b.md", "bravo")
    stale.save()  # its first attempt, on its stale base, folds its cached segments into a new one
    assert holding(durable_backend, SECRET, SSN) == []
    assert [h.path for h in MemoryStore.get_or_create(key=key).search("bravo")] == ["notes/b.md"]


def test_a_stale_save_failing_beside_its_copy_leaves_no_purged_bytes(durable_backend, key, monkeypatch):
    from flyteplugins_memory import StorageError
    from flyteplugins_memory._journal import commit as _commit

    writer = MemoryStore.get_or_create(key=key)
    writer.write_bytes("notes/c.bin", SECRET.encode())  # a new file: written in place, at its path
    writer.save()
    writer.read_bytes("notes/c.bin")  # held in its working root: its save copies these bytes into a blob
    MemoryStore.get_or_create(key=key).purge("notes/c.bin")
    assert holding(durable_backend, SECRET) == []
    writer.write_text("notes/c.bin", "new content")

    async def segment_upload_fails(*args, **kwargs):
        raise StorageError("the search segment's PUT failed")

    monkeypatch.setattr(_commit, "prepare", segment_upload_fails)  # the copy beside it succeeds
    with pytest.raises(StorageError):
        writer.save()
    assert holding(durable_backend, SECRET) == []


@pytest.mark.parametrize(
    "failing",
    [
        "upload_in_place",  # in its first wave: the segment beside it is written
        "_claim",  # at its commit record (the slot holds the purge: not ours)
    ],
)
def test_a_stale_save_that_fails_leaves_no_search_segment_of_purged_content(durable_backend, key, monkeypatch, failing):
    from flyteplugins_memory import StorageError
    from flyteplugins_memory._journal import commit as _commit

    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", f"alpha {SECRET}", metadata={"ssn": SSN})
    store.save()
    stale = MemoryStore.get_or_create(key=key)
    assert stale.search("alpha")  # it holds the index's segments, a.txt's doc among them
    MemoryStore.get_or_create(key=key).purge("a.txt")
    assert holding(durable_backend, SECRET, SSN) == []
    stale.write_text("notes/b.md", "bravo")

    async def fails(*args, **kwargs):
        raise StorageError(f"{failing} failed")

    monkeypatch.setattr(_commit, failing, fails)
    with pytest.raises(StorageError):
        stale.save()  # its first wave folded its cached segments (a.txt's doc) into a new one
    assert holding(durable_backend, SECRET, SSN) == []


def test_a_stale_save_whose_copies_fail_half_way_leaves_no_purged_bytes(durable_backend, key, storage_faults):
    from flyteplugins_memory import StorageError
    from flyteplugins_memory._rules.codecs import sha256_bytes

    writer = MemoryStore.get_or_create(key=key)
    writer.write_bytes("notes/c.bin", SECRET.encode())  # new files: written in place, at their paths
    writer.write_bytes("notes/d.bin", b"other bytes")
    writer.save()
    writer.read_bytes("notes/c.bin"), writer.read_bytes("notes/d.bin")  # held: its save copies these
    MemoryStore.get_or_create(key=key).purge("notes/c.bin")
    assert holding(durable_backend, SECRET) == []
    writer.write_text("notes/c.bin", "new c")
    writer.write_text("notes/d.bin", "new d")
    other = sha256_bytes(b"other bytes")
    storage_faults.arm(lambda n, op, path: "permanent" if op == "write" and other in path else None)
    with pytest.raises(StorageError):
        writer.save()  # the copy of c.bin's bytes is created, the one of d.bin's fails
    storage_faults.clear()
    assert holding(durable_backend, SECRET) == []


def test_a_conflicting_save_on_an_old_base_leaves_no_search_segment_of_purged_content(durable_backend, key):
    from flyteplugins_memory import ConcurrencyError
    from flyteplugins_memory._journal.retention import STALE_BASE_AFTER

    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", f"alpha {SECRET}", metadata={"ssn": SSN})
    store.write_text("notes/b.md", "bravo")
    store.save()
    stale = MemoryStore.get_or_create(key=key)
    assert stale.search("alpha")  # it holds the index's segments, a.txt's doc among them
    MemoryStore.get_or_create(key=key).purge("a.txt")
    assert holding(durable_backend, SECRET, SSN) == []
    stale._checkout.working_copy.base.observed_at -= STALE_BASE_AFTER + 1  # a base last known newest long ago
    theirs = MemoryStore.get_or_create(key=key)
    theirs.write_text("notes/b.md", "bravo, theirs")
    theirs.save()
    stale.write_text("notes/b.md", "bravo, mine")  # both rewrote notes/b.md: this save conflicts
    with pytest.raises(ConcurrencyError):
        stale.save()  # its first wave folded its cached segments (a.txt's doc) into a new one
    assert holding(durable_backend, SECRET, SSN) == []


def test_no_copy_of_a_failed_save_lands_after_it_raised(local_backend, key, storage_faults, monkeypatch):
    import asyncio
    import threading

    from flyteplugins_memory import StorageError
    from flyteplugins_memory._journal.journal_storage import JournalStorage
    from flyteplugins_memory._rules.codecs import sha256_bytes
    from helpers import saved

    saved(key, {"notes/d.bin": "other bytes"})  # new files: written in place, at their paths
    writer = MemoryStore.get_or_create(key=key)
    writer.write_bytes("notes/c.bin", SECRET.encode())
    writer.save()  # c.bin is held (its copy is written from the working root), d.bin is not (copied)
    MemoryStore.get_or_create(key=key).purge("notes/c.bin")
    writer.write_text("notes/c.bin", "new c")
    writer.write_text("notes/d.bin", "new d")
    secret, other = sha256_bytes(SECRET.encode()), sha256_bytes(b"other bytes")
    storage_faults.arm(lambda n, op, path: "permanent" if op == "write" and other in path else None)
    landed = threading.Event()
    create_many = JournalStorage.create_many

    async def slow_create(self, objects):  # the held copy's upload is slower than the failing one
        if not any(secret in name for name in objects):
            return await create_many(self, objects)
        await asyncio.sleep(0.2)
        try:
            return await create_many(self, objects)
        finally:
            landed.set()

    monkeypatch.setattr(JournalStorage, "create_many", slow_create)
    with pytest.raises(StorageError):
        writer.save()  # d.bin's copy fails; the save cleans up and raises
    assert landed.is_set()  # ... only once c.bin's copy had ended: its cleanup saw it
    storage_faults.clear()
    assert holding(local_backend, SECRET) == []
