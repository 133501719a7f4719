"""`delete_store` where it meets other features, on local disk and moto S3, checked in storage itself:

- a stale handle's refused save leaves nothing behind (no object, and on local disk no directory), so
  `list_keys` never lists the deleted key again;
- a deleted key takes a new store (a new generation) through `create`, `get_or_create` and `import_store`,
  with nothing of the deleted store readable through it (a byte scan of every object under the storage
  root), while handles of the deleted generation (opened, received as task inputs, or with a stale base)
  still get `StoreDeleted` and never commit into the new one; concurrent creators make exactly one store.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flyteplugins_memory import MemoryStore, StoreAlreadyExists, StoreDeleted
from flyteplugins_memory._api.payload import payload, received_store
from flyteplugins_memory._journal.retention import STALE_BASE_AFTER
from flyteplugins_memory._rules.location import storage_root

OLD = "old-generation-secret-4f2a"
LATE = "stale-handle-late-write-91c3"


def everything(backend) -> dict[str, bytes]:
    """Every object under the storage root (every store, every journal, every generation), read through
    the backend's own filesystem."""
    root = backend.fs._strip_protocol(storage_root(backend.raw_data_path)).rstrip("/")
    found = backend.fs.find(root)
    return {name: backend.fs.cat_file(name) for name in found}


def holding(backend, text: str) -> list[str]:
    return sorted(name for name, data in everything(backend).items() if text.encode() in data)


def filled(key: str) -> MemoryStore:
    """A store using every feature that keeps user content: files with labels and versions, the transcript,
    a record log, a session, a proposal, search (indexed at save), audit and history."""
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("notes/a.md", f"{OLD} first", metadata={"label": OLD})
    store.append({"role": "user", "content": f"{OLD} message"})
    store.records("logs/events").append({"secret": OLD})
    store.session("support").append({"role": "user", "content": f"{OLD} in a session"})
    store.propose("notes/p.md", f"{OLD} proposed")
    store.save()
    store.write_text("notes/a.md", f"{OLD} second")
    store.save()
    assert store.search("generation") and store.list_paths()  # indexed: the search has segments to forget
    return store


def shows_nothing_old(store: MemoryStore) -> None:
    """Every read path of `store` (a handle of the new generation) shows nothing of the deleted store."""
    assert store.list_paths() == [] and store.messages == []
    assert not store.exists("notes/a.md") and store.get_meta("notes/a.md") is None
    assert store.read_text("notes/a.md") == ""
    assert store.history("notes/a.md") == [] and store.list_versions("notes/a.md") == []
    assert store.search("old") == [] and store.search(OLD) == []
    assert store.proposals() == []
    assert store.records("logs/events").read() == [] and store.session("support").messages == []
    assert [c.kind for c in store.log(50)] == ["create"]
    assert not any(OLD in str(event) for event in store.audit_tail(0))


# -- defect 6: a stale handle's refused save ------------------------------------------------------------------


def test_a_stale_handles_refused_save_leaves_nothing_behind(durable_backend, key):
    stale = filled(key)
    other = MemoryStore.get_or_create(key=f"{key}-other")
    other.write_text("x.txt", "x")
    other.save()
    assert MemoryStore.delete_store(key=key, actor="ops", reason="asked")
    before = everything(durable_backend)
    stale.write_text("brand/new/dir/late.md", LATE)  # new directories, placed in the prefix in place
    stale.write_text("notes/a.md", LATE)  # a blob in the journal
    with pytest.raises(StoreDeleted, match="deleted by 'ops'"):
        stale.save()
    assert stale.has_unsaved_changes()  # nothing lost silently
    assert everything(durable_backend) == before  # not one object more
    assert durable_backend.objects(key) == {} and holding(durable_backend, LATE) == []
    if durable_backend.name == "local":  # nor a directory, which list_keys would list as a store
        assert not durable_backend.fs.exists(durable_backend.prefix(key))
    assert MemoryStore.list_keys() == [f"{key}-other"] and not MemoryStore.exists(key=key)
    assert holding(durable_backend, OLD) == []  # the deletion left nothing of the store's content either


