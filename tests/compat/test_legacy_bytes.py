"""Item 9 of issue 8: after ours rewrites or deletes a file that upstream wrote, every older committed state
still reads that file's old bytes (until gc() collects those states)."""

from __future__ import annotations

from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._rules.codecs import sha256_bytes


def _upstream_store(key: str) -> None:
    upstream = UpstreamStore.get_or_create(key=key)
    upstream.write_text("notes/a.md", "upstream a")
    upstream.write_text("notes/b.md", "upstream b")
    upstream.write_text("keep.txt", "untouched")
    upstream.append({"role": "user", "content": "hi"})
    upstream.save()


def test_states_before_a_rewrite_of_an_upstream_file_stay_readable(durable_backend, key):
    _upstream_store(key)
    first = MemoryStore.get_or_create(key=key)
    first.write_text("ours.txt", "ours")
    first.save()  # the import is now commit 0, this is commit 1; a.md and b.md are still upstream's bytes
    pinned = first._serialize()  # a task input pinned to commit 1
    opened = MemoryStore.get_or_create(key=key)  # a handle standing on commit 1

    writer = MemoryStore.get_or_create(key=key)
    writer.write_text("notes/a.md", "rewritten by ours")
    writer.delete("notes/b.md")
    writer.save()
    assert durable_backend.upstream_view(key)["notes/a.md"] == b"rewritten by ours"
    assert "notes/b.md" not in durable_backend.upstream_view(key)

    for old in (MemoryStore._deserialize(pinned), opened):
        assert old.read_text("notes/a.md") == "upstream a"
        assert old.read_text("notes/b.md") == "upstream b"
        assert old.read_text("keep.txt") == "untouched"
    # the old bytes are in the content-addressed store now, checked against their sha256
    journal = durable_backend.journal(key)
    for text in (b"upstream a", b"upstream b"):
        stored = [d for n, d in journal.items() if n.endswith(sha256_bytes(text))]
        assert stored == [text]
    current = MemoryStore.get_or_create(key=key)
    assert current.read_text("notes/a.md") == "rewritten by ours" and not current.exists("notes/b.md")


def test_a_task_input_of_the_import_itself_survives_the_first_save(durable_backend, key):
    """A store received before ours ever saved it is pinned to the import (commit 0 is upstream's
    layout itself); the first save that changes a file must not take those bytes away from it."""
    _upstream_store(key)
    handle = MemoryStore.get_or_create(key=key)
    assert handle.read_text("keep.txt") == "untouched"
    other = MemoryStore.get_or_create(key=key)
    other.write_text("notes/a.md", "changed")
    other.save()
    assert handle.read_text("notes/a.md") == "upstream a"


def test_only_the_first_change_copies_and_untouched_files_are_not_copied(durable_backend, key, io_counter):
    _upstream_store(key)
    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes/a.md", "v1")
    store.save()
    journal = durable_backend.journal(key)
    assert not any(n.endswith(sha256_bytes(b"untouched")) for n in journal)
    io_counter.reset()
    store.write_text("notes/a.md", "v2")
    store.save()
    assert "notes/a.md" not in io_counter.names("get")  # it is ours now: nothing to copy


def test_upstream_bytes_changed_behind_our_back_are_not_copied(local_backend, key):
    _upstream_store(key)
    store = MemoryStore.get_or_create(key=key)
    local_backend.put(key, "notes/a.md", b"edited in place by someone else")
    store.write_text("notes/a.md", "ours")
    store.save()  # nothing to preserve: the bytes no longer match the imported sha256
    assert not any(n.endswith(sha256_bytes(b"edited in place by someone else")) for n in local_backend.journal(key))
    assert MemoryStore.get_or_create(key=key).read_text("notes/a.md") == "ours"
