"""`store.scope(prefix)`: every method family confined to the prefix, escapes refused with nothing
written, nested scopes, and a scope's writes landing at the full path in storage (local disk and S3)."""

from __future__ import annotations

import os

import pytest

from flyteplugins_memory import (
    InvalidArgument,
    InvalidPath,
    MemoryStore,
    PathEscapesRoot,
    ProposalNotFound,
    ReadOnlyPath,
    ReservedPath,
    ScopedStore,
    VersionNotFound,
)


def populated(key: str) -> MemoryStore:
    """alice's and bob's files, and one outside every scope, saved."""
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("users/alice/notes.md", "alice 1", metadata={"kind": "note"})
    store.write_text("users/bob/notes.md", "bob's secret")
    store.write_text("users/alice2/x.md", "a neighbour, not alice")
    store.write_text("top.md", "top")
    store.save()
    return store


def test_a_scope_confines_every_method_family(durable_backend, key):
    store = populated(key)
    alice = store.scope("users/alice")
    # reads and lists: relative paths in, relative paths out, nothing of bob's or the neighbour's
    assert alice.read_text("notes.md") == "alice 1" and alice.read_bytes("notes.md") == b"alice 1"
    assert alice.list_paths() == ["notes.md"] and alice.list_paths(where={"kind": "note"}) == ["notes.md"]
    assert alice.exists("notes.md") and not alice.exists("x.md")  # users/alice2/x.md is not alice's
    meta = alice.get_meta("notes.md")
    assert meta is not None and meta.path == "notes.md" and meta.metadata == {"kind": "note"}
    assert alice.current_sha("notes.md") == store.current_sha("users/alice/notes.md")
    # writes, metadata, bytes, deletes
    assert alice.write_text("notes.md", "alice 2", actor="alice").path == "notes.md"
    alice.write_json("prefs.json", {"tone": "brief"})
    alice.write_bytes("img/a.bin", b"\x00\xff")
    assert alice.set_metadata("prefs.json", {"v": 1}).path == "prefs.json"
    alice.write_text("tmp/t.md", "t")
    assert alice.delete_prefix("tmp") == ["tmp/t.md"]
    alice.write_text("gone.md", "g")
    assert alice.delete("gone.md") is True
    alice.records("events").append({"e": 1})
    alice.session("s1").append({"role": "user", "content": "hi"})
    alice.save(actor="alice", reason="scoped")
    # history, versions and audit: only alice's, relative
    newest = alice.log(limit=1)[0]
    assert newest.actor == "alice" and {"notes.md", "prefs.json", "img/a.bin"} <= set(newest.wrote)
    assert not any(p.startswith("users/") for c in alice.log(limit=50) for p in c.wrote + c.deleted)
    assert [c.seq for c in alice.log(path="notes.md")] == [c.seq for c in store.log(path="users/alice/notes.md")]
    events = alice.audit_tail(0)
    assert events and all(not e["path"].startswith("users/") and e["path"] for e in events)
    assert {e["path"] for e in events} >= {"notes.md", "prefs.json", "gone.md", "tmp/t.md"}
    assert alice.audit_tail(2) == events[-2:]
    versions = alice.list_versions("notes.md")
    assert len(versions) == 2 and alice.read_version(versions[0]) == "alice 1"
    assert alice.read_version_bytes(versions[-1]) == b"alice 2"
    with pytest.raises(VersionNotFound):  # bob's version, named exactly
        alice.read_version(store.list_versions("users/bob/notes.md")[0])
    # a fresh handle sees the scope's writes at their full paths; bob's file is untouched
    fresh = MemoryStore.open(key=key)
    assert fresh.read_text("users/alice/notes.md") == "alice 2" and fresh.read_json("users/alice/prefs.json")
    assert fresh.read_text("users/bob/notes.md") == "bob's secret"
    assert fresh.records("users/alice/events").read() == [{"e": 1}]
    assert fresh.session("s1").messages == [] and fresh.scope("users/alice").session("s1").count() == 1
    view = durable_backend.upstream_view(key)
    assert view["users/alice/notes.md"] == b"alice 2" and view["users/alice/img/a.bin"] == b"\x00\xff"
    assert "users/alice/gone.md" not in view and "users/alice/tmp/t.md" not in view