def test_a_stale_handle_with_an_old_base_reads_the_deletion_in_the_head(durable_backend, key):
    stale = filled(key)
    assert MemoryStore.delete_store(key=key)
    stale._checkout.working_copy.base.observed_at -= STALE_BASE_AFTER + 1  # a base last known newest long ago
    stale.write_text("late.md", LATE)
    with pytest.raises(StoreDeleted):
        stale.save()
    assert durable_backend.objects(key) == {} and holding(durable_backend, LATE) == []
    assert key not in MemoryStore.list_keys()


# -- defect 9: a deleted key takes a new store --------------------------------------------------------------


def test_create_after_delete_store_starts_a_new_store_with_nothing_of_the_old(durable_backend, key):
    filled(key)
    assert MemoryStore.delete_store(key=key, actor="ops", reason="user asked to be forgotten")
    with pytest.raises(StoreDeleted, match="user asked to be forgotten"):  # open never creates
        MemoryStore.open(key=key)
    assert not MemoryStore.exists(key=key) and key not in MemoryStore.list_keys()
    fresh = MemoryStore.create(key=key)
    shows_nothing_old(fresh)
    shows_nothing_old(MemoryStore.open(key=key))
    fresh.write_text("notes/a.md", "new content")
    fresh.append({"role": "user", "content": "hello again"})
    fresh.save()
    assert MemoryStore.exists(key=key) and key in MemoryStore.list_keys()
    reopened = MemoryStore.open(key=key)
    assert reopened.list_paths() == ["notes/a.md"] and reopened.read_text("notes/a.md") == "new content"
    assert len(reopened.history("notes/a.md")) == 1 and [c.kind for c in reopened.log(50)] == ["save", "create"]
    # storage: nothing of the old generation's content anywhere under the root, old journal only the record
    assert holding(durable_backend, OLD) == []
    assert set(durable_backend.upstream_view(key)) >= {"notes/a.md", "messages.json"}
    # the first store's journal: its deletion record, and the claim of the store the key took since
    assert all(b'"deleted":true' in d or b'"successor":true' in d for d in durable_backend.journal(key).values())
    with pytest.raises(StoreAlreadyExists):
        MemoryStore.create(key=key)


def test_get_or_create_takes_a_new_store_for_each_deletion(durable_backend, key):
    filled(key)
    for generation in (1, 2, 3):
        assert MemoryStore.delete_store(key=key)
        assert MemoryStore.delete_store(key=key) is False  # already deleted
        store = MemoryStore.get_or_create(key=key)
        shows_nothing_old(store)
        store.write_text("n.txt", f"generation {generation}")
        store.save()
        assert MemoryStore.open(key=key).read_text("n.txt") == f"generation {generation}"
    assert holding(durable_backend, OLD) == [] and holding(durable_backend, "generation 1") == []
    assert MemoryStore.list_keys() == [key]


def test_upstream_reading_the_prefix_sees_only_the_new_store(local_backend, key):
    from flyte.ai.agents import MemoryStore as UpstreamStore

    filled(key)
    assert MemoryStore.delete_store(key=key)
    fresh = MemoryStore.create(key=key)
    fresh.write_text("b.md", "new")
    fresh.append({"role": "user", "content": "new"})
    fresh.save()
    upstream = UpstreamStore.get_or_create(key=key)
    assert upstream.list_paths() == ["b.md"] and upstream.read_text("b.md") == "new"
    assert upstream.messages == [{"role": "user", "content": "new"}]
    assert not any(OLD.encode() in data for data in local_backend.objects(key).values())


