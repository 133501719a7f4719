"""gc's expiry reaches what handles hold: a handle that searched before a file expired does not store the
expired file's words and labels again with its next save (its search cache held the segments gc removed;
found by the hostile review of issue 23)."""

from __future__ import annotations

import time
from datetime import timedelta

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._journal import gc as _gc
from helpers import holding

BODY, LABEL = "expiring-body-TTL-5b37", "expiring-label-TTL-9d01"


def test_a_handle_that_searched_before_expiry_stores_nothing_expired_again(durable_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("t.md", f"tmp {BODY}", ttl=timedelta(hours=1), metadata={"tag": LABEL})
    store.save()
    old = MemoryStore.open(key=key)
    assert old.search("tmp")
    monkeypatch.setattr(_gc, "clock", lambda: time.time() + 2 * 3600)
    MemoryStore.open(key=key).gc()
    assert holding(durable_backend, BODY) == [] and holding(durable_backend, LABEL) == []
    old.write_text("o.md", "other")
    old.save()
    assert holding(durable_backend, BODY) == [] and holding(durable_backend, LABEL) == []
    assert [h.path for h in MemoryStore.open(key=key).search("other")] == ["o.md"]
