"""`export` and `import_store`: a whole store (files, transcript, sidecars, audit, versions, record logs,
metadata, proposals, settings, journal history) moves as one .tar.gz between local disk and S3 (moto) and
is the same store there; the import is exclusive, audited, and the imported store saves and merges like
any other and opens in upstream's `MemoryStore`. Hostile archives: see test_export_hostile.py."""

from __future__ import annotations

import asyncio
import contextvars
import gzip
import hashlib
import io
import json
import tarfile
import threading

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import (
    ArchiveExists,
    ArchiveNotFound,
    ExportResult,
    InvalidArgument,
    InvalidKey,
    MemoryStore,
    MemoryStoreError,
    StorageError,
    StoreAlreadyExists,
    StoreNotFound,
    UnsavedChanges,
)
from flyteplugins_memory._api.archive import export as _export
from released import ISSUE_9_RELEASE, released_source, run_released

JOURNAL = "meta/.journal"
PNG = bytes(range(256)) * 4


def populated(key: str) -> MemoryStore:
    """A store with every kind of content, over several commits (one compacted), a delete and a proposal."""
    store = MemoryStore.create(key=key, keep_versions=True, read_only_prefixes=("policy",))
    store.write_text("notes/plan.md", "step 1", actor="planner", reason="first plan", metadata={"v": 1})
    store.write_bytes("images/chart.png", PNG, actor="plotter", reason="chart")
    store.write_json("data/facts.json", {"tea": "green"})
    store.write_text("old.md", "to delete")
    store.append({"role": "user", "content": "hello"})
    store.records("events").append({"n": 1})
    store.save(actor="agent-1", reason="first")
    store.write_text("notes/plan.md", "step 2", actor="planner", reason="second plan", metadata={"v": 2})
    store.delete("old.md", reason="stale")
    store.append({"role": "assistant", "content": "hi"})
    store.records("events").append({"n": 2})
    store.propose("memory/tea.md", "likes green tea", actor="agent-2", reason="heard it")
    store.compact()
    store.write_text("notes/later.md", "after the checkpoint")
    store.save(actor="agent-1", reason="third")
    return store


def prefix_names(backend, key: str) -> dict[str, bytes]:
    return backend.upstream_view(key)


def assert_same_store(src_backend, src_key: str, dst_backend, dst_key: str) -> None:
    """Everything of the source, read from storage directly and through a new handle, is in the copy."""
    source, copy = prefix_names(src_backend, src_key), prefix_names(dst_backend, dst_key)
    for name, data in source.items():
        if name != "audit/log.jsonl":  # brought up to date at checkpoints; compared through audit_tail
            assert copy[name] == data, name
    journal, copied = src_backend.journal(src_key), dst_backend.journal(dst_key)
    missing = [n for n in journal if n != f"{JOURNAL}/head.json" and copied.get(n) != journal[n]]
    assert missing == []
    old = MemoryStore.open(remote_path=src_backend.store_uri(src_key))
    new = MemoryStore.open(remote_path=dst_backend.store_uri(dst_key))
    assert new.list_paths() == old.list_paths()
    for path in old.list_paths():
        assert new.read_bytes(path) == old.read_bytes(path)
        assert new.get_meta(path) == old.get_meta(path)
        assert new.list_versions(path) == old.list_versions(path)
    assert [new.read_version(v) for v in new.list_versions("notes/plan.md")] == ["step 1", "step 2"]
    assert new.list_versions("old.md") == old.list_versions("old.md") != []
    assert new.messages == old.messages
    assert new.records("events").read() == old.records("events").read() == [{"n": 1}, {"n": 2}]
    assert [p.content for p in new.proposals()] == ["likes green tea"]
    assert new.persisted_read_only_prefixes() == ("policy",)
    events = new.audit_tail(100)
    assert events[:-1] == old.audit_tail(100)
    assert events[-1]["op"] == "import" and events[-1]["from_key"] == src_key
    old_log = [(c.seq, c.kind, c.actor, c.reason) for c in old.log(limit=50)]
    assert [(c.seq, c.kind, c.actor, c.reason) for c in new.log(limit=50)][1:] == old_log


