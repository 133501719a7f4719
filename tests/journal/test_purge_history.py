"""A purge in a path's history: the versions before it keep their own writers (history, log, audit and
time travel agree on who wrote what), and the purge itself shows in the path's history and log, also when
the path was deleted before it was purged (found by the hostile review of issue 23)."""

from __future__ import annotations

from flyteplugins_memory import MemoryStore


def test_versions_before_a_purge_keep_their_writers(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("p.md", "v1", actor="w1", reason="r1", metadata={"label": "x"})
    store.save()
    store.write_text("p.md", "v2", actor="w2", reason="r2")
    store.save()
    store.purge("p.md", actor="sec", reason="gdpr")
    fresh = MemoryStore.open(key=key)
    history = [(h.actor, h.reason, h.deleted) for h in fresh.history("p.md")]
    assert history == [("sec", "gdpr", True), ("w2", "r2", False), ("w1", "r1", False)]
    log = [(c.actor, c.reason) for c in fresh.log(path="p.md")]
    assert log == [("sec", "gdpr"), ("w2", "r2"), ("w1", "r1")]
    audit = [(e["op"], e["actor"], e["reason"]) for e in fresh.audit_tail(3)]
    assert audit == [("create", "w1", "r1"), ("update", "w2", "r2"), ("purge", "sec", "gdpr")]
    first = fresh.log(path="p.md")[-1]
    assert fresh.at(first.seq).get_meta("p.md") is None or fresh.at(first.seq).get_meta("p.md").updated_by == "w1"


def test_a_purge_of_a_deleted_path_shows_in_its_history_and_log(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("d.md", "x", actor="w1", reason="r1")
    store.save()
    store.delete("d.md", actor="deleter", reason="rd")
    store.save()
    result = store.purge("d.md", actor="sec", reason="gdpr")
    fresh = MemoryStore.open(key=key)
    assert next(c.seq for c in fresh.log(path="d.md")) == result.commit
    newest = fresh.history("d.md")[0]
    assert (newest.actor, newest.reason, newest.deleted, newest.commit) == ("sec", "gdpr", True, result.commit)
    assert [h.actor for h in fresh.history("d.md")][1:] == ["deleter", "w1"]
    assert [e["op"] for e in fresh.audit_tail(3)] == ["create", "delete", "purge"]


def test_a_purge_without_a_reason_is_recorded_alike_everywhere(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("p.md", "x")
    store.save()
    store.purge("p.md", actor="sec")
    fresh = MemoryStore.open(key=key)
    reasons = {fresh.log(limit=1)[0].reason, fresh.audit_tail(1)[0]["reason"], fresh.history("p.md")[0].reason}
    assert len(reasons) == 1, reasons


def test_a_purge_of_a_path_the_store_never_held_is_no_version_of_it(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.md", "a")
    store.save()
    store.purge("never.md", actor="sec", reason="just in case")
    fresh = MemoryStore.open(key=key)
    assert fresh.history("never.md") == []
    assert fresh.log(path="never.md") == []
    assert fresh.audit_tail(1)[0]["op"] == "purge"
