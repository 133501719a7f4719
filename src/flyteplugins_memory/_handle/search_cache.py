"""The handle's search index in memory: its base state's corpus and docs for its unsaved writes.

Loaded on a handle's first search and kept on its session until the base changes (save, refresh):
segments are cached by sha256 across bases, so a warm search reads nothing. When the persisted index is
not exact for the base (a store upstream or an older release wrote, a commit whose index update failed,
a missing or corrupt segment), the corpus is checked against the whole file index: files whose doc is
missing or describes other content are read (64 at a time) and indexed, docs of deleted paths dropped.
Those repairs are kept here and persisted by the handle's next save (`SaveJob.search_repairs`), which
also drops from the index the segments found unreadable (purge() removes segments; so may an operator).
A segment whose postings or docs turn out malformed only when a query decodes them (`DamagedSegment`) is
unreadable too: the search that met it calls `unreadable`, and loads the corpus again without it
(docs/decisions/0161).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable

from .._journal import gc as _gc
from .._journal.journal_storage import JournalStorage
from .._journal.search_segments import doc_for, read_contents, read_segments, report_damaged
from .._rules.journal_objects import FileEntry
from .._rules.metadata import EXT_KEY as METADATA_KEY
from .._rules.search_forms import DamagedSegment
from .._rules.search_index import Corpus, Repairs, Segment, SegmentRef, Updates, read_ext
from .._rules.search_text import Doc
from .._rules.state import State
from .._rules.ttl import expires_at, is_expired
from ..errors import ContentPurged, MemoryStoreError
from .working_copy import WorkingCopy


class SearchCache:
    """One handle's search index (see the module docstring)."""

    def __init__(self) -> None:
        self.segments: dict[str, Segment] = {}
        self._base: State | None = None
        self._corpus = Corpus([], {})
        self._repairs = Repairs(cache=self.segments)
        self._unsaved: dict[tuple[str, str], Doc] = {}
        #: segments (by sha256) found malformed when decoded: unreadable for good (their bytes never change)
        self._damaged: set[str] = set()
        self._loaded_without: frozenset[str] = frozenset()
        self._store = ""

    def repairs_for(self, base: State) -> Repairs:
        """What a check against the file index of `base` found (nothing, unless checked at `base`), and
        the segments this handle holds parsed."""
        return self._repairs if self._base is base else Repairs(cache=self.segments)

    def reset(self) -> None:
        """Forget everything (after a purge removed segments this handle may hold)."""
        self.segments.clear()
        self._base, self._corpus, self._unsaved = None, Corpus([], {}), {}
        self._repairs = Repairs(cache=self.segments)

    async def corpus(self, remote: JournalStorage | None, view: WorkingCopy) -> Corpus:
        """The corpus of the view's base (call under the session's lock); loaded again when a segment of
        it was found malformed since."""
        if self._base is not view.base or not self._damaged <= self._loaded_without:
            base, without = view.base, set(self._damaged)
            self._store = remote.uri if remote else ""
            self._corpus, self._repairs = await self._load(remote, view, without)
            self._base, self._loaded_without = base, frozenset(without)
        return self._corpus

    def unreadable(self, damage: DamagedSegment) -> None:
        """A query found `damage` in a segment of the corpus: the next `corpus` call loads the corpus
        again without that segment, reading its files instead, and the next save drops it from the index."""
        sha = damage.segment.sha256
        if sha is None:  # not read from storage (every segment of a corpus is): forget all, read all again
            self.reset()
            return
        report_damaged(self._store, damage)
        self._damaged.add(sha)

    async def _load(
        self, remote: JournalStorage | None, view: WorkingCopy, without: set[str]
    ) -> tuple[Corpus, Repairs]:
        """The corpus of the view's base without the segments `without` (to which it adds those it finds
        malformed itself)."""
        base = view.base
        refs = sx.segments if (sx := read_ext(base.ext)) else []
        # segments behind the base are brought up to date from the file index: read it beside them
        behind = sx is None or sx.seq != base.seq
        readable = [r for r in refs if r.sha256 not in without]
        found = await _segments_and_index(remote, base, readable, self.segments, behind) if remote else {}
        for sha in set(self.segments) - set(found):  # segments merged away since: not needed again
            del self.segments[sha]
        while True:  # each round reconciles, or leaves out one more segment: bounded by their number
            segments = [found[r.sha256] for r in refs if r.sha256 in found]
            if sx is not None and len(found) == len(refs) and sx.seq == base.seq:
                return Corpus(segments, {}), Repairs(cache=self.segments)
            try:
                docs = await _reconcile(remote, view, Corpus(segments, {}))
            except DamagedSegment as damage:
                if damage.segment.sha256 not in found:
                    raise AssertionError("a damaged segment that is not the corpus's") from damage
                self.unreadable(damage)
                without.add(damage.segment.sha256)
                del found[damage.segment.sha256], self.segments[damage.segment.sha256]
                continue
            dropped = frozenset(r.sha256 for r in refs if r.sha256 not in found)
            return Corpus(segments, docs), Repairs(base.seq, docs, dropped, self.segments)

    def shadow(self, view: WorkingCopy) -> Updates:
        """Docs for the handle's unsaved changes (None: deleted), cached by content."""
        out: Updates = {}
        kept: dict[tuple[str, str], Doc] = {}
        for path, entry in view.changes.files.items():
            if entry is None or path not in view.unsaved:
                out[path] = None
                continue
            key = (path, entry.sha256)
            doc = self._unsaved.get(key) or doc_for(path, entry, view.unsaved[path])
            out[path] = kept[key] = doc
        self._unsaved = kept
        return out