@pytest.fixture
def both(local_backend, s3_backend, raw_data_context):
    """Local disk and S3, and a function that makes one of them the Flyte context's raw-data path."""

    def use(backend):
        raw_data_context(backend.raw_data_path)
        return backend

    return local_backend, s3_backend, use


@pytest.mark.parametrize("direction", ["local_to_s3", "s3_to_local"])
def test_round_trip_keeps_every_file_message_sidecar_audit_event_version_and_commit(both, key, tmp_path, direction):
    local, s3, use = both
    source, target = (local, s3) if direction == "local_to_s3" else (s3, local)
    use(source)
    populated(key)
    # the archive lives on the source's side: a local file, or an object in the bucket
    dest = str(tmp_path / "store.tar.gz") if source is local else f"s3://{s3.raw_data_path.split('/')[2]}/x/a.tar.gz"
    result = MemoryStore.open(key=key).export(dest)
    assert isinstance(result, ExportResult) and result.path == dest
    assert result.bytes == source.fs.size(dest) if source is s3 else (tmp_path / "store.tar.gz").stat().st_size
    assert result.counts["file"] == 6 and result.counts["journal"] > 0  # records/events count as files
    use(target)
    imported = MemoryStore.import_store(dest, key="copy", actor="ops", reason="move buckets")
    assert imported.list_paths() == MemoryStore.open(remote_path=source.store_uri(key)).list_paths()
    assert_same_store(source, key, target, "copy")
    assert imported.log(limit=1)[0].actor == "ops" and imported.log(limit=1)[0].reason == "move buckets"


