"""Hostile review of issue 11's last parts (scopes, persisted read-only prefixes, staged memories,
compaction, search): each test is a defect found by trying to break them, checked in storage (a new
handle or the backend's objects) where storage is involved."""

from __future__ import annotations

import pytest

from flyteplugins_memory import InvalidArgument, InvalidPath, MemoryStore


@pytest.fixture(params=["local_backend", "s3_backend"])
def backend(request):
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_an_embed_returning_non_finite_numbers_is_refused_not_ranked_silently(local_backend, key, bad):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.md", "apple pie")
    store.write_text("b.md", "apple tart")
    with pytest.raises(InvalidArgument, match="finite"):
        store.search("apple", embed=lambda texts: [[bad, 1.0] for _ in texts])
    with pytest.raises(InvalidArgument, match="vectors"):  # a str is no vector of numbers ("12": 1.0, 2.0)
        store.search("apple", embed=lambda texts: ["12" for _ in texts])