def test_nested_scopes_and_the_transcript(durable_backend, key):
    store = populated(key)
    inner = store.scope("users").scope("alice")
    assert isinstance(inner, ScopedStore) and inner.prefix == "users/alice"
    inner.scope("deep").write_text("x.md", "deep")
    assert store.scope("users").list_paths("alice") == ["alice/deep/x.md", "alice/notes.md"]
    assert not hasattr(inner, "append") and not hasattr(inner, "messages")  # use scope.session(name)
    assert inner.has_unsaved_changes()
    inner.save()
    assert MemoryStore.open(key=key).read_text("users/alice/deep/x.md") == "deep"
    assert durable_backend.upstream_view(key)["users/alice/deep/x.md"] == b"deep"


ESCAPES = [
    ("../bob/notes.md", PathEscapesRoot),
    ("a/../../bob/notes.md", PathEscapesRoot),
    ("/users/bob/notes.md", PathEscapesRoot),
    ("..\\bob\\notes.md", PathEscapesRoot),
    ("a\\b", PathEscapesRoot),
    ("%2e%2e/bob/notes.md", PathEscapesRoot),
    ("%2E%2E%2Fbob", PathEscapesRoot),
    ("..%2fbob", PathEscapesRoot),
    ("%252e%252e/bob", PathEscapesRoot),
    ("%c0%ae%c0%ae/bob", PathEscapesRoot),
    ("a%5cb", PathEscapesRoot),
    ("\uff0e\uff0e/bob/notes.md", PathEscapesRoot),  # fullwidth dots
    ("\u2024\u2024/bob/notes.md", PathEscapesRoot),  # one dot leader
    ("a\uff0fb", PathEscapesRoot),  # fullwidth solidus
    ("cafe\u0301.md", PathEscapesRoot),  # NFD: not the NFKC form a normalizing layer would see
    ("\ufb01le.md", PathEscapesRoot),  # ligature fi
    ("a\x00b", InvalidPath),
    ("a\nb", InvalidPath),
    ("a\u202eb", InvalidPath),  # bidi override
    ("a\u200db", InvalidPath),  # zero-width joiner
    ("a\u2028b", InvalidPath),  # line separator
    ("", InvalidPath),
    (".", InvalidPath),
    (None, InvalidPath),
]


def test_escapes_are_refused_and_nothing_is_written(local_backend, key):
    store = populated(key)
    before = local_backend.objects(key)
    alice = store.scope("users/alice")
    for path, error in ESCAPES:
        for call in (
            lambda p=path: alice.write_text(p, "pwned"),
            lambda p=path: alice.write_bytes(p, b"pwned"),
            lambda p=path: alice.read_text(p),
            lambda p=path: alice.delete(p),
            lambda p=path: alice.list_versions(p),
            lambda p=path: alice.records(p),
            lambda p=path: store.scope(p),
        ):
            with pytest.raises(error):
                call()
    assert not store.has_unsaved_changes()
    store.save()
    assert local_backend.objects(key) == before
    assert MemoryStore.open(key=key).read_text("users/bob/notes.md") == "bob's secret"


def test_escapes_on_s3_leave_storage_untouched(s3_backend, key):
    store = populated(key)
    before = s3_backend.objects(key)
    alice = store.scope("users/alice")
    for path, error in ESCAPES:
        with pytest.raises(error):
            alice.write_text(path, "pwned")
    alice.save()
    assert s3_backend.objects(key) == before