def test_manifest_lists_every_member_with_its_checksum_and_the_archive_streams_members(local_backend, key, tmp_path):
    populated(key)
    dest = tmp_path / "a.tar.gz"
    result = MemoryStore.open(key=key).export(dest)
    with tarfile.open(dest, "r:gz") as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        data = {n: tar.extractfile(n).read() for n in names if n != "manifest.json"}  # type: ignore[union-attr]
    assert names[-1] == "manifest.json" and len(names) == result.members + 1
    assert manifest["format"] == 1 and manifest["key"] == key
    assert set(manifest["members"]) == set(data)
    stored = {f"store/{n}": d for n, d in local_backend.objects(key).items()}
    stored |= {f"journal/{n[len(JOURNAL) + 1 :]}": d for n, d in local_backend.journal(key).items()}
    # every object of the store, as stored; the head hint names the pinned (newest) commit, where the stored
    # one may be a small save behind (`_journal.commit.write_head`)
    head, hint = json.loads(data.pop("journal/head.json")), json.loads(stored.pop("journal/head.json"))
    assert head["seq"] == MemoryStore.open(key=key).log(limit=1)[0].seq and head["checkpoint"] == hint["checkpoint"]
    assert hint["seq"] in (head["seq"] - 1, head["seq"])
    assert data == stored
    import hashlib

    for name, body in data.items():
        assert manifest["members"][name] == {"sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}


def test_imported_store_saves_and_merges_concurrent_saves_like_any_other(local_backend, key, tmp_path):
    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")
    a, b = MemoryStore.open(key="copy"), MemoryStore.open(key="copy")
    a.write_text("from-a.md", "a")
    a.append({"role": "user", "content": "from a"})
    b.write_text("from-b.md", "b")
    b.append({"role": "user", "content": "from b"})
    threads = [threading.Thread(target=s.save) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    again = MemoryStore.open(key="copy")
    assert {"from-a.md", "from-b.md", "notes/plan.md"} <= set(again.list_paths())
    assert [m["content"] for m in again.messages[-2:]] in (["from a", "from b"], ["from b", "from a"])
    assert local_backend.objects("copy")["from-a.md"] == b"a"
    assert MemoryStore.open(key=key).list_paths() == sorted(set(MemoryStore.open(key=key).list_paths()))
    assert "from-a.md" not in MemoryStore.open(key=key).list_paths()  # the source is untouched


def test_upstream_memory_store_opens_the_imported_store(local_backend, key, tmp_path):
    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")
    theirs = UpstreamStore.get_or_create(key="copy")
    assert sorted(theirs.list_paths()) == sorted(MemoryStore.open(key="copy").list_paths())
    assert theirs.read_text("notes/plan.md") == "step 2"
    assert [m["content"] for m in theirs.messages] == ["hello", "hi"]
    versions = [n for n in local_backend.objects("copy") if n.startswith("versions/notes%2Fplan.md/")]
    assert len(versions) == 2  # upstream reads snapshots from there (it has no listing call)


def test_import_is_exclusive_and_refuses_a_taken_or_deleted_key(local_backend, key, tmp_path):
    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    before = local_backend.stored(key)
    with pytest.raises(StoreAlreadyExists):
        MemoryStore.import_store(tmp_path / "a.tar.gz", key=key)
    assert local_backend.stored(key) == before
    MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")
    with pytest.raises(StoreAlreadyExists):
        MemoryStore.create(key="copy")
    MemoryStore.delete_store(key="copy", trusted=True)
    # a deleted key takes a new store (a new generation), here the archive's
    assert (
        MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy").list_paths()
        == MemoryStore.open(key=key).list_paths()
    )
    with pytest.raises(StoreAlreadyExists):
        MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")


def test_concurrent_imports_of_one_key_exactly_one_wins(local_backend, key, tmp_path):
    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    outcomes: list[object] = []

    def run() -> None:
        try:
            outcomes.append(MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy"))
        except Exception as exc:
            outcomes.append(exc)

    # each thread runs in a copy of this context: it holds the raw-data path the key resolves under
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(o, MemoryStore) for o in outcomes) == 1, outcomes
    assert sum(isinstance(o, StoreAlreadyExists) for o in outcomes) == 2
    assert_same_store(local_backend, key, local_backend, "copy")


def test_export_refuses_unsaved_changes_and_a_store_never_saved(local_backend, key, tmp_path):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "unsaved")
    with pytest.raises(UnsavedChanges):
        store.export(tmp_path / "a.tar.gz")
    assert not (tmp_path / "a.tar.gz").exists()
    with pytest.raises(StoreNotFound):
        MemoryStore(key="never", remote_path=local_backend.store_uri("never")).export(tmp_path / "b.tar.gz")


def test_import_of_nothing_or_with_bad_limits_is_a_typed_error(local_backend, tmp_path):
    with pytest.raises(ArchiveNotFound):
        MemoryStore.import_store(tmp_path / "none.tar.gz", key="copy")
    (tmp_path / "x.tar.gz").write_bytes(gzip.compress(b""))
    for bad in ({"max_member_bytes": 0}, {"max_total_bytes": -1}, {"max_total_bytes": "1"}):
        with pytest.raises(InvalidArgument):
            MemoryStore.import_store(tmp_path / "x.tar.gz", key="copy", **bad)  # type: ignore[arg-type]
    assert local_backend.stored("copy") == {}


async def test_export_and_import_have_aio_forms(local_backend, key, tmp_path):
    store = await MemoryStore.create.aio(key=key)
    store.write_text("a.md", "a")
    await store.save.aio()
    result = await store.export.aio(tmp_path / "a.tar.gz")
    assert result.members > 0
    copy = await MemoryStore.import_store.aio(str(tmp_path / "a.tar.gz"), key="copy")
    assert await copy.read_text.aio("a.md") == "a"
    assert io.BytesIO(local_backend.objects("copy")["a.md"]).read() == b"a"


def test_an_import_that_fails_while_storing_removes_what_it_stored(local_backend, key, tmp_path, monkeypatch):
    from flyteplugins_memory import StorageError
    from flyteplugins_memory._journal.journal_storage import JournalStorage

    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    original, calls = JournalStorage.write_many, []

    async def failing(self, objects):
        calls.append(len(objects))
        if len(calls) == 3:
            raise StorageError("injected")
        await original(self, objects)

    monkeypatch.setattr(JournalStorage, "write_many", failing)
    with pytest.raises(StorageError, match="injected"):
        MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")
    assert local_backend.stored("copy") == {}
    monkeypatch.setattr(JournalStorage, "write_many", original)
    MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")  # the key is free again
    assert_same_store(local_backend, key, local_backend, "copy")


def test_the_previous_release_reads_and_saves_an_imported_store(local_backend, key, tmp_path):
    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")
    previous = released_source(ISSUE_9_RELEASE, tmp_path / "previous")
    config = {"key": "copy", "raw": local_backend.raw_data_path, "endpoint": None}
    wrote = run_released(previous, "write", config | {"writes": {"by-previous.md": "old"}})
    assert "notes/plan.md" in wrote["files"] and "by-previous.md" in wrote["files"]
    again = MemoryStore.open(key="copy")
    assert again.read_text("by-previous.md") == "old" and again.read_bytes("images/chart.png") == PNG
    assert [p.content for p in again.proposals()] == ["likes green tea"]


def test_a_store_at_a_bucket_root_moves_its_journal_on_the_first_save_after_import(s3_backend, key, tmp_path):
    """A store whose journal is inside its prefix (a bucket root has no outside) is exported as it is; the
    imported store reads that journal and moves it out on its first save, as any store of that layout."""
    bucket = f"s3://{s3_backend.raw_data_path.split('/')[2]}"
    root = MemoryStore(key="root", remote_path=bucket)
    root.write_text("a.md", "at the root")
    root.append({"role": "user", "content": "hi"})
    root.save(reason="root store")
    result = root.export(tmp_path / "root.tar.gz")
    assert result.counts.get("journal", 0) == 0 and result.counts["old_journal"] > 0
    copy = MemoryStore.import_store(tmp_path / "root.tar.gz", key="copy")
    assert copy.read_text("a.md") == "at the root" and copy.messages == [{"role": "user", "content": "hi"}]
    assert any(n.startswith(f"{JOURNAL}/log/") for n in s3_backend.journal("copy"))  # moved out by the import commit
    assert [c.reason for c in MemoryStore.open(key="copy").log()][-1] == "root store"


# -- progress ---------------------------------------------------------------------------------------------------


class Recorder:
    """A `ProgressCallback` that keeps every call, and fails on the first call of phase `fail_in` if asked."""

    def __init__(self, fail_in: str | None = None):
        self.calls: list[tuple[str, int, int]] = []
        self.fail_in = fail_in

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.calls.append((phase, done, total))
        if phase == self.fail_in:
            raise RuntimeError("the user pressed stop")

    def phase(self, name: str) -> list[tuple[int, int]]:
        return [(done, total) for phase, done, total in self.calls if phase == name]


def test_progress_counts_every_byte_of_export_and_import(durable_backend, key, tmp_path):
    populated(key)
    archive = str(tmp_path / "a.tar.gz")
    exporting = Recorder()
    result = MemoryStore.open(key=key).export(archive, progress=exporting)
    export = exporting.phase("export")
    assert export[0] == (0, export[0][1]) and export[-1] == (result.data_bytes, result.data_bytes)
    assert [done for done, _ in export] == sorted(done for done, _ in export)
    importing = Recorder()
    copy = MemoryStore.import_store(archive, key=f"{key}-copy", progress=importing)
    check, store = importing.phase("check"), importing.phase("store")
    assert [phase for phase, _, _ in importing.calls] == ["check"] * len(check) + ["store"] * len(store)
    archive_size = (tmp_path / "a.tar.gz").stat().st_size
    assert check[-1] == (archive_size, archive_size)
    assert store[0] == (0, result.data_bytes) and store[-1] == (result.data_bytes, result.data_bytes)
    assert copy.list_paths() == MemoryStore.open(key=key).list_paths()


def test_a_failing_progress_callback_aborts_cleanly(local_backend, raw_data_context, key, tmp_path):
    """The callback's exception aborts: no archive is left at dest, and an import stores nothing."""
    raw_data_context(local_backend.raw_data_path)
    populated(key)
    with pytest.raises(RuntimeError, match="pressed stop"):
        MemoryStore.open(key=key).export(tmp_path / "half.tar.gz", progress=Recorder(fail_in="export"))
    assert not (tmp_path / "half.tar.gz").exists()
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    for phase in ("check", "store"):  # while checking the archive, and once storing began
        with pytest.raises(RuntimeError, match="pressed stop"):
            MemoryStore.import_store(tmp_path / "a.tar.gz", key=f"{key}-copy", progress=Recorder(fail_in=phase))
        assert local_backend.upstream_view(f"{key}-copy") == {} and local_backend.journal(f"{key}-copy") == {}
    MemoryStore.import_store(tmp_path / "a.tar.gz", key=f"{key}-copy")  # the key is free again


def test_import_store_by_root_or_remote_path(local_backend, key, tmp_path):
    store = MemoryStore("src", remote_path=local_backend.store_uri(key))
    store.write_text("a.md", "alpha")
    store.save()
    store.export(tmp_path / "a.tar.gz")
    at = local_backend.store_uri(f"{key}-at")
    assert MemoryStore.import_store(tmp_path / "a.tar.gz", remote_path=at).read_text("a.md") == "alpha"
    assert MemoryStore.open(remote_path=at).read_text("a.md") == "alpha"
    rooted = MemoryStore.import_store(
        tmp_path / "a.tar.gz", key="rooted", org="o", project="p", domain="d", root=str(tmp_path / "elsewhere")
    )
    assert rooted.remote_path == f"{tmp_path}/elsewhere/agents/memory-store/v0/o/p/d/rooted"
    assert (tmp_path / "elsewhere/agents/memory-store/v0/o/p/d/rooted/a.md").read_text() == "alpha"
    with pytest.raises(InvalidArgument, match="exactly one"):
        MemoryStore.import_store(tmp_path / "a.tar.gz")
    with pytest.raises(InvalidArgument, match="exactly one"):
        MemoryStore.import_store(tmp_path / "a.tar.gz", key="k", remote_path=at)


# -- one committed state, whatever saves run meanwhile -------------------------------------------------------


@pytest.mark.parametrize("when", ["before_listing", "after_listing"])
def test_an_export_archives_the_state_it_started_from_while_a_save_rewrites_the_store(
    durable_backend, key, tmp_path, monkeypatch, when
):
    """A save by another handle lands after the export pinned its state: before it lists the objects
    (the listing then holds the save's commit record, its new file and sidecars), or after it (the
    reads then see the rewritten file, the deleted one gone, the new transcript). Either way the
    archive is the pinned state: ours and upstream's `MemoryStore` read the same old content in the
    imported store, the later commit and its new file are not there, sidecars name what is there."""
    from flyteplugins_memory._api.archive import export as _export

    store = MemoryStore.create(key=key)
    store.write_text("a.md", "old content")
    store.write_text("b.md", "bee")
    store.append({"role": "user", "content": "before"})
    store.save()
    pinned_seq = store.log(limit=1)[0].seq
    other = MemoryStore.open(key=key)
    other.list_paths("")
    original = _export._names

    def rewrite() -> None:
        other.write_text("a.md", "NEW content")
        other.delete("b.md")
        other.write_text("c.md", "a later file")
        other.append({"role": "user", "content": "after"})
        other.save()

    async def racing(remote):
        if when == "before_listing":
            await asyncio.to_thread(rewrite)
            return await original(remote)
        names = await original(remote)
        await asyncio.to_thread(rewrite)
        return names

    monkeypatch.setattr(_export, "_names", racing)
    store.export(tmp_path / "backup.tar.gz")
    monkeypatch.setattr(_export, "_names", original)

    with tarfile.open(tmp_path / "backup.tar.gz", "r:gz") as tar:
        names = tar.getnames()
        head = json.loads(tar.extractfile("journal/head.json").read())  # type: ignore[union-attr]
    assert f"journal/log/{pinned_seq + 1:020d}.json" not in names and "store/c.md" not in names
    assert head["seq"] == pinned_seq
    copy = MemoryStore.import_store(str(tmp_path / "backup.tar.gz"), key=key + "-copy")
    fresh = MemoryStore.open(key=copy.key)
    assert fresh.list_paths() == ["a.md", "b.md"]
    assert (fresh.read_text("a.md"), fresh.read_text("b.md")) == ("old content", "bee")
    assert [m["content"] for m in fresh.messages] == ["before"]
    objects = durable_backend.objects(copy.key)
    assert objects["a.md"] == b"old content" and objects["b.md"] == b"bee" and "c.md" not in objects
    sidecar = json.loads(objects["meta/a.md.json"])
    assert sidecar["sha256"] == hashlib.sha256(b"old content").hexdigest()
    assert "meta/c.md.json" not in objects
    assert [m["content"] for m in json.loads(objects["messages.json"])] == ["before"]
    theirs = UpstreamStore.get_or_create(key=copy.key)
    assert sorted(theirs.list_paths()) == ["a.md", "b.md"] and theirs.read_text("a.md") == "old content"
    assert [c.seq for c in fresh.log()][1:] == list(range(pinned_seq, 0, -1))  # the import's commit first
    assert MemoryStore.open(key=key).read_text("a.md") == "NEW content"  # the source is untouched


def test_an_export_of_an_unchanged_store_archives_every_object_as_stored(local_backend, key, tmp_path):
    """Pinning changes nothing when nothing runs meanwhile: sidecars and transcript go byte for byte, and the
    head hint names the newest commit (the stored one may be a small save behind: `_journal.commit.write_head`)."""
    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    with tarfile.open(tmp_path / "a.tar.gz", "r:gz") as tar:
        data = {n: tar.extractfile(n).read() for n in tar.getnames() if n != "manifest.json"}  # type: ignore[union-attr]
    stored = json.loads(local_backend.journal(key)[f"{JOURNAL}/head.json"])
    newest = MemoryStore.open(key=key).log(limit=1)[0].seq
    assert json.loads(data["journal/head.json"])["seq"] == newest and stored["seq"] in (newest - 1, newest)
    assert {n[len("store/") :]: d for n, d in data.items() if n.startswith("store/")} == local_backend.objects(key)


@pytest.mark.parametrize("step", ["before_commit", "after_commit"])
def test_an_import_failing_after_its_copy_removes_the_store_and_frees_the_key(
    durable_backend, key, tmp_path, monkeypatch, step
):
    """Opening the copied store and committing the import are part of the import: a failure there (the
    import's own commit already landed, for `after_commit`) removes every object stored, the claim last.
    (A journal that does not open: test_export_hostile.py.)"""
    from flyteplugins_memory import StorageError
    from flyteplugins_memory._api.archive import import_archive as _import_archive

    populated(key)
    MemoryStore.open(key=key).export(tmp_path / "a.tar.gz")
    original = _import_archive._record

    async def failing(store, *args):
        if step == "after_commit":
            await original(store, *args)
        raise StorageError("injected")

    monkeypatch.setattr(_import_archive, "_record", failing)
    with pytest.raises(StorageError, match="injected"):
        MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")
    assert durable_backend.stored("copy") == {}
    assert not MemoryStore.exists(key="copy")
    monkeypatch.setattr(_import_archive, "_record", original)
    MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")  # the key is free again
    assert_same_store(durable_backend, key, durable_backend, "copy")


@pytest.mark.parametrize("where", ["prefix", "journal", "prefix_by_symlink"])
def test_an_export_into_the_stores_own_storage_is_refused_and_writes_nothing(local_backend, key, tmp_path, where):
    """Under the prefix (upstream would list the archive as a file), in the journal outside it, or into the
    prefix through a symlinked directory: `InvalidArgument`, and the store's objects are as they were."""
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "a")
    store.save()
    before = local_backend.stored(key)
    if where == "prefix_by_symlink":
        (tmp_path / "link").symlink_to(local_backend.prefix(key), target_is_directory=True)
        dest = str(tmp_path / "link" / "backup.tar.gz")
    else:
        dest = (local_backend.prefix if where == "prefix" else local_backend.journal_prefix)(key) + "/x/b.tar.gz"
    with pytest.raises(InvalidArgument, match="its own storage"):
        store.export(dest)
    assert local_backend.stored(key) == before
    sibling = local_backend.prefix(key) + "-backup.tar.gz"  # beside the prefix, sharing its name's start
    assert store.export(sibling).members > 0


