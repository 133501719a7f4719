"""Read-only prefixes persisted with the store: set at create, changed by a trusted, audited call, and
enforced by every handle, including ones never given them and saves racing a change (local disk, S3)."""

from __future__ import annotations

import json

import pytest

from flyteplugins_memory import (
    AccessDenied,
    ConcurrencyError,
    InvalidArgument,
    InvalidPath,
    MemoryStore,
    NotTrusted,
    ReadOnlyPath,
)
from released import ISSUE_9_RELEASE, released_source, run_released


def test_prefixes_given_at_create_bind_every_handle(durable_backend, key):
    creator = MemoryStore.create(key=key, read_only_prefixes=("memory/",))
    with pytest.raises(ReadOnlyPath):
        creator.write_text("memory/facts.md", "x")
    assert creator.persisted_read_only_prefixes() == ("memory/",)
    other = MemoryStore.get_or_create(key=key)  # never given any prefix
    assert other.read_only_prefixes == () and other.persisted_read_only_prefixes() == ("memory/",)
    for call in (lambda: other.write_text("memory/x.md", "x"), lambda: other.delete("memory/facts.md")):
        with pytest.raises(ReadOnlyPath):
            call()
    other.write_text("notes/ok.md", "fine")
    other.save()
    assert MemoryStore.open(key=key).read_text("notes/ok.md") == "fine"
    assert set(durable_backend.upstream_view(key)) >= {"notes/ok.md"}
    assert "memory/x.md" not in durable_backend.upstream_view(key)


def test_creating_with_prefixes_rejects_bad_ones_before_anything_exists(durable_backend, key):
    for bad, error in [("memory/", InvalidArgument), (("../x",), InvalidPath), (("",), InvalidArgument)]:
        with pytest.raises(error):
            MemoryStore.create(key=key, read_only_prefixes=bad)
    assert not MemoryStore.exists(key=key) and durable_backend.objects(key) == {}


def test_a_handle_that_wrote_before_loading_cannot_save_into_them(durable_backend, key):
    MemoryStore.create(key=key, read_only_prefixes=("memory/",))
    fresh = MemoryStore(key)  # not loaded yet: its first write is admitted before it knows the setting
    fresh.write_text("memory/sneaky.md", "x")
    with pytest.raises(ReadOnlyPath):
        fresh.save()
    assert "memory/sneaky.md" not in durable_backend.objects(key)
    assert MemoryStore.open(key=key).list_paths() == []


def test_the_change_is_trusted_audited_and_committed_at_once(durable_backend, key):
    untrusted = MemoryStore.create(key=key)
    untrusted.write_text("memory/seed.md", "written before the lock")
    untrusted.save()
    with pytest.raises(NotTrusted) as raised:
        untrusted.set_read_only_prefixes(["memory/"])
    assert isinstance(raised.value, AccessDenied) and isinstance(raised.value, PermissionError)
    reviewer = MemoryStore.open(key=key, trusted=True)
    for bad, error in [
        ("memory/", InvalidArgument),
        (["/abs"], InvalidPath),
        (["a/../b"], InvalidPath),
        ([""], InvalidArgument),
    ]:
        with pytest.raises(error):
            reviewer.set_read_only_prefixes(bad)
    assert MemoryStore.open(key=key).persisted_read_only_prefixes() == ()  # nothing changed so far
    assert reviewer.set_read_only_prefixes(["memory/", "policy/"], actor="reviewer", reason="lock") == (
        "memory/",
        "policy/",
    )
    with pytest.raises(ReadOnlyPath):  # trusted does not make plain writes into them
        reviewer.write_text("memory/x.md", "x")
    with pytest.raises(ReadOnlyPath):  # the store holds read-only content now
        MemoryStore.delete_store(key=key)
    assert reviewer.log(limit=1)[0].kind == "settings" and reviewer.log(limit=1)[0].actor == "reviewer"
    reviewer.compact()  # brings audit/log.jsonl (upstream's trail) up to date
    trail = [json.loads(line) for line in durable_backend.upstream_view(key)["audit/log.jsonl"].splitlines()]
    assert [(e["op"], e["actor"], e["reason"], e["previous"], e["prefixes"]) for e in trail[1:]] == [
        ("set_read_only_prefixes", "reviewer", "lock", [], ["memory/", "policy/"])
    ]
    reviewer.set_read_only_prefixes([])  # cleared: writes are allowed again, on every handle
    other = MemoryStore.open(key=key)
    other.write_text("memory/x.md", "x")
    other.save()
    assert durable_backend.upstream_view(key)["memory/x.md"] == b"x"