def test_a_handle_of_the_deleted_generation_never_commits_into_the_new_store(durable_backend, key):
    stale = filled(key)
    sent = payload(stale)  # a task input sent before the deletion, received after it
    assert MemoryStore.delete_store(key=key)
    fresh = MemoryStore.get_or_create(key=key)
    fresh.write_text("new.md", "new")
    fresh.save()
    stale.write_text("late.md", LATE)
    stale.append({"role": "user", "content": LATE})
    with pytest.raises(StoreDeleted):
        stale.save()
    with pytest.raises(StoreDeleted):
        stale.refresh()
    received = received_store(MemoryStore, sent)
    with pytest.raises(StoreDeleted):  # pinned to its own generation: never the new store's data
        received.list_paths()
    with pytest.raises(StoreDeleted):
        received.write_text("late2.md", LATE)
    now = MemoryStore.open(key=key)
    assert now.list_paths() == ["new.md"] and now.messages == [] and len(now.log(50)) == 2
    assert holding(durable_backend, LATE) == [] and holding(durable_backend, OLD) == []


def test_a_store_sent_as_a_task_input_opens_its_own_generation(durable_backend, key):
    filled(key)
    assert MemoryStore.delete_store(key=key)
    first = MemoryStore.get_or_create(key=key)
    first.write_text("g1.md", "generation one")
    first.save()
    received = received_store(MemoryStore, payload(first))
    assert received.read_text("g1.md") == "generation one" and received.list_paths() == ["g1.md"]
    sent = payload(first)
    assert MemoryStore.delete_store(key=key)
    second = MemoryStore.get_or_create(key=key)
    second.write_text("g2.md", "generation two")
    second.save()
    with pytest.raises(StoreDeleted):
        received_store(MemoryStore, sent).list_paths()
    assert received_store(MemoryStore, payload(second)).list_paths() == ["g2.md"]
    older = {k: v for k, v in payload(second).items() if k != "generation"}  # a sender before generations
    with pytest.raises(StoreDeleted):  # names the key's first store, deleted
        received_store(MemoryStore, older).list_paths()


def test_concurrent_creates_of_a_deleted_key_make_exactly_one_store(durable_backend, key):
    filled(key)
    assert MemoryStore.delete_store(key=key)

    async def race() -> list[Any]:
        creates = [MemoryStore.create.aio(key=key) for _ in range(4)]
        return await asyncio.gather(*creates, return_exceptions=True)

    results = asyncio.run(race())
    made = [r for r in results if isinstance(r, MemoryStore)]
    assert len(made) == 1, results
    assert all(isinstance(r, StoreAlreadyExists) for r in results if not isinstance(r, MemoryStore)), results
    made[0].write_text("winner.md", "w")
    made[0].save()

    async def openers() -> list[MemoryStore]:
        return list(await asyncio.gather(*(MemoryStore.get_or_create.aio(key=key) for _ in range(3))))

    assert all(s.list_paths() == ["winner.md"] for s in asyncio.run(openers()))
    generations = {
        n.split("/.journal/.journal/", 1)[1].split("/", 1)[0]
        for n in everything(durable_backend)
        if "/.journal/.journal/" in n
    }
    assert generations == {"g1"}


def test_concurrent_get_or_create_of_a_deleted_key_share_one_store(durable_backend, key):
    filled(key)
    assert MemoryStore.delete_store(key=key)

    async def race() -> list[MemoryStore]:
        return list(await asyncio.gather(*(MemoryStore.get_or_create.aio(key=key) for _ in range(4))))

    handles = asyncio.run(race())
    for i, handle in enumerate(handles):
        handle.write_text(f"h{i}.md", str(i))
        handle.save()
    assert MemoryStore.open(key=key).list_paths() == [f"h{i}.md" for i in range(4)]
    assert len([c for c in MemoryStore.open(key=key).log(50) if c.kind == "create"]) == 1