@pytest.mark.parametrize("where", ["prefix", "journal"])
def test_an_export_into_the_stores_own_storage_on_s3_is_refused(s3_backend, key, where):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "a")
    store.save()
    before = s3_backend.stored(key)
    inside = (s3_backend.prefix if where == "prefix" else s3_backend.journal_prefix)(key)
    with pytest.raises(InvalidArgument, match="its own storage"):
        store.export(f"s3://{inside}/backup.tar.gz")
    assert s3_backend.stored(key) == before
    assert not s3_backend.fs.exists(f"{inside}/backup.tar.gz")
    assert store.export(f"s3://{s3_backend.prefix(key)}-backup.tar.gz").members > 0


# -- the archive file: what dest held, and backend failures ------------------------------------------------------


def test_a_failed_export_leaves_what_dest_held(local_backend, key, tmp_path):
    """Yesterday's backup stays until today's is complete, and for good if today's fails."""
    store = MemoryStore("src", remote_path=local_backend.store_uri(key))
    store.write_text("a.md", "alpha")
    store.save()
    dest = tmp_path / "backup.tar.gz"
    store.export(dest)
    yesterday = dest.read_bytes()
    store.write_text("b.md", "beta")
    store.save()
    with pytest.raises(RuntimeError, match="pressed stop"):
        store.export(dest, progress=Recorder(fail_in="export"))
    assert dest.read_bytes() == yesterday and list(tmp_path.glob("backup.tar.gz?*")) == []  # no partial left
    with pytest.raises(ArchiveExists):
        store.export(dest, overwrite=False)
    assert dest.read_bytes() == yesterday
    store.export(dest)  # overwrite=True (the default) replaces it, once complete
    copy = MemoryStore.import_store(dest, remote_path=local_backend.store_uri(f"{key}-copy"))
    assert copy.read_text("b.md") == "beta"