def test_concurrent_changes_are_compare_and_swap(durable_backend, key):
    MemoryStore.create(key=key)
    first, second = (MemoryStore.open(key=key, trusted=True) for _ in range(2))
    first.set_read_only_prefixes(["a/"])
    with pytest.raises(ConcurrencyError) as raised:
        second.set_read_only_prefixes(["b/"])
    assert raised.value.paths == ("(read-only prefixes)",)
    assert MemoryStore.open(key=key).persisted_read_only_prefixes() == ("a/",)
    second.refresh()
    assert second.persisted_read_only_prefixes() == ("a/",)
    second.set_read_only_prefixes(["a/", "b/"])
    assert MemoryStore.open(key=key).persisted_read_only_prefixes() == ("a/", "b/")


def test_a_save_racing_a_change_fails_and_writes_nothing(durable_backend, key):
    MemoryStore.create(key=key)
    agent = MemoryStore.open(key=key)
    agent.write_text("memory/new.md", "written while allowed")
    agent.write_text("notes/fine.md", "fine")
    MemoryStore.open(key=key, trusted=True).set_read_only_prefixes(["memory/"])
    with pytest.raises(ReadOnlyPath):
        agent.save()
    assert not {"memory/new.md", "notes/fine.md"} & set(durable_backend.objects(key))  # all or nothing
    assert MemoryStore.open(key=key).list_paths() == []
    dropped = agent.refresh()  # picks up the setting; the refused write stays unsaved until dropped
    assert dropped == [] and agent.persisted_read_only_prefixes() == ("memory/",)
    agent.delete("notes/fine.md")
    with pytest.raises(ReadOnlyPath):
        agent.write_text("memory/other.md", "x")  # refused at the call now


# -- the deployed previous release ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    return released_source(ISSUE_9_RELEASE, tmp_path_factory.mktemp("previous"))


@pytest.mark.slow
def test_the_previous_release_saves_without_dropping_the_setting(durable_backend, key, previous, request):
    MemoryStore.create(key=key, read_only_prefixes=("memory/",))
    endpoint = request.getfixturevalue("moto_endpoint") if durable_backend.name == "s3" else None
    config = {"key": key, "raw": durable_backend.raw_data_path, "endpoint": endpoint}
    # it cannot enforce what it does not know (docs/decisions/0060), but it carries the setting forward
    run_released(previous, "write", config | {"writes": {"memory/old.md": "old", "notes/n.md": "n"}})
    fresh = MemoryStore.open(key=key)
    assert fresh.persisted_read_only_prefixes() == ("memory/",) and fresh.read_text("notes/n.md") == "n"
    with pytest.raises(ReadOnlyPath):
        fresh.write_text("memory/new.md", "x")


@pytest.mark.parametrize("prefix", ["notes/.", "./notes/", "notes//", "notes/./x", "."])
def test_a_read_only_prefix_with_a_dot_segment_is_refused_not_persisted_protecting_nothing(local_backend, key, prefix):
    trusted = MemoryStore.get_or_create(key=key, trusted=True)
    with pytest.raises(InvalidPath):
        trusted.set_read_only_prefixes([prefix])
    with pytest.raises(InvalidPath):
        MemoryStore.create(key=f"{key}-c", read_only_prefixes=(prefix,))
    assert MemoryStore.open(key=key).persisted_read_only_prefixes() == ()
    assert not MemoryStore.exists(key=f"{key}-c")
