"""Where a message purge meets the transcript's compaction archives and sessions (issue 23, defect 13;
the lead's notes of the last session). A message purge names one message, and every stored copy of that
message goes: the transcript's equal messages, and the records `compact_transcript` moved into its archive
logs (their segments rewritten in the purge's commit, the old segment contents removed). A session is a
conversation of its own: purging one of its messages redacts that record only, never the transcript's
messages that happen to be equal, and a transcript purge leaves sessions alone (docs/decisions.md). Every
check scans every object under the storage root, on local disk and moto S3."""

from __future__ import annotations

from flyteplugins_memory import MemoryStore
from helpers import holding

SECRET = "my key is AKIA-COPIED-9d21"
PASTED = {"role": "user", "content": SECRET}


def _compacted_and_pasted_again(key: str, archive: str = "archive/transcript") -> MemoryStore:
    """A store whose transcript held SECRET, folded into `archive` by a compaction, then pasted again."""
    store = MemoryStore.get_or_create(key=key)
    store.messages += [dict(PASTED), {"role": "assistant", "content": "noted"}]
    store.messages += [{"role": "user", "content": "again"}, {"role": "assistant", "content": "ok"}]
    store.save()
    store.compact_transcript(lambda folded: "summary", keep_last=2, archive=archive)
    store.append(dict(PASTED))
    store.save()
    return store


def test_purge_message_redacts_the_copies_in_the_compaction_archive(durable_backend, key):
    store = _compacted_and_pasted_again(key)
    assert [m["content"] for m in store.records("archive/transcript").read()] == [SECRET, "noted"]

    store.purge_message(-1, actor="sec", reason="pasted a key")

    assert holding(durable_backend, "AKIA-COPIED-9d21") == []
    fresh = MemoryStore.open(key=key)
    assert [m["content"] for m in fresh.messages] == ["summary", "again", "ok", "[redacted]"]
    assert fresh.records("archive/transcript").read() == [
        {"role": "user", "content": "[redacted]"},
        {"role": "assistant", "content": "noted"},
    ]
    purges = [e for e in fresh.audit_tail(10) if e["op"] == "purge"]
    assert sorted(e["path"].split("/")[0] for e in purges) == ["archive", "messages.json"]
    assert all(e["actor"] == "sec" and e["reason"] == "pasted a key" for e in purges)
    store.append({"role": "user", "content": "next"})
    store.save()  # the purging handle writes nothing old back
    assert holding(durable_backend, "AKIA-COPIED-9d21") == []


def test_purge_message_reaches_an_archive_log_of_any_name(local_backend, key):
    store = _compacted_and_pasted_again(key, archive="history/old")
    store.purge_message(-1)
    assert holding(local_backend, "AKIA-COPIED-9d21") == []
    assert MemoryStore.open(key=key).records("history/old").read()[0] == {"role": "user", "content": "[redacted]"}


def test_a_purge_of_an_archived_message_redacts_every_copy(durable_backend, key):
    store = _compacted_and_pasted_again(key)
    store.compact_transcript(lambda folded: "summary 2", keep_last=0)  # the second paste is archived too
    archive = store.records("archive/transcript")
    assert [m["content"] for m in archive.read()].count(SECRET) == 2

    archive.purge(0, reason="pasted a key")

    assert holding(durable_backend, "AKIA-COPIED-9d21") == []
    contents = [m["content"] for m in MemoryStore.open(key=key).records("archive/transcript").read()]
    assert contents.count("[redacted]") == 2 and SECRET not in contents


def test_a_session_is_its_own_conversation_for_a_purge(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.messages += [{"role": "user", "content": "yes"}, dict(PASTED)]
    chat = store.session("support")
    chat.extend([{"role": "user", "content": "yes"}, dict(PASTED)])
    store.save()

    chat.purge_message(0)  # "yes" in the session: the transcript's own "yes" is another message
    store.purge_message(1)  # the transcript's paste: the session's is the session's to purge

    fresh = MemoryStore.open(key=key)
    assert [m["content"] for m in fresh.messages] == ["yes", "[redacted]"]
    assert [m["content"] for m in fresh.session("support").messages] == ["[redacted]", SECRET]
    assert holding(durable_backend, "AKIA-COPIED-9d21")  # the session's own paste, still a message of it
    chat.purge_message(1)
    assert holding(durable_backend, "AKIA-COPIED-9d21") == []
    assert [m["content"] for m in MemoryStore.open(key=key).messages] == ["yes", "[redacted]"]


def test_the_purging_handle_never_brings_back_a_message_its_checkpoint_held(durable_backend, key, monkeypatch):
    """Found by the model (`make test-slow`): the purging handle held the checkpoint it had loaded, with the
    old message; a refresh onto a later commit of that checkpoint reused it (same checkpoint, same purge
    count), so the handle read the old text again, and its next commit stored it again."""
    from flyteplugins_memory._journal import commit as _commit

    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 4)  # checkpoint 4 holds it; 5 and 6 are records
    writer = MemoryStore.get_or_create(key=key)
    writer.append(dict(PASTED))
    writer.save()
    for name in ("a.md", "z.md"):
        writer.write_text(name, name)
        writer.save()
    purger = MemoryStore.open(key=key)  # loads the checkpoint holding SECRET
    purger.purge_message(0, reason="pasted a key")
    assert holding(durable_backend, "AKIA-COPIED-9d21") == []
    other = MemoryStore.open(key=key)
    other.write_text("b.md", "b")
    other.save()  # a commit on the same checkpoint, after the purge
    purger.refresh()
    assert [m["content"] for m in purger.messages] == ["[redacted]"]
    purger.set_retention(keep_last=3)  # a commit of the purging handle
    purger.write_text("c.md", "c")
    purger.save()
    assert holding(durable_backend, "AKIA-COPIED-9d21") == []
    assert [m["content"] for m in MemoryStore.open(key=key).messages] == ["[redacted]"]
