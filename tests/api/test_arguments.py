"""Bad plain arguments of the public API (counts, windows, flags, options) raise `InvalidArgument`, a
`MemoryStoreError` that is also a `ValueError`, before anything is read or written: storage holds exactly
what it held before the call."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flyteplugins_memory import InvalidArgument, MemoryStore, MemoryStoreError
from flyteplugins_memory.errors import __all__ as error_names


def saved(key: str) -> MemoryStore:
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "a")
    store.append({"role": "user", "content": "hi"})
    store.save()
    return store


BAD_CALLS = {
    "log(limit=1.5)": lambda s: s.log(limit=1.5),
    "log(limit=-1)": lambda s: s.log(limit=-1),
    "log(limit=True)": lambda s: s.log(limit=True),
    "log(limit='5')": lambda s: s.log(limit="5"),
    "audit_tail(1.5)": lambda s: s.audit_tail(1.5),
    "audit_tail('3')": lambda s: s.audit_tail("3"),
    "gc(window=-1s)": lambda s: s.gc(window=timedelta(seconds=-1)),
    "gc(window=60)": lambda s: s.gc(window=60),
    "set_gc_window(-1h)": lambda s: s.set_gc_window(timedelta(hours=-1)),
    "set_gc_window('1h')": lambda s: s.set_gc_window("1h"),
    "write_text(expected_sha=1)": lambda s: s.write_text("a.txt", "b", expected_sha=1),
    "delete(expected_sha=b'')": lambda s: s.delete("a.txt", expected_sha=b""),
}


@pytest.mark.parametrize("call", sorted(BAD_CALLS))
def test_a_bad_argument_is_a_typed_value_error_and_writes_nothing(local_backend, key, call):
    store = saved(key)
    before = local_backend.stored(key)
    with pytest.raises(InvalidArgument) as refused:
        BAD_CALLS[call](store)
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, MemoryStoreError)
    assert not store.has_unsaved_changes() and store.read_text("a.txt") == "a"
    store.save()
    assert local_backend.stored(key) == before, f"{call} changed storage"


@pytest.mark.parametrize(
    "options",
    [{"keep_versions": "yes"}, {"audit": 1}, {"read_only_prefixes": "docs/"}, {"read_only_prefixes": (1,)}],
)
def test_bad_store_options_are_refused_before_the_store_exists(local_backend, key, options):
    for opener in (MemoryStore.create, MemoryStore.get_or_create):
        with pytest.raises(InvalidArgument):
            opener(key=key, **options)
    assert local_backend.stored(key) == {} and not MemoryStore.exists(key=key)


def test_good_arguments_at_the_edges_still_work(local_backend, key):
    store = MemoryStore.create(key=key, read_only_prefixes=["docs/"], keep_versions=True, audit=True)
    assert store.read_only_prefixes == ("docs/",)
    store.write_text("a.txt", "a")
    store.save()
    assert store.log(limit=0) == [] and len(store.log(limit=1)) == 1
    assert len(store.audit_tail(0)) == len(store.audit_tail(-1)) == 1  # n <= 0: every event
    store.set_gc_window(timedelta(0))
    store.set_gc_window(None)
    assert store.gc(window=timedelta(0)).commits == (1,)


def test_invalid_argument_is_public():
    assert "InvalidArgument" in error_names