def test_a_failed_export_to_s3_leaves_the_object_that_was_there(s3_backend, key):
    store = MemoryStore("src", remote_path=s3_backend.store_uri(key))
    store.write_text("a.md", "alpha")
    store.save()
    bucket = s3_backend.raw_data_path.split("/")[2]
    dest = f"s3://{bucket}/backups/{key}.tar.gz"
    store.export(dest)
    yesterday = s3_backend.fs.cat(dest)
    with pytest.raises(RuntimeError, match="pressed stop"):
        store.export(dest, progress=Recorder(fail_in="export"))
    assert s3_backend.fs.cat(dest) == yesterday


def test_a_backend_failure_of_the_archive_is_a_storage_error(local_backend, key, tmp_path, monkeypatch):
    """botocore's NoCredentialsError and its like are not OSErrors: they arrive as `StorageError`."""
    import fsspec.implementations.local as local

    store = MemoryStore("src", remote_path=local_backend.store_uri(key))
    store.write_text("a.md", "alpha")
    store.save()
    store.export(tmp_path / "a.tar.gz")

    class NoCredentials(Exception):
        pass

    def refuse(*args, **kwargs):
        raise NoCredentials("Unable to locate credentials")

    monkeypatch.setattr(local.LocalFileSystem, "open", refuse)
    with pytest.raises(StorageError, match="Unable to locate credentials"):
        store.export(tmp_path / "b.tar.gz")
    with pytest.raises(StorageError, match="Unable to locate credentials"):
        MemoryStore.import_store(tmp_path / "a.tar.gz", remote_path=local_backend.store_uri(f"{key}-copy"))


