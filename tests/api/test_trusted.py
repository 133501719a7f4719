"""`trusted=True` handles: the flag is checked, and it belongs to the code that opens a handle, so it does
not travel to another task with the store."""

import pytest

from flyteplugins_memory import InvalidArgument, MemoryStore


def test_the_flag_is_checked_on_every_constructor(local_backend, key):
    for make in (MemoryStore.create, MemoryStore.get_or_create):
        with pytest.raises(InvalidArgument):
            make(key=key, trusted="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        MemoryStore(key=key, trusted=1)  # type: ignore[arg-type]
    MemoryStore.create(key=key).save()
    assert MemoryStore.open(key=key, trusted=True).trusted
    assert not MemoryStore.open(key=key).trusted


def test_a_trusted_handle_sent_to_another_task_arrives_untrusted(local_backend, key):
    store = MemoryStore.get_or_create(key=key, trusted=True)
    payload = store._serialize()
    assert "trusted" not in payload
    assert not MemoryStore._deserialize(payload).trusted
