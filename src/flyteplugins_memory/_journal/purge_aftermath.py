"""What a save owes a purge that landed while it was under way: no copy of purged data may outlive it.

A handle that opened before a purge holds the purged data in memory (its working root, its search cache).
Its save cannot commit that data again (it rebases onto the purge commit, read from storage), but two of
its side effects ran before it knew of the purge, and this module undoes them once the save sees the
purge (a record that counts more purges than the save's base, `_rules.purge_count`):

- the copy of an in-place file's old bytes into a blob (`_journal.preserve`), taken from the handle's working
  root, which may be content the purge removed: removed again unless a live path of the newest state
  holds it (the purge marker says it was purged);
- the search segment a losing commit attempt wrote from the handle's cached segments (which may hold a
  purged file's words, first lines and labels): removed unless the newest state names it, and the cache is
  dropped so that later attempts read the index from storage (where the purge removed those segments).

Nothing here costs a request unless a purge landed during the save.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._rules.layout import blob_name, search_segment_name
from .._rules.markers import purge_marker_name
from .._rules.purge_count import purged_since
from .._rules.search_index import Repairs, referenced_segments
from .._rules.state import State
from ..storage._contract import ObjectStorage


async def drop_purged_copies(remote: ObjectStorage, base: State, latest: State, preserved: Iterable[str]) -> None:
    """Remove the blobs of `preserved` contents (sha256s this save copied, `_journal.preserve`) that a purge landing
    between `base` and `latest` removed, unless a live path of `latest` holds them."""
    shas = sorted(set(preserved))
    if not shas or not purged_since(base.ext, latest.ext):
        return
    markers = await remote.read_many([purge_marker_name(s) for s in shas])
    purged = [s for s in shas if purge_marker_name(s) in markers]
    if not purged:
        return
    await latest.files.need_all()
    live = {entry.sha256 for entry in latest.files.values()}
    await remote.remove_all([blob_name(s) for s in purged if s not in live])


def written_segments(before: State, attempt: State) -> set[str]:
    """The search segments a commit attempt named that the state it was built on did not (it wrote them)."""
    return set(referenced_segments(attempt.ext)) - set(referenced_segments(before.ext))


async def after_losing(remote: ObjectStorage, base: State, written: set[str], latest: State, repairs: Repairs) -> None:
    """A commit attempt lost its slot and `latest` is the newest state: if a purge landed since `base`,
    remove the segments the attempt wrote that `latest` does not name, and drop the search cache."""
    if not purged_since(base.ext, latest.ext):
        return
    repairs.cache.clear()
    orphans = written - set(referenced_segments(latest.ext))
    await remote.remove_all(sorted(search_segment_name(s) for s in orphans))


def cache_for(base: State, latest: State, repairs: Repairs) -> None:
    """Drop the search cache before an attempt on `latest` if a purge landed since `base` (the cache may hold
    segments the purge removed: a merge must read them from storage, where they are gone)."""
    if purged_since(base.ext, latest.ext):
        repairs.cache.clear()
