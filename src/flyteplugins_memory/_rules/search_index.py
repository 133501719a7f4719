"""Pure: the persisted search index and BM25 queries over it (docs/decisions/0064-search-a-persisted-bm25-index.md).

The index of a state is a few immutable **segments**: content-addressed journal objects, oldest first,
named (by sha256 and size, nothing derived from content) in the store-level ``ext["search"]`` that every
commit record and checkpoint carries. Every save that changes files writes its docs as a new segment; the
newest segments merge (`merge_plan`). No text, snippet or term count sits inline in a record: records are
immutable, and purge() must be able to remove every copy of a content (it deletes the segments that hold
it). A newer entry for a path wins over an older one; ``None`` is a tombstone (the path was deleted).
``seq`` marks the commit the index describes exactly: a commit written without updating it (an older
release, a failed update) leaves it behind, and readers then check the index against the file index.

A segment holds its docs without their token counts, and per term its postings, decoded only when a query
asks for that term (`search_forms`: the binary form new segments take, the JSON form older releases wrote).
A `Corpus` ranks with BM25 over the postings of the query's terms only.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from .codecs import is_sha256
from .search_forms import VERSION, Segment, Updates, decode_segment, encode_segment
from .search_text import K1, B, Doc, idf, term_score

__all__ = ["VERSION", "Segment", "Updates", "decode_segment", "encode_segment"]  # their home: `search_forms`

#: The key of the store-level ``ext`` that holds the search index.
EXT_KEY = "search"
#: At most this many segments: a cold search reads each of them once.
MAX_SEGMENTS = 5
#: A newer segment is merged into the one before it while that one is less than this many times larger.
MERGE_RATIO = 4


@dataclass(frozen=True)
class SegmentRef:
    sha256: str
    bytes: int


@dataclass
class SearchExt:
    """What ``ext["search"]`` holds: the commit it is exact for (None: unknown) and the segments."""

    seq: int | None = None
    segments: list[SegmentRef] = field(default_factory=list)

    def encoded(self) -> dict[str, Any]:
        refs = [{"sha256": s.sha256, "bytes": s.bytes} for s in self.segments]
        return {"v": VERSION, "seq": self.seq, "segments": refs}


@dataclass
class Repairs:
    """What a handle's searches hand its next save: the docs it made by reading files at commit `seq`
    (None: it checked nothing there) and the segments it found unreadable there (the docs make up for
    them), plus every segment it holds parsed (so a merge reads none of those again)."""

    seq: int | None = None
    docs: Updates = field(default_factory=dict)
    dropped: frozenset[str] = frozenset()
    cache: dict[str, Segment] = field(default_factory=dict)


def read_ext(ext: Mapping[str, Any]) -> SearchExt | None:
    """The search index a state's ``ext`` names; None when absent or malformed (then nothing is trusted)."""
    raw = ext.get(EXT_KEY)
    if not isinstance(raw, dict) or raw.get("v") != VERSION:
        return None
    try:
        seq = raw["seq"]
        refs = [SegmentRef(str(r["sha256"]), int(r["bytes"])) for r in raw["segments"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if (seq is not None and not isinstance(seq, int)) or not all(is_sha256(r.sha256) for r in refs):
        return None
    return SearchExt(seq, refs)


def referenced_segments(ext: Mapping[str, Any]) -> list[str]:
    """The sha256 of every segment an ``ext`` names (what gc() must keep while that state is kept); a
    malformed index names none: its segments are unreadable to every reader anyway."""
    found = read_ext(ext)
    return [r.sha256 for r in found.segments] if found else []


def merged(older: Updates, newer: Updates, *, oldest: bool) -> Updates:
    """Two segments' docs as one (the newer wins); tombstones go once nothing older is left to hide."""
    out = {**older, **newer}
    return {p: d for p, d in out.items() if d is not None} if oldest else out


def merge_plan(sizes: list[int]) -> int:
    """How many of the newest segments to merge into one (0 or >= 2), given segment sizes oldest first."""
    count = 1
    while count < len(sizes):
        newer = sum(sizes[-count:])
        if len(sizes) - count + 1 <= MAX_SEGMENTS and sizes[-count - 1] >= MERGE_RATIO * newer:
            break
        count += 1
    return count if count >= 2 else 0


Hit = tuple[str, float, Doc]


class Corpus:
    """The docs of one state (segments, then pending on top), ready to answer BM25 queries."""

    def __init__(self, segments: list[Segment], pending: Updates):
        self.segments = segments
        self.pending = dict(pending)
        #: per segment, whether each row is the live doc of its path (the newest doc of a path wins)
        self.live: list[list[bool]] = [[] for _ in segments]
        self.docs, self.total = 0, 0
        seen = set(self.pending)
        for si in reversed(range(len(segments))):
            segment = segments[si]
            live = [p not in seen for p in segment.paths]  # one pass at C speed: no per-row Python code
            for i in segment.gone:
                live[i] = False
            seen.update(segment.paths)
            self.live[si] = live
            lengths = list(compress(segment.lengths, live))
            self.docs, self.total = self.docs + len(lengths) - lengths.count(0), self.total + sum(lengths)
        for doc in self.pending.values():
            if doc is not None:
                self.docs, self.total = self.docs + (doc.length > 0), self.total + doc.length
        #: whether every row of a segment is live (its document frequencies are its postings' lengths)
        self._whole = [all(live) for live in self.live]
        self._owner: dict[str, tuple[int, int] | Doc] | None = None

    @property
    def owner(self) -> dict[str, tuple[int, int] | Doc]:
        """Where each live path's doc is: (segment, row) or a pending Doc (built on first use: a search
        without unsaved changes needs none of it)."""
        if self._owner is None:
            owner: dict[str, tuple[int, int] | Doc] = {}
            for si, segment in enumerate(self.segments):
                rows = zip(segment.paths, self.live[si], strict=True)
                owner.update((p, (si, i)) for i, (p, live) in enumerate(rows) if live)
            owner.update((p, d) for p, d in self.pending.items() if d is not None)
            self._owner = owner
        return self._owner

    def doc(self, path: str) -> Doc:
        own = self.owner[path]
        return own if isinstance(own, Doc) else _checked(self.segments[own[0]].doc(own[1]))

    def paths(self) -> Iterable[str]:
        return self.owner.keys()

    def search(self, terms: list[str], shadow: Updates, accept: Callable[[str, Doc], bool], limit: int) -> list[Hit]:
        """The `limit` best docs for `terms` (BM25), with `shadow` (unsaved changes) over the corpus."""
        docs, total = self._stats(shadow)
        if not docs or not terms:
            return []
        avg = total / docs
        weights = {term: idf(docs, self._df(term, shadow)) for term in dict.fromkeys(terms)}
        scores: dict[str, float] = {}
        accumulated = [self._segment_scores(si, weights, shadow, avg) for si in range(len(self.segments))]
        for term, weight in weights.items():
            for path, doc in self._loose(shadow):
                if term in doc.counts:
                    scores[path] = scores.get(path, 0.0) + term_score(doc.counts[term], doc.length, avg, weight)
        # First the best few (ties included) in order; all of them only if `accept` leaves too few of those.
        every = [s for acc in accumulated for s in acc.values()] + list(scores.values())
        best = 2 * limit + 16
        cut = heapq.nlargest(best, every)[-1] if len(every) > best else -math.inf
        out = self._accepted(self._ranked(accumulated, scores, cut), shadow, accept, limit)
        if len(out) < limit and cut > -math.inf:
            out = self._accepted(self._ranked(accumulated, scores, -math.inf), shadow, accept, limit)
        return out

    def _ranked(self, accumulated: list[dict[int, float]], scores: dict[str, float], cut: float) -> list[_Ranked]:
        """The candidates scoring at least `cut`, best first (ties by path)."""
        ranked: list[_Ranked] = [(-s, p, None) for p, s in scores.items() if s >= cut]
        for si, acc in enumerate(accumulated):
            paths = self.segments[si].paths
            ranked += [(-s, paths[i], (si, i)) for i, s in acc.items() if s >= cut]
        ranked.sort()
        return ranked

    def _accepted(
        self, ranked: list[_Ranked], shadow: Updates, accept: Callable[[str, Doc], bool], limit: int
    ) -> list[Hit]:
        out: list[Hit] = []
        for negated, path, where in ranked:
            doc = self._current(path, where, shadow)
            if accept(path, doc):
                out.append((path, -negated, doc))
                if len(out) == limit:
                    break
        return out

    def _loose(self, shadow: Updates) -> Iterable[tuple[str, Doc]]:
        """Live docs outside the segments: pending ones not shadowed, then the shadow's."""
        for path, doc in self.pending.items():
            if doc is not None and path not in shadow:
                yield path, doc
        for path, doc in shadow.items():
            if doc is not None:
                yield path, doc

    def _df(self, term: str, shadow: Updates) -> int:
        df = sum(1 for _, doc in self._loose(shadow) if term in doc.counts)
        for si, segment in enumerate(self.segments):
            rows, live, paths = segment.postings(term)[0], self.live[si], segment.paths
            if not shadow and self._whole[si] and (not rows or (min(rows) >= 0 and max(rows) < len(live))):
                df += len(rows)  # every row live and in range: no per-row Python code
                continue
            df += sum(1 for i in rows if 0 <= i < len(live) and live[i] and paths[i] not in shadow)
        return df

    def _segment_scores(self, si: int, weights: dict[str, float], shadow: Updates, avg: float) -> dict[int, float]:
        """BM25 scores of segment `si`'s live rows holding any of the terms `weights` weighs, by row."""
        segment, live = self.segments[si], self.live[si]
        lengths, n = segment.lengths, len(segment.paths)
        acc: dict[int, float] = {}
        k, b, k1 = K1 * (1.0 - B), K1 * B / avg, K1 + 1.0
        for term, weight in weights.items():
            rows, tfs = segment.postings(term)
            if not (self._whole[si] and (not rows or (min(rows) >= 0 and max(rows) < n))):
                pairs = [(i, tf) for i, tf in zip(rows, tfs, strict=True) if 0 <= i < n and live[i]]
                rows, tfs = [i for i, _ in pairs], [tf for _, tf in pairs]
            if not acc:  # the first term: a comprehension (0.0 + x is x: the same sums as below)
                acc = {i: weight * tf * k1 / (tf + k + b * lengths[i]) for i, tf in zip(rows, tfs, strict=True)}
                continue
            for i, tf in zip(rows, tfs, strict=True):
                acc[i] = acc.get(i, 0.0) + weight * tf * k1 / (tf + k + b * lengths[i])
        for i in [i for i in acc if segment.paths[i] in shadow] if shadow else []:
            del acc[i]
        return acc

    def _stats(self, shadow: Updates) -> tuple[int, int]:
        docs, total = self.docs, self.total
        for path, doc in shadow.items():
            if path in self.owner:
                length = self.doc(path).length
                docs, total = docs - (length > 0), total - length
            if doc is not None:
                docs, total = docs + (doc.length > 0), total + doc.length
        return docs, total

    def _current(self, path: str, where: tuple[int, int] | None, shadow: Updates) -> Doc:
        if path in shadow:
            return _checked(shadow[path])
        return _checked(self.segments[where[0]].doc(where[1])) if where else self.doc(path)


#: A ranked candidate: its negated score (ascending order is best first, ties by path), its path, and
#: where its doc is (segment and row; None: a doc outside the segments).
_Ranked = tuple[float, str, "tuple[int, int] | None"]


def _checked(doc: Doc | None) -> Doc:
    if doc is None:  # liveness excludes tombstones before this is reached
        raise AssertionError("a tombstone has no doc")
    return doc
