"""A message purge reaches what handles hold, not only what storage holds: the purging handle's own
transcript (a purge of an archived message that redacts an equal transcript message), and upstream's
``messages.json`` when the purge commit itself changes no transcript (found by the hostile review of
issue 23)."""

from __future__ import annotations

import json

from flyteplugins_memory import MemoryStore
from helpers import holding

SECRET = "pasted-api-key-SECRET-41c7"


def test_an_archive_purge_of_a_message_also_in_the_transcript_is_not_undone_by_the_next_save(durable_backend, key):
    """(A session's purge redacted the transcript's equal message here until sessions became conversations
    of their own for a purge: tests/journal/test_message_purge_copies.py.) An archived message pasted again."""
    store = MemoryStore.get_or_create(key=key)
    message = {"role": "user", "content": f"my key {SECRET}"}
    store.append(dict(message))
    store.append({"role": "assistant", "content": "noted"})
    store.save()
    store.compact_transcript(lambda folded: "summary", keep_last=1)
    store.messages[:] = [dict(message)]  # the summary and the reply go: the paste is all the transcript holds
    store.save()
    store.records("archive/transcript").purge(0, actor="sec", reason="pasted a key")
    assert holding(durable_backend, SECRET) == []
    assert SECRET not in json.dumps(store.messages)
    store.append({"role": "user", "content": "next"})
    store.save()
    assert holding(durable_backend, SECRET) == []
    fresh = MemoryStore.open(key=key)
    assert [m["content"] for m in fresh.messages] == ["[redacted]", "next"]
    assert not store.has_unsaved_changes()


def test_a_message_purge_after_another_handles_save_rewrites_upstreams_transcript(durable_backend, key):
    first = MemoryStore.get_or_create(key=key)
    first.append({"role": "user", "content": f"my key {SECRET}"})
    first.append({"role": "user", "content": "ok"})
    first.save()
    other = MemoryStore.open(key=key)
    other.write_text("notes.md", "unrelated")
    other.save()
    first.purge_message(0, actor="sec", reason="pasted a key")
    assert holding(durable_backend, SECRET) == []
    upstream = json.loads(durable_backend.objects(key)["messages.json"])
    assert [m["content"] for m in upstream] == ["[redacted]", "ok"]
