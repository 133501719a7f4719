"""The keys of the stores under one namespace, ``{root}/agents/memory-store/v0/{org}/{project}/{domain}/``.

What counts as a store: a directory directly under the namespace whose name is a valid key. Keys are
single path segments (`_rules.paths.validate_segment`), so the stores are exactly the namespace's children and
one non-recursive listing finds them all, however many files each holds. Every store, ours or written
by upstream, keeps its transcript ``messages.json`` (and its files and sidecars) under its prefix, so
its directory is listed; the journal lives outside the namespace (`_rules.journal_location`) and is never
mistaken for a key. Object stores have no empty directories, so a prefix shows up only while an
object lies under it; on local disk an empty directory left behind counts too (documented in
``docs/decisions/0055-bytes-and-deletes-in-bulk.md``).
"""

from __future__ import annotations

from .._rules.paths import validate_segment
from ..errors import InvalidKey
from ..storage._fsspec import FsspecStorage


async def list_keys(namespace: str, prefix: str = "") -> list[str]:
    """Sorted keys of the stores under `namespace` that start with `prefix`; one listing call."""
    found = await FsspecStorage(namespace).directories()
    return sorted(name for name in found if name.startswith(prefix) and _is_key(name))


def _is_key(name: str) -> bool:
    try:
        validate_segment(name, name="key")
    except InvalidKey:
        return False
    return True
