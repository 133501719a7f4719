"""The transcript saved is what ``store.messages`` holds at save time, encoded exactly as upstream encodes it.

Edits in place are saved (and audited), appends made before a handle's first load are kept after the
committed transcript, a caller's list is never changed by a load, and a message upstream accepts
(``datetime``, custom objects, ``NaN``) is stored byte for byte as upstream stores it.
"""

from __future__ import annotations

import datetime
import json
import math
import uuid

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import (
    ConcurrencyError,
    InvalidMessage,
    MemoryStore,
)
from flyteplugins_memory._rules.transcript import committed_form, encode_message, fingerprints, merged


class Ticket:
    def __str__(self) -> str:
        return "Ticket#42"


def _odd_message() -> dict:
    return {
        "role": "user",
        "at": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "ticket": Ticket(),
        "score": math.nan,
        "limit": math.inf,
        "ids": (1, 2),
        7: "int key",
        "nested": {"when": datetime.date(2026, 1, 2)},
    }


def _stored_transcript(backend, key) -> bytes:
    return backend.upstream_view(key)["messages.json"]


def test_an_edit_in_place_is_saved_and_audited(backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.extend([{"role": "user", "content": "my card is 4111"}, {"role": "assistant", "content": "ok"}])
    store.save()
    assert not store.has_unsaved_changes()
    store.messages[0]["content"] = "my card is [redacted]"
    assert store.has_unsaved_changes()
    store.save()
    assert b"4111" not in _stored_transcript(backend, key)
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.messages[0]["content"] == "my card is [redacted]"
    rewrite = [e for e in reopened.audit_tail(0) if e["op"] == "rewrite"]
    assert len(rewrite) == 1 and rewrite[0]["path"] == "messages.json"
    assert not any(b"4111" in data for name, data in backend.objects(key).items() if name == "messages.json")


def test_an_edit_of_a_message_another_handle_appended_after_conflicts(backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.append({"content": "1"})
    store.save()
    other = MemoryStore.get_or_create(key=key)
    other.append({"content": "2"})
    other.save()
    store.messages[0]["content"] = "one"
    with pytest.raises(ConcurrencyError) as info:
        store.save()
    assert info.value.paths == ("messages.json",)
    assert store.messages == [{"content": "one"}]  # the loser's state is intact
    assert json.loads(_stored_transcript(backend, key)) == [{"content": "1"}, {"content": "2"}]


def test_committed_state_never_shares_objects_with_the_handle(backend, key):
    store = MemoryStore.get_or_create(key=key)
    message = {"content": "a", "meta": {"k": 1}}
    store.append(message)
    store.save()
    message["meta"]["k"] = 2  # an edit after the save, through the caller's own reference
    assert store.has_unsaved_changes()
    store.save()
    assert json.loads(_stored_transcript(backend, key))[0]["meta"] == {"k": 2}
    reopened = MemoryStore.get_or_create(key=key)
    reopened.messages[0]["meta"]["k"] = 3
    assert MemoryStore.get_or_create(key=key).messages[0]["meta"] == {"k": 2}


def test_appends_before_the_first_load_follow_the_committed_transcript(backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.extend([{"content": "old 1"}, {"content": "old 2"}])
    seed.save()
    callers_list: list[dict] = []
    direct = MemoryStore(key=key, messages=callers_list, remote_path=seed.remote_path)
    direct.append({"content": "new"})
    assert direct.list_paths() == []  # first I/O loads the committed state
    assert [m["content"] for m in direct.messages] == ["old 1", "old 2", "new"]
    assert callers_list == []  # the store works on its own copy: nothing it does changes the caller's list
    direct.save()
    assert [m["content"] for m in json.loads(_stored_transcript(backend, key))] == ["old 1", "old 2", "new"]


def test_upstream_style_messages_are_stored_as_upstream_stores_them(durable_backend, key, tmp_path):
    backend = durable_backend
    store = MemoryStore.get_or_create(key=key)
    store.append(_odd_message())
    store.save()
    theirs = UpstreamStore(key="x", root=tmp_path / "upstream")
    theirs.append(_odd_message())
    theirs.flush_messages_sync()
    assert _stored_transcript(backend, key) == (tmp_path / "upstream" / "messages.json").read_bytes()
    ours_reloaded = MemoryStore.get_or_create(key=key).messages
    theirs_reloaded = UpstreamStore.get_or_create(key=key).messages  # upstream reads what we wrote
    assert json.dumps(ours_reloaded) == json.dumps(theirs_reloaded)
    assert ours_reloaded[0]["at"] == "2026-01-02 03:04:05+00:00" and ours_reloaded[0]["ticket"] == "Ticket#42"
    assert math.isnan(ours_reloaded[0]["score"]) and ours_reloaded[0]["limit"] == math.inf
    assert ours_reloaded[0]["7"] == "int key" and ours_reloaded[0]["ids"] == [1, 2]
    assert not MemoryStore.get_or_create(key=key).has_unsaved_changes()  # NaN != NaN is not a change


def test_a_store_upstream_wrote_with_nan_opens_and_stays_unchanged(durable_backend, key):
    theirs = UpstreamStore.get_or_create(key=key)
    theirs.append({"content": "x", "score": math.nan})
    theirs.save()
    ours = MemoryStore.get_or_create(key=key)
    assert math.isnan(ours.messages[0]["score"])
    ours.append({"content": "y"})
    ours.save()
    assert b"NaN" in _stored_transcript(durable_backend, key)
    again = MemoryStore.get_or_create(key=key)
    assert math.isnan(again.messages[0]["score"]) and not again.has_unsaved_changes()


@pytest.mark.parametrize(
    "bad",
    [
        {"content": {(1, 2): "tuple key"}},
        "not a dict",
        {"content": "lone surrogate \ud800"},
    ],
    ids=["tuple-key", "not-a-dict", "surrogate"],
)
def test_a_message_that_cannot_be_encoded_is_refused_before_anything_is_committed(backend, key, bad):
    store = MemoryStore.get_or_create(key=key)
    store.append({"content": "fine"})
    store.save()
    before = backend.objects(key)
    with pytest.raises(InvalidMessage):
        store.append(bad)
    with pytest.raises(InvalidMessage):
        store.extend([{"content": "also fine"}, bad])
    assert [m["content"] for m in store.messages] == ["fine"]  # extend is all or nothing
    store.messages.append(bad)  # behind the API's back: refused at save, before any I/O
    with pytest.raises(InvalidMessage):
        store.save()
    assert backend.objects(key) == before


def test_circular_messages_are_refused():
    looped: dict = {"content": "x"}
    looped["self"] = looped
    with pytest.raises(InvalidMessage):
        encode_message(looped)


def test_pure_merge_rules():
    a, b, c = (encode_message({"n": n}) for n in (1, 2, 3))
    assert merged([a], [a], [a]) == ("keep", 0)
    assert merged([a], [a, b], [a, c]) == ("append", 1)
    assert merged([a, b], [a, b], [c]) == ("rewrite", 0)
    assert merged([a], [a, b], [c]) is None
    assert fingerprints([{"x": math.nan}]) == fingerprints(committed_form([{"x": math.nan}]))


def test_flush_messages_writes_upstreams_bytes_atomically(tmp_path):
    store = MemoryStore(key=f"k-{uuid.uuid4().hex[:6]}", root=tmp_path)
    store.append(_odd_message())
    store.flush_messages()
    theirs = UpstreamStore(key="x", root=tmp_path / "theirs")
    theirs.append(_odd_message())
    theirs.flush_messages_sync()
    assert (tmp_path / "messages.json").read_bytes() == (tmp_path / "theirs" / "messages.json").read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".~fpm-")]


def test_a_committed_transcript_knows_its_fingerprints_and_refuses_changes_in_place():
    messages = [_odd_message(), {"role": "user", "content": "caf\u00e9 \U0001f600", "x": -0.0, "big": 10**30}]
    committed = committed_form(messages)
    # the encoding kept while committing is what encoding the committed form gives
    assert committed.fingerprints() == [encode_message(m) for m in list(committed)]
    assert fingerprints(committed) == fingerprints(messages)
    for change in (
        lambda: committed.append({}),
        lambda: committed.extend([{}]),
        lambda: committed.__setitem__(0, {}),
        lambda: committed.__delitem__(0),
        committed.pop,
        committed.clear,
        lambda: committed.sort(key=str),
    ):
        with pytest.raises(TypeError):
            change()
    assert len(committed) == 2 and type(committed[:1]) is list  # slices are plain lists


def test_a_save_encodes_a_long_transcript_a_few_times_not_once_per_comparison(local_backend, key, monkeypatch):
    import flyteplugins_memory._rules.transcript as transcript

    store = MemoryStore.get_or_create(key=key)
    store.extend([{"role": "user", "content": f"m{i}"} for i in range(1000)])
    store.save()
    calls = []
    original = transcript.encode_message
    monkeypatch.setattr(transcript, "encode_message", lambda m: calls.append(1) or original(m))
    store.append({"role": "assistant", "content": "one more"})
    store.save()
    # the handle's own list is encoded to see that it changed, to commit it, and to see whether it was
    # edited while the save ran; committed states reuse what was encoded when they were made
    assert len(calls) <= 3 * 1001 + 10  # it was 14 times the transcript before committed ones kept theirs
    assert MemoryStore.open(key=key).messages[-1] == {"role": "assistant", "content": "one more"}


def test_a_received_store_its_sender_never_loaded_keeps_the_committed_transcript(backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.extend([{"content": f"h{i}"} for i in range(3)])
    seed.save()
    sender = MemoryStore(key=key, remote_path=seed.remote_path)  # untouched: it never loaded
    received = MemoryStore._deserialize(sender._serialize())
    received.append({"content": "new"})
    received.save()
    stored = json.loads(backend.upstream_view(key)["messages.json"])
    assert [m["content"] for m in stored] == ["h0", "h1", "h2", "new"]


def test_pre_load_appends_are_never_deduplicated_and_a_stale_flushed_root_never_duplicates(tmp_path, local_backend):
    key = f"k-{uuid.uuid4().hex[:6]}"
    seed = MemoryStore.get_or_create(key=key)
    seed.append({"content": "continue"})
    seed.save()
    handle = MemoryStore(key=key, remote_path=seed.remote_path)
    handle.append({"content": "continue"})  # the same text again, on purpose
    handle.save()
    assert [m["content"] for m in MemoryStore.get_or_create(key=key).messages] == ["continue", "continue"]
    root = tmp_path / "work"
    first = MemoryStore(key=key, root=root, remote_path=seed.remote_path)
    first.append({"content": "m1"})
    first.flush_messages()  # root/messages.json: the transcript so far
    first.save()
    first.append({"content": "m2"})
    first.save()
    MemoryStore(key=key, root=root, remote_path=seed.remote_path).save()  # a restart on the stale root
    contents = [m["content"] for m in MemoryStore.get_or_create(key=key).messages]
    assert contents == ["continue", "continue", "m1", "m2"]


def test_a_callers_messages_list_is_never_changed(local_backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.append({"content": "old"})
    seed.save()
    mine = [{"content": "new"}]
    handle = MemoryStore(key=key, messages=mine)
    handle.save()
    assert mine == [{"content": "new"}]
    assert [m["content"] for m in MemoryStore.get_or_create(key=key).messages] == ["old", "new"]