def test_a_directly_built_handle_of_a_deleted_key_saves_into_a_new_store(durable_backend, key):
    filled(key)
    assert MemoryStore.delete_store(key=key)
    built = MemoryStore(key=key)  # upstream's way: it names no store until it saves
    built.write_text("m.md", "m")
    built.save()  # the key's next store, as get_or_create would make it
    assert MemoryStore.open(key=key).list_paths() == ["m.md"]
    named = MemoryStore(key, remote_path=durable_backend.store_uri(key))
    assert named.list_paths() == ["m.md"]  # follows the key to its new store
    assert MemoryStore.delete_store(key=key)
    again = MemoryStore(key, remote_path=durable_backend.store_uri(key))
    assert again.list_paths() == [] and again.messages == []  # a deleted key reads as a missing store
    again.write_text("n.md", "n")
    again.save()
    assert MemoryStore.open(key=key).list_paths() == ["n.md"]
    named.write_text("late.md", LATE)
    with pytest.raises(StoreDeleted):  # but a handle of a deleted store never saves into the new one
        named.save()
    assert holding(durable_backend, OLD) == [] and holding(durable_backend, LATE) == []


def test_a_commit_of_the_deleted_generation_is_not_found_in_the_new_one(local_backend, key):
    """`at(commit)` of a `Commit` the deleted store made names no state of the key's new store, though its
    number may: `CommitNotFound`, not the new store's state (found by the hostile review)."""
    from flyteplugins_memory import CommitNotFound

    old = MemoryStore.get_or_create(key=key)
    old.write_text("p.md", "old generation")
    old.save()
    made = old.log()[0]
    MemoryStore.delete_store(key=key, actor="ops", reason="forget")
    new = MemoryStore.create(key=key)
    new.write_text("p.md", "new generation")
    new.save()
    assert new.log()[0].seq >= made.seq
    with pytest.raises(CommitNotFound):
        new.at(made)
    assert new.at(new.log()[0]).read_text("p.md") == "new generation"


def test_a_stale_handles_save_failing_in_its_first_wave_leaves_nothing_behind(durable_backend, key, monkeypatch):
    from flyteplugins_memory import StorageError
    from flyteplugins_memory._journal import commit as _commit

    stale = filled(key)
    assert MemoryStore.delete_store(key=key, actor="ops", reason="asked")
    stale.write_text("brand/new/late.md", LATE)  # placed in the prefix in place
    stale.write_text("notes/a.md", LATE)  # a blob in the journal

    async def segment_upload_fails(*args, **kwargs):
        raise StorageError("the search segment's PUT failed")

    monkeypatch.setattr(_commit, "prepare", segment_upload_fails)  # its siblings in the wave succeed
    with pytest.raises((StorageError, StoreDeleted)):
        stale.save()
    assert holding(durable_backend, LATE) == []
    assert not MemoryStore.exists(key=key) and key not in MemoryStore.list_keys()


def test_a_stale_handles_save_whose_copies_fail_half_way_leaves_nothing_behind(durable_backend, key, storage_faults):
    from flyteplugins_memory import StorageError
    from flyteplugins_memory._rules.codecs import sha256_bytes

    stale = MemoryStore.get_or_create(key=key)
    stale.write_text("c.md", LATE)  # new files: written in place, at their paths
    stale.write_text("d.md", "other bytes")
    stale.save()
    stale.read_text("c.md"), stale.read_text("d.md")  # held: its save copies these itself
    assert MemoryStore.delete_store(key=key, actor="ops", reason="asked")
    stale.write_text("c.md", "new c")
    stale.write_text("d.md", "new d")
    other = sha256_bytes(b"other bytes")
    storage_faults.arm(lambda n, op, path: "permanent" if op == "write" and other in path else None)
    with pytest.raises((StorageError, StoreDeleted)):
        stale.save()  # the copy of c.md's bytes is created, the one of d.md's fails
    storage_faults.clear()
    assert holding(durable_backend, LATE) == []
    # (list_keys would list through the fault injector, which cannot list: storage itself is asked)
    assert not MemoryStore.exists(key=key) and durable_backend.upstream_view(key) == {}