def test_import_store_refuses_a_remote_path_that_names_no_store_before_storing(local_backend, tmp_path, monkeypatch):
    store = MemoryStore("src", remote_path=str(tmp_path / "raw" / "src"))
    store.write_text("a.md", "alpha")
    store.save()
    store.export(tmp_path / "a.tar.gz")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for bad in ("", "/", "x/.", "x/.."):
        progress = Recorder()
        with pytest.raises(InvalidKey):
            MemoryStore.import_store(tmp_path / "a.tar.gz", remote_path=bad, progress=progress)
        assert progress.calls == [] and list(cwd.rglob("*")) == []


def test_a_failed_export_to_fsspecs_memory_filesystem_leaves_what_was_there(local_backend, key):
    """A filesystem that publishes on close with no way to abort (memory://) gets the archive beside
    `dest`, moved over it once complete."""
    import fsspec

    store = MemoryStore("src", remote_path=local_backend.store_uri(key))
    store.write_text("a.md", "alpha")
    store.save()
    dest = f"memory://exports-{key}/a.tar.gz"
    store.export(dest)
    memory = fsspec.filesystem("memory")
    yesterday = memory.cat(dest)
    with pytest.raises(RuntimeError, match="pressed stop"):
        store.export(dest, progress=Recorder(fail_in="export"))
    assert memory.cat(dest) == yesterday and memory.ls(f"/exports-{key}", detail=False) == [f"/exports-{key}/a.tar.gz"]


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