async def _segments_and_index(
    remote: JournalStorage, base: State, refs: list[SegmentRef], cache: dict[str, Segment], behind: bool
) -> dict[str, Segment]:
    """The segments `refs` names (`read_segments`), and, when they are `behind` the base, in the same round
    trip the base's file index if it is no larger than the segments to read: bringing them up to date reads
    it all, so this saves the round trip after the segments for at most twice the bytes (decision 0148).
    Segments up to date need no index: their docs carry what a hit needs, expiry included (decision 0156;
    a segment too old to carry it looks its hits up after). Loading the index here is best effort:
    whatever needs a part that failed to load reads it again and reports it."""
    base_files = base.files.base
    missing = [r for r in refs if r.sha256 not in cache]
    unloaded = sum(base_files.refs[i].bytes for i in base_files.missing(range(len(base_files.refs))))
    index_too = behind and missing and unloaded
    if not index_too or not _index_with_segments(unloaded, sum(r.bytes for r in missing)):
        return await read_segments(remote, refs, cache)
    found, _ = await asyncio.gather(read_segments(remote, refs, cache), _quietly(base.files.need_all()))
    return found


def _index_with_segments(index_bytes: int, segment_bytes: int) -> bool:
    """Whether to read `index_bytes` of index parts beside `segment_bytes` of segments: at most as much."""
    return index_bytes <= segment_bytes


async def _quietly(loading: Awaitable[None]) -> None:
    with contextlib.suppress(MemoryStoreError):
        await loading


def _describes(doc: Doc, entry: FileEntry) -> bool:
    meta = (entry.updated_at, entry.updated_by, entry.reason, entry.bytes)
    expiry = not doc.expiry_known or doc.expires == expires_at(entry)  # unknown: a search looks it up
    same = doc.sha256 == entry.sha256 and doc.meta == meta and expiry
    return same and doc.metadata == (entry.ext.get(METADATA_KEY) or {})


async def _unless_purged(read: Awaitable[bytes]) -> bytes | None:
    """A file's content, or None if another handle purged it since this one read its state: it matches
    no search (the handle keeps the entry until it refreshes, but reading it raises `ContentPurged`)."""
    try:
        return await read
    except ContentPurged:
        return None


async def _reconcile(remote: JournalStorage | None, view: WorkingCopy, known: Corpus) -> Updates:
    """Docs for the base's files that `known` lacks or describes wrongly, and tombstones for its docs of
    paths the base does not hold (or holds expired: their content is read no more, and gc removes it)."""
    base = view.base
    await base.files.need_under("")
    now = _gc.clock()
    entries = {p: e for p in base.files if not is_expired(e := base.files[p], now)}
    stale = sorted(p for p, e in entries.items() if p not in known.owner or not _describes(known.doc(p), e))
    contents = await read_contents(lambda p: _unless_purged(view.fetch_committed(remote, p, entries[p])), stale)
    repairs: Updates = {p: doc_for(p, entries[p], data) for p in stale if (data := contents[p]) is not None}
    repairs.update({p: None for p in known.paths() if p not in entries})
    return repairs
