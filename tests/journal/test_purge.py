"""Item 12 of issue 8, purge(path): every stored copy of a path's past and present content is gone at once
(walked in storage itself: the store prefix and the journal), except bytes another live path holds."""

from __future__ import annotations

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import ContentPurged, MemoryStore, PurgeResult, ReadOnlyPath, ReservedPath
from flyteplugins_memory._rules.codecs import sha256_bytes
from oldversion import old_version

SECRET = "sk-live-4f7a9c2e-THIS-MUST-GO"
ROTATED = "rotated-but-also-sensitive"


def _anywhere(backend, key: str, needle: str) -> list[str]:
    return [n for n, d in backend.stored(key).items() if needle.encode() in d]


def test_purge_removes_every_stored_copy(backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("creds.txt", SECRET, actor="agent", reason="oops")
    store.write_text("other.txt", "harmless")
    store.save()
    pinned = store._serialize()
    store.write_text("creds.txt", ROTATED)
    store.save()
    store.compact()  # the rotated value is in a checkpoint and upstream's audit log is rebuilt too
    assert _anywhere(backend, key, SECRET) and _anywhere(backend, key, ROTATED)

    result = store.purge("creds.txt", actor="security", reason="leaked key")

    assert isinstance(result, PurgeResult) and result.path == "creds.txt"
    assert set(result.shas) == {sha256_bytes(SECRET.encode()), sha256_bytes(ROTATED.encode())}
    assert result.objects >= 4 and result.bytes > 0 and result.commit is not None
    assert _anywhere(backend, key, SECRET) == [] and _anywhere(backend, key, ROTATED) == []
    reopened = MemoryStore.get_or_create(key=key, keep_versions=True)
    assert reopened.list_paths() == ["other.txt"] and reopened.read_text("other.txt") == "harmless"
    assert reopened.list_versions("creds.txt") == []
    last = reopened.audit_tail(1)[0]
    assert (last["op"], last["path"], last["actor"], last["reason"]) == (
        "purge",
        "creds.txt",
        "security",
        "leaked key",
    )
    with pytest.raises(ContentPurged, match=r"creds\.txt"):
        MemoryStore._deserialize(pinned).read_text("creds.txt")
    assert MemoryStore._deserialize(pinned).read_text("other.txt") == "harmless"


def test_bytes_another_live_path_holds_stay_for_it(backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", SECRET)
    store.write_text("b.txt", SECRET)
    store.save()
    result = store.purge("a.txt")
    assert result.shas == () and result.kept_shas == (sha256_bytes(SECRET.encode()),)
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.list_paths() == ["b.txt"] and reopened.read_text("b.txt") == SECRET
    assert not any(n == "store:a.txt" for n in backend.stored(key))


def test_purge_of_a_path_deleted_long_ago_still_removes_its_history(backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("creds.txt", SECRET)
    store.save()
    store.delete("creds.txt")
    store.save()
    assert _anywhere(backend, key, SECRET)
    result = store.purge("creds.txt")
    # every purge commits (its audit event, and a slot stale handles must rebase past)
    assert result.commit is not None and _anywhere(backend, key, SECRET) == []


def test_purge_of_a_file_upstream_wrote(request, key):
    backend = request.getfixturevalue("local_backend")
    upstream = UpstreamStore.get_or_create(key=key, keep_versions=True)
    upstream.write_text("creds.txt", SECRET)
    upstream.write_text("notes.md", "notes")
    upstream.save()
    opened = MemoryStore.get_or_create(key=key)
    ours = MemoryStore.get_or_create(key=key)
    ours.purge("creds.txt", reason="redaction")
    assert _anywhere(backend, key, SECRET) == []
    assert "meta/creds.txt.json" not in backend.objects(key)
    assert UpstreamStore.get_or_create(key=key).list_paths() == ["notes.md"]
    with pytest.raises(ContentPurged):
        opened.read_text("creds.txt")


def test_purge_of_a_store_still_in_the_old_layout(local_backend, key):
    with old_version():
        store = MemoryStore.create(key=key)
        store.write_text("creds.txt", SECRET)
        store.save()
        store.write_text("creds.txt", ROTATED)
        store.save()
    MemoryStore.get_or_create(key=key).purge("creds.txt")
    assert _anywhere(local_backend, key, SECRET) == [] and _anywhere(local_backend, key, ROTATED) == []
    assert MemoryStore.get_or_create(key=key).list_paths() == []


def test_purge_follows_the_write_rules(backend, key):
    store = MemoryStore.get_or_create(key=key, read_only_prefixes=("policy/",))
    with pytest.raises(ReadOnlyPath):
        store.purge("policy/x.md")
    with pytest.raises(ReservedPath):
        store.purge("meta/x.json")


async def test_purge_and_gc_have_async_twins(backend, key):
    store = await MemoryStore.get_or_create.aio(key=key)
    await store.write_text.aio("a.txt", SECRET)
    await store.save.aio()
    assert (await store.purge.aio("a.txt")).shas == (sha256_bytes(SECRET.encode()),)
    assert (await store.gc.aio()).objects == 0
    await store.set_gc_window.aio(None)


def test_purge_leaves_no_copy_in_the_working_root(local_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("card.txt", "SECRET-4111")
    store.save()
    store.write_text("card.txt", "redacted")
    store.save()
    store.purge("card.txt")
    root = store.root
    leftovers = [p for p in root.rglob("*") if p.is_file() and b"SECRET-4111" in p.read_bytes()]
    assert leftovers == [] and not (root / "card.txt").exists()


def test_purge_commit_names_its_actor_and_reason(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("creds.txt", SECRET)
    store.save()
    store.purge("creds.txt", actor="security-bot", reason="leaked key")
    newest = store.log(limit=1)[0]
    assert (newest.actor, newest.reason, newest.deleted) == ("security-bot", "leaked key", ("creds.txt",))
    assert MemoryStore.get_or_create(key=key).log(limit=1)[0].actor == "security-bot"  # as stored
