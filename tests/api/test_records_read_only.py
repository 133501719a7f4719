"""A save refused after another handle made a prefix read-only (`ReadOnlyPath`): the handle has a way to drop
exactly what was refused and save the rest, for record logs (`RecordLog.discard_unsaved`), sessions
(`Conversation.discard_unsaved`), file and metadata changes (`MemoryStore.revert`) and compaction (drops its
own archive). Checked in storage, on local disk and moto S3: the refused content is in no stored object."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flyteplugins_memory import MemoryStore, ReadOnlyPath

SECRET = "refused-record-7d1e"


def opened(key: str) -> tuple[MemoryStore, MemoryStore]:
    """A saved store, a plain handle on it and a trusted one (which sets read-only prefixes)."""
    first = MemoryStore.get_or_create(key=key)
    first.write_text("a.txt", "kept")
    first.save()
    return first, MemoryStore.open(key=key, trusted=True)


def holding(backend, key: str, text: str) -> list[str]:
    """Every stored object of the store (prefix and journal, read through the backend) holding `text`,
    once gc() with an empty window has removed what the refused save uploaded before its commit point
    (content-addressed blobs and search segments: another save may share them, so a refusal leaves them)."""
    MemoryStore.open(key=key).gc(timedelta(0))
    return sorted(name for name, data in backend.stored(key).items() if text.encode() in data)


def test_a_log_refused_as_read_only_drops_its_staged_segment_and_the_rest_saves(durable_backend, key):
    store, admin = opened(key)
    log = store.records("logs/events")
    log.extend([{"secret": SECRET}, {"n": 2}])
    store.write_text("b.txt", "another change")
    admin.set_read_only_prefixes(["logs"])
    with pytest.raises(ReadOnlyPath):
        store.save()
    with pytest.raises(ReadOnlyPath):  # refused again: nothing dropped behind the caller's back
        store.save()
    assert log.count() == 2
    assert log.discard_unsaved() == 2  # the segment the refused save staged, with its two records
    assert log.count() == 0 and log.read() == []
    store.save()
    assert not store.has_unsaved_changes()
    fresh = MemoryStore.open(key=key)
    assert fresh.list_paths() == ["a.txt", "b.txt"] and fresh.records("logs/events").count() == 0
    assert not [n for n in durable_backend.objects(key) if n.startswith("logs/")]
    assert holding(durable_backend, key, SECRET) == []


def test_discard_unsaved_drops_pending_and_staged_records_but_never_saved_ones(durable_backend, key):
    store, admin = opened(key)
    log = store.records("logs/events")
    log.append({"n": 1})
    store.save()  # committed: discard_unsaved leaves it
    log.append({"n": 2})
    admin.set_read_only_prefixes(["logs"])
    with pytest.raises(ReadOnlyPath):
        store.save()  # staged as a segment
    assert log.discard_unsaved() == 1
    assert log.read() == [{"n": 1}] and not store.has_unsaved_changes()
    assert log.discard_unsaved() == 0
    assert MemoryStore.open(key=key).records("logs/events").read() == [{"n": 1}]


async def test_discard_unsaved_aio(durable_backend, key):
    store, admin = opened(key)
    log = store.records("logs/events")
    log.append({"n": 1})
    await admin.set_read_only_prefixes.aio(["logs"])
    with pytest.raises(ReadOnlyPath):
        await store.save.aio()
    log.append({"n": 2})  # pending again, beside the staged segment
    assert await log.discard_unsaved.aio() == 2
    await store.save.aio()
    assert not store.has_unsaved_changes()


def test_a_session_refused_as_read_only_drops_its_messages_and_the_rest_saves(durable_backend, key):
    store, admin = opened(key)
    chat = store.session("support")
    chat.append({"role": "user", "content": SECRET})
    store.write_text("b.txt", "another change")
    admin.set_read_only_prefixes(["sessions"])
    with pytest.raises(ReadOnlyPath):
        store.save()
    assert chat.count() == 1
    assert chat.discard_unsaved() == 1
    assert chat.messages == []
    store.save()
    assert MemoryStore.open(key=key).list_paths() == ["a.txt", "b.txt"]
    assert holding(durable_backend, key, SECRET) == []


def test_a_metadata_change_refused_as_read_only_is_reverted_and_the_rest_saves(durable_backend, key):
    store, admin = opened(key)
    store.write_text("notes/x.md", "x")
    store.save()
    store.set_metadata("notes/x.md", {"label": SECRET})
    store.write_text("b.txt", "another change")
    admin.set_read_only_prefixes(["notes"])
    with pytest.raises(ReadOnlyPath):
        store.save()
    assert store.revert(["notes/x.md"]) == ["notes/x.md"]
    store.save()
    fresh = MemoryStore.open(key=key)
    assert fresh.list_paths() == ["a.txt", "b.txt", "notes/x.md"] and not (fresh.get_meta("notes/x.md").metadata or {})
    assert holding(durable_backend, key, SECRET) == []


def test_a_compaction_refused_as_read_only_leaves_the_handle_as_it_was(durable_backend, key):
    store, admin = opened(key)
    store.extend([{"role": "user", "content": f"{SECRET} {i}"} for i in range(4)])
    store.save()
    admin.set_read_only_prefixes(["archive"])
    store.write_text("b.txt", "another change")
    with pytest.raises(ReadOnlyPath):  # saves b.txt first, then the fold is refused
        store.compact_transcript(lambda folded: "summary", keep_last=1)
    assert len(store.messages) == 4 and not store.has_unsaved_changes()
    assert not [n for n in durable_backend.objects(key) if n.startswith("archive/")]
    store.append({"role": "user", "content": "later"})
    store.save()
    assert len(MemoryStore.open(key=key).messages) == 5


def test_a_scope_refused_as_read_only_drops_its_own_changes_and_the_rest_saves(durable_backend, key):
    store, admin = opened(key)
    alice = store.scope("users/alice")
    alice.records("log").append({"secret": SECRET})
    alice.session("chat").append({"role": "user", "content": SECRET})
    alice.write_text("notes.md", SECRET)
    store.write_text("b.txt", "another change")
    admin.set_read_only_prefixes(["users/alice"])
    with pytest.raises(ReadOnlyPath):
        store.save()
    assert alice.records("log").discard_unsaved() == 1 and alice.session("chat").discard_unsaved() == 1
    assert alice.revert() == ["notes.md"]  # scope paths, every unsaved file change of the scope
    assert alice.revert(["notes.md"]) == []  # nothing left to drop
    store.save()
    assert MemoryStore.open(key=key).list_paths() == ["a.txt", "b.txt"]
    assert not [n for n in durable_backend.objects(key) if n.startswith("users/")]
    assert holding(durable_backend, key, SECRET) == []


def test_an_accept_refused_as_read_only_keeps_the_handles_changes_and_the_draft(durable_backend, key):
    store, admin = opened(key)
    draft = store.propose("memory/tea.md", "likes green tea")
    store.save()
    admin.set_read_only_prefixes(["memory"])
    store.write_text("b.txt", "another change")
    with pytest.raises(ReadOnlyPath):
        store.accept(draft.id)  # an untrusted handle may not accept into a read-only prefix
    store.save()  # the rest saves
    fresh = MemoryStore.open(key=key)
    assert fresh.list_paths() == ["a.txt", "b.txt"] and fresh.proposal(draft.id).status == "draft"
    assert admin.accept(draft.id).status == "accepted"  # a trusted handle decides it
    assert MemoryStore.open(key=key).read_text("memory/tea.md") == "likes green tea"
