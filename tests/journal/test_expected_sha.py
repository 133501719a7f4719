"""`expected_sha` is a compare-and-swap on the committed state: two handles can never both win it.

The write-time check compares against the handle's view; the save rechecks the path against the state
it commits onto, and any change of the path's committed content since the handle's base is a conflict,
even when the new bytes happen to be equal (two increments of one counter must never both succeed).
"""

from __future__ import annotations

import json

import pytest

from flyteplugins_memory import ConcurrencyError, MemoryStore
from helpers import commit, handles, saved


def _increment(store: MemoryStore) -> None:
    sha = store.current_sha("counter.json")
    count = store.read_json("counter.json")["n"]
    store.write_json("counter.json", {"n": count + 1}, expected_sha=sha)


def test_two_increments_from_one_read_never_both_commit(backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.write_json("counter.json", {"n": 0})
    seed.save()
    first, second = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    _increment(first)
    _increment(second)  # same bytes as first's write: {"n": 1}
    first.save()
    with pytest.raises(ConcurrencyError) as info:
        second.save()
    assert info.value.paths == ("counter.json",)
    assert json.loads(backend.upstream_view(key)["counter.json"]) == {"n": 1}
    # the loser retries the usual way: refresh drops the stale write, redo it against the new state
    assert second.refresh() == ["counter.json"]
    _increment(second)
    second.save()
    assert json.loads(backend.upstream_view(key)["counter.json"]) == {"n": 2}
    assert MemoryStore.get_or_create(key=key).read_json("counter.json") == {"n": 2}


def test_create_if_absent_claims_exactly_one_winner(backend, key):
    MemoryStore.get_or_create(key=key)
    handles = [MemoryStore.get_or_create(key=key) for _ in range(3)]
    for handle in handles:
        handle.write_text("lease.txt", "worker", expected_sha="")  # identical claims
    handles[0].save()
    for loser in handles[1:]:
        with pytest.raises(ConcurrencyError) as info:
            loser.save()
        assert info.value.paths == ("lease.txt",) and info.value.actual_sha
    events = [e for e in MemoryStore.get_or_create(key=key).audit_tail(0) if e["path"] == "lease.txt"]
    assert [e["op"] for e in events] == ["create"]


def test_guarded_delete_and_unguarded_rewrite(backend, key):
    saved(key, {"doc.txt": "v1"})
    deleter, writer = handles(key, 2)
    commit(writer, {"doc.txt": "v2"})
    assert deleter.delete("doc.txt", expected_sha=deleter.current_sha("doc.txt")) is True
    with pytest.raises(ConcurrencyError):
        deleter.save()
    assert backend.upstream_view(key)["doc.txt"] == b"v2"
    # without expected_sha, a rewrite to the bytes already committed is no conflict (content rules)
    same, other = handles(key, 2)
    commit(other, {"doc.txt": "v3"})
    same.write_text("doc.txt", "v3")
    same.save()


def test_a_guard_holds_across_later_unguarded_writes_and_other_paths_merge(backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.write_text("state.txt", "a")
    seed.save()
    mine, theirs = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    mine.write_text("state.txt", "b", expected_sha=mine.current_sha("state.txt"))
    mine.write_text("state.txt", "c")  # the precondition of the first write still applies
    mine.write_text("notes.txt", "mine")
    theirs.write_text("state.txt", "z")
    theirs.save()
    with pytest.raises(ConcurrencyError) as info:
        mine.save()
    assert info.value.paths == ("state.txt",)
    assert mine.refresh() == ["state.txt"]
    mine.save()  # notes.txt survives the dropped conflict
    view = backend.upstream_view(key)
    assert view["state.txt"] == b"z" and view["notes.txt"] == b"mine"


def test_a_guard_on_the_handles_own_unsaved_write_rebases_when_nobody_else_touched_it(backend, key):
    store = MemoryStore.get_or_create(key=key)
    first = store.write_text("x.txt", "1", expected_sha="")
    store.write_text("x.txt", "2", expected_sha=first.sha256)
    other = MemoryStore.get_or_create(key=key)
    other.write_text("y.txt", "y")
    other.save()
    store.save()  # rebased onto other's commit: x.txt was untouched there
    assert backend.upstream_view(key)["x.txt"] == b"2"


def test_a_delete_after_set_metadata_agrees_with_another_handles_delete(backend, key):
    """set_metadata pins its write to the bytes it relabels; a later delete of the path (no expected_sha)
    replaces that change, so it saves as a plain delete would: another handle deleted the file too, and
    both agree (found by the model, tests/reliability/test_model_store.py)."""
    first = MemoryStore.get_or_create(key=key)
    first.write_text("notes/c.md", "x")
    first.save()
    other = MemoryStore.get_or_create(key=key)
    first.set_metadata("notes/c.md", {"k": "v"})
    other.delete_prefix("notes")
    other.save()
    first.delete("notes/c.md")
    first.save()
    assert MemoryStore.open(key=key).list_paths() == []
    assert "notes/c.md" not in backend.upstream_view(key)


def test_a_write_after_a_guarded_write_is_not_guarded(backend, key):
    first = MemoryStore.get_or_create(key=key)
    first.write_text("n.md", "one")
    first.save()
    other = MemoryStore.get_or_create(key=key)
    first.write_text("n.md", "two", expected_sha=first.current_sha("n.md"))
    other.write_text("n.md", "three")
    other.save()
    first.write_text("n.md", "three")  # the newest change: unguarded, and equal to what landed
    first.save()
    assert MemoryStore.open(key=key).read_text("n.md") == "three"
    with pytest.raises(ConcurrencyError):  # a guard still refuses at once where it does not hold
        first.write_text("n.md", "four", expected_sha="0" * 64)