def test_prefixes_and_directories_follow_the_rules(local_backend, key):
    store = populated(key)
    for prefix, error in [
        ("", InvalidPath),
        ("meta", ReservedPath),
        ("messages.json", ReservedPath),
        ("../x", PathEscapesRoot),
    ]:
        with pytest.raises(error):
            store.scope(prefix)
    alice = store.scope("users/alice")
    for directory in ("..", "../bob", "/"):
        with pytest.raises(PathEscapesRoot):
            alice.list_paths(directory)
        with pytest.raises(PathEscapesRoot):
            alice.delete_prefix(directory)
    with pytest.raises(InvalidArgument):
        alice.log(limit=-1)
    assert alice.delete_prefix("") == ["notes.md"]  # the whole scope, not the store
    assert store.list_paths() == ["top.md", "users/alice2/x.md", "users/bob/notes.md"]


def test_read_only_prefixes_apply_inside_a_scope(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("users/alice/policy/p.md", "p")
    store.read_only_prefixes = ("users/alice/policy/",)  # upstream's per-handle setting
    with pytest.raises(ReadOnlyPath):
        store.scope("users/alice").write_text("policy/p.md", "x")
    with pytest.raises(ReadOnlyPath):
        store.scope("users/alice/policy").delete_prefix("")
    assert store.scope("users/alice").read_text("policy/p.md") == "p"


def test_symlinks_out_of_the_scope_are_refused(local_backend, key, tmp_path):
    store = populated(key)
    store.prefetch()
    outside = tmp_path / "outside"
    outside.mkdir()
    root = store.root
    os.symlink(outside, root / "users" / "alice" / "out")
    os.symlink(root / "users" / "bob", root / "users" / "alice" / "bob")
    alice = store.scope("users/alice")
    for path in ("out/x.md", "bob/notes.md", "bob"):
        with pytest.raises(PathEscapesRoot):
            alice.write_text(path, "pwned")
        with pytest.raises(PathEscapesRoot):
            alice.read_text(path)
    with pytest.raises(PathEscapesRoot):
        alice.records("bob/log")
    assert list(outside.iterdir()) == [] and (root / "users" / "bob" / "notes.md").read_text() == "bob's secret"
    assert not store.has_unsaved_changes()


async def test_a_scope_has_async_twins(local_backend, key):
    store = await MemoryStore.get_or_create.aio(key=key)
    alice = store.scope("users/alice")
    await alice.write_text.aio("a.md", "a")
    await alice.save.aio()
    assert await alice.list_paths.aio() == ["a.md"] and await alice.read_text.aio("a.md") == "a"
    assert [e["path"] for e in await alice.audit_tail.aio(5)] == ["a.md"]
    assert len(await alice.log.aio(5)) == 1


def test_a_scope_searches_only_its_own_files(durable_backend, key):
    store = MemoryStore.create(key=key)
    alice, bob = store.scope("users/alice"), store.scope("users/bob")
    alice.write_text("notes/seat.md", "alice prefers a window seat on long flights", metadata={"kind": "pref"})
    bob.write_text("notes/seat.md", "bob prefers an aisle seat on long flights", metadata={"kind": "pref"})
    store.write_text("shared/seat.md", "window seats are on the left of the plane")
    store.save()
    fresh = MemoryStore.open(key=key).scope("users/alice")
    hits = fresh.search("window seat", where={"kind": "pref"})
    assert [h.path for h in hits] == ["notes/seat.md"]
    assert hits[0].meta is not None and hits[0].meta.path == "notes/seat.md"
    assert "window" in hits[0].snippet
    assert [h.path for h in fresh.search("aisle")] == []  # bob's file is outside the scope
    with pytest.raises(PathEscapesRoot):
        fresh.search("seat", prefix="../bob")


def test_a_scopes_log_does_not_show_the_reasons_and_actors_of_other_scopes_writes(local_backend, key):
    store = MemoryStore.get_or_create(key=key)  # one handle serving two users, saved once
    store.scope("users/alice").write_text("note.md", "hi", actor="alice-agent", reason="alice likes tea")
    store.scope("users/bob").write_text("dx.md", "flu", actor="bob-agent", reason="bob's diagnosis: flu")
    store.save()
    store.scope("users/alice").write_text("own.md", "x", actor="alice-agent", reason="alice's own save")
    store.save()
    shared, own = MemoryStore.open(key=key).scope("users/alice").log()[::-1]
    assert shared.wrote == ("note.md",) and "bob" not in shared.reason and "bob" not in shared.actor
    assert (own.actor, own.reason) == ("alice-agent", "alice's own save")  # a commit wholly in the scope


@pytest.mark.parametrize(
    "path",
    ["%f0%80%80%ae%f0%80%80%ae/x", "a/%F0%80%80%AF", "%u002e%u002e/x", "a%u2215b", "%U002F"],
)
def test_a_scope_refuses_four_byte_overlong_and_u_escaped_dots_and_separators(local_backend, key, path):
    from flyteplugins_memory import PathEscapesRoot

    store = MemoryStore.get_or_create(key=key)
    alice = store.scope("users/alice")
    with pytest.raises(PathEscapesRoot):
        alice.write_text(path, "x")
    assert store.list_paths() == [] and not store.has_unsaved_changes()
    alice.write_text("100%u.md", "fine")  # a % followed by anything else stays an ordinary character


@pytest.mark.parametrize("name", [5, None, b"versions/x", "../x", "", "users/alice/notes.md"])
def test_a_scope_refuses_a_malformed_version_name_as_the_store_does(local_backend, key, name):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    alice = store.scope("users/alice")
    with pytest.raises(InvalidPath):
        store.read_version(name)
    for read in (alice.read_version, alice.read_version_bytes):
        with pytest.raises(InvalidPath):  # was VersionNotFound: "no such version" for what is no name at all
            read(name)


def test_a_scopes_purge_result_names_the_path_as_the_scope_does(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    alice = store.scope("users/alice")
    alice.write_text("secret.md", "redact me")
    store.save()
    result = alice.purge("secret.md")
    assert result.path == "secret.md" and result.commit is not None  # was "users/alice/secret.md"
    assert "users/alice/secret.md" not in durable_backend.upstream_view(key)
    assert MemoryStore.open(key=key).list_paths() == []


def test_a_scopes_log_does_not_show_the_reason_of_a_settings_change_saved_with_its_writes(local_backend, key):
    admin = MemoryStore.get_or_create(key=key, trusted=True)
    admin.scope("users/alice").write_text("note.md", "hi")
    admin.set_read_only_prefixes(["users/bob/"], actor="admin", reason="lock bob's medical records")
    (commit,) = MemoryStore.open(key=key).scope("users/alice").log()
    assert commit.wrote == ("note.md",) and "bob" not in commit.reason


def test_a_scopes_session_validates_messages_when_the_store_does(local_backend, key):
    from flyteplugins_memory import InvalidMessage

    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    for owner in [store, store.scope("users/alice")]:
        with pytest.raises(InvalidMessage):
            owner.session("s1").append({"role": "wizard", "content": "not a chat message"})
    store.save()
    assert MemoryStore.open(key=key).list_paths() == []


def test_a_scope_stages_lists_and_decides_its_own_proposals_only(tmp_path):
    uri = str(tmp_path / "store")
    store = MemoryStore("team", remote_path=uri)
    alice, bob = store.scope("users/alice"), store.scope("users/bob")
    mine = alice.propose("notes/tea.md", "likes green tea", actor="agent", reason="said so")
    theirs = bob.propose("notes/tea.md", "likes coffee", actor="agent", reason="said so")
    store.save()
    assert mine.path == "notes/tea.md" and [p.id for p in alice.proposals("draft")] == [mine.id]
    assert alice.proposal(mine.id).path == "notes/tea.md"
    with pytest.raises(ProposalNotFound):
        alice.accept(theirs.id)
    with pytest.raises(PathEscapesRoot):
        alice.propose("../bob/x.md", "x")
    assert alice.accept(mine.id).path == "notes/tea.md"
    fresh = MemoryStore.open(remote_path=uri)
    assert (tmp_path / "store" / "users/alice/notes/tea.md").read_text() == "likes green tea"
    assert [h.path for h in fresh.scope("users/alice").search("tea")] == ["notes/tea.md"]
    assert {p.path: p.status for p in fresh.proposals()} == {
        "users/alice/notes/tea.md": "accepted",
        "users/bob/notes/tea.md": "draft",
    }
