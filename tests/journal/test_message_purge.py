"""Issue 23, defect 13: a message-level purge. `purge_message(index)` and `records(name).purge(index)` redact
one message or record and remove every stored copy of its old text now: commit records, checkpoints, the
archives of `compact_transcript`, search segments, upstream's messages.json, and export archives made
afterwards. Every check scans every object under the storage root (store prefix and journal)."""

from __future__ import annotations

import pytest

from flyteplugins_memory import (
    InvalidArgument,
    InvalidMessage,
    MemoryStore,
    MessageNotFound,
    PurgeResult,
    RecordNotFound,
)
from test_purge_meets import export_to, holding

PASTED = "AKIA-PASTED-INTO-CHAT-7f3e"
RECORDED = "card-4111-1111-1111-1111"


def _chat(store: MemoryStore) -> None:
    store.append({"role": "user", "content": "hello"})
    store.append({"role": "user", "content": f"my key is {PASTED}"})
    store.save()
    store.append({"role": "assistant", "content": "noted"})
    store.save()
    store.compact()  # the secret sits in a checkpoint too
    store.append({"role": "user", "content": "bye"})
    store.save()


def test_purge_message_removes_every_stored_copy_now(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    _chat(store)
    assert holding(durable_backend, PASTED)

    result = store.purge_message(1, actor="security", reason="pasted a key")

    assert isinstance(result, PurgeResult) and result.path == "messages.json" and result.commit is not None
    assert holding(durable_backend, PASTED) == []
    assert store.messages[1] == {"role": "user", "content": "[redacted]"}
    reopened = MemoryStore.get_or_create(key=key)
    assert [m["content"] for m in reopened.messages] == ["hello", "[redacted]", "noted", "bye"]
    event = reopened.audit_tail(1)[0]
    assert (event["op"], event["path"], event["message"], event["actor"], event["reason"]) == (
        "purge",
        "messages.json",
        1,
        "security",
        "pasted a key",
    )
    assert reopened.log(limit=1)[0].kind == "purge"
    for commit in reopened.log(limit=20):
        assert all(PASTED not in str(m) for m in reopened.at(commit.seq).messages)
    assert PASTED not in reopened.report()
    export_to(durable_backend, store, "after")
    assert holding(durable_backend, PASTED) == []


def test_a_stale_handle_does_not_write_the_purged_message_back(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    _chat(store)
    stale = MemoryStore.get_or_create(key=key)
    assert any(PASTED in m["content"] for m in stale.messages)  # held in memory: fine
    store.purge_message(1)
    stale.append({"role": "user", "content": "from the stale handle"})
    stale.save()
    stale.compact()
    assert holding(durable_backend, PASTED) == []
    assert [m["content"] for m in MemoryStore.get_or_create(key=key).messages][-1] == "from the stale handle"


def test_purge_message_with_a_replacement_and_negative_index(local_backend, key):
    store = MemoryStore.get_or_create(key=key, audit=False)
    store.append({"role": "user", "content": "a"})
    store.append({"role": "tool", "tool_call_id": "c1", "content": PASTED})
    store.save()
    store.purge_message(-1, replacement={"role": "tool", "tool_call_id": "c1", "content": "gone"})
    assert MemoryStore.get_or_create(key=key).messages[-1]["content"] == "gone"
    assert MemoryStore.get_or_create(key=key).audit_tail(1)[0]["op"] == "purge"  # audited without audit=True
    assert holding(local_backend, PASTED) == []


def test_purge_message_refuses_bad_indexes_before_anything(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.append({"role": "user", "content": "a"})
    store.save()
    for bad in (1, -2, 99):
        with pytest.raises(MessageNotFound) as caught:
            store.purge_message(bad)
        assert isinstance(caught.value, IndexError)
    for bad in ("0", 1.0, True, None):
        with pytest.raises(InvalidArgument):
            store.purge_message(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.purge_message(0, replacement=3)  # type: ignore[arg-type]
    assert store.log(limit=1)[0].kind != "purge"


async def test_purge_message_and_record_purge_have_async_twins(local_backend, key):
    store = await MemoryStore.get_or_create.aio(key=key)
    store.append({"role": "user", "content": PASTED})
    store.records("events").append({"card": RECORDED})
    await store.save.aio()
    await store.purge_message.aio(0)
    await store.records("events").purge.aio(0)
    assert holding(local_backend, PASTED, RECORDED) == []


# -- record logs ----------------------------------------------------------------------------------------


def test_record_purge_removes_every_stored_copy_and_keeps_indexes(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    log = store.records("users/alice/events")
    log.extend([{"n": 0}, {"card": RECORDED}, {"n": 2}])
    store.save()
    log.append({"n": 3})
    store.save()
    store.write_text("notes.md", "a file after the log")
    store.save()
    assert store.search(RECORDED)  # the search index holds the segment's words (and a snippet)
    assert holding(durable_backend, RECORDED)

    result = log.purge(1, actor="dpo", reason="erasure")

    assert result.commit is not None and result.shas
    assert holding(durable_backend, RECORDED) == []
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.records("users/alice/events").read() == [{"n": 0}, "[redacted]", {"n": 2}, {"n": 3}]
    event = reopened.audit_tail(1)[0]
    assert (event["op"], event["record"], event["actor"]) == ("purge", 1, "dpo")
    assert event["path"].startswith("users/alice/events/")
    assert reopened.search(RECORDED) == [] and len(reopened.search("redacted")) == 1
    export_to(durable_backend, reopened, "after")
    assert holding(durable_backend, RECORDED) == []


def test_record_purge_refuses_bad_indexes(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.records("events").append({"n": 0})
    store.save()
    for bad in (1, -2):
        with pytest.raises(RecordNotFound):
            store.records("events").purge(bad)
    with pytest.raises(RecordNotFound):
        store.records("empty").purge(0)
    with pytest.raises(InvalidArgument):
        store.records("events").purge("0")  # type: ignore[arg-type]


def test_a_compacted_message_is_purged_through_its_archive(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    _chat(store)
    store.compact_transcript(lambda folded: "summary of the start", keep_last=1)
    archive = store.records("archive/transcript")
    index = next(i for i, m in enumerate(archive.read()) if PASTED in str(m))
    assert holding(durable_backend, PASTED)

    archive.purge(index, reason="pasted a key")

    assert holding(durable_backend, PASTED) == []
    assert archive.read()[index] == {"role": "user", "content": "[redacted]"}
    assert MemoryStore.get_or_create(key=key).messages[0]["content"] == "summary of the start"


def test_a_stale_handle_behind_a_later_commit_does_not_write_the_purged_message_back(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    _chat(store)  # the secret is in checkpoint c, which later records keep
    stale = MemoryStore.get_or_create(key=key)
    stale.list_paths()  # loaded: checkpoint c, with the secret, is in its memory
    store.purge_message(1)
    fresh = MemoryStore.get_or_create(key=key)  # reads checkpoint c as rewritten
    fresh.append({"role": "user", "content": "a later turn"})
    fresh.save()  # its record keeps c's messages
    stale.append({"role": "user", "content": "from the stale handle"})
    stale.save()
    stale.compact()
    assert holding(durable_backend, PASTED) == []
    assert all(PASTED not in str(m) for m in MemoryStore.get_or_create(key=key).messages)


def test_a_redacted_tool_call_and_tool_result_stay_valid_messages(local_backend, key):
    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    call = {"id": "c1", "type": "function", "function": {"name": "login", "arguments": f'{{"pw": "{PASTED}"}}'}}
    store.append({"role": "assistant", "content": None, "tool_calls": [call]})
    store.append({"role": "tool", "tool_call_id": "c1", "name": "login", "content": f"ok {PASTED}"})
    store.save()
    store.purge_message(0)
    store.purge_message(1)
    assert MemoryStore.get_or_create(key=key).messages == [
        {"role": "assistant", "content": "[redacted]"},
        {"role": "tool", "tool_call_id": "c1", "name": "login", "content": "[redacted]"},
    ]
    assert holding(local_backend, PASTED) == []


def test_a_save_landing_between_the_first_rewrite_and_the_commit(durable_backend, key, monkeypatch):
    from flyteplugins_memory._api.upkeep import message_purge as _message_purge

    store = MemoryStore.get_or_create(key=key)
    _chat(store)
    real = _message_purge._rewrite
    landed = []

    async def rewrite_then_another_save(session, redaction):
        await real(session, redaction)
        if not landed:  # another handle opens the half-purged store and commits before the purge does
            other = await MemoryStore.get_or_create.aio(key=key)
            other.append({"role": "user", "content": "meanwhile"})
            await other.save.aio()
            landed.append(other)

    monkeypatch.setattr(_message_purge, "_rewrite", rewrite_then_another_save)
    store.purge_message(1)
    assert landed and holding(durable_backend, PASTED) == []
    reopened = MemoryStore.get_or_create(key=key)
    assert [m["content"] for m in reopened.messages] == ["hello", "[redacted]", "noted", "bye", "meanwhile"]
    assert reopened.audit_tail(1)[0]["op"] == "purge"


def test_a_session_message_is_purged_through_the_session(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    chat = store.session("support")
    chat.extend([{"role": "user", "content": "hi"}, {"role": "user", "content": f"key {PASTED}"}])
    store.save()
    result = chat.purge_message(1, reason="pasted a key")
    assert result.path.startswith("sessions/support/") and holding(durable_backend, PASTED) == []
    assert MemoryStore.get_or_create(key=key).session("support").messages == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "[redacted]"},
    ]
    with pytest.raises(RecordNotFound):
        chat.purge_message(2)


def test_a_bad_index_or_note_saves_nothing(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.append({"role": "user", "content": "a"})
    store.save()
    store.records("events").append({"n": 1})  # unsaved
    before = store.log(limit=1)[0].seq
    with pytest.raises(InvalidArgument):
        store.purge_message("0")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.records("events").purge(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        store.purge_message(0, actor=3)  # type: ignore[arg-type]
    assert store.log(limit=1)[0].seq == before and store.has_unsaved_changes()


def test_purge_message_of_a_message_never_saved(local_backend, key):
    store = MemoryStore(key)
    store.append({"role": "user", "content": PASTED})
    store.purge_message(0)
    assert holding(local_backend, PASTED) == []
    assert MemoryStore.get_or_create(key=key).messages == [{"role": "user", "content": "[redacted]"}]
