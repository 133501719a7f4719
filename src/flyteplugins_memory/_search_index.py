"""Pure: the persisted search index and BM25 queries over it (docs/decisions.md, "Issue 11: search").

The index of a state is a few immutable **segments** (content-addressed objects, oldest first) plus the
**pending** docs of the saves since the last segment, kept inline in the store-level ``ext["search"]``
that every commit record and checkpoint carries (so opening reads them for free). A newer entry for a
path wins over an older one; ``None`` is a tombstone (the path was deleted). ``seq`` marks the commit the
index describes exactly: a commit written without updating it (an older release, a failed update) leaves
it behind, and readers then check the index against the file index (`reconcile`).

A segment holds its docs without their token counts, and per term a posting string ``"i tf i tf ..."``
decoded only when a query asks for that term: opening a 10,000-doc index parses strings, not a million
numbers.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._search_text import Doc, idf, term_score

#: The key of the store-level ``ext`` that holds the search index.
EXT_KEY = "search"
#: Version of the ``ext["search"]`` map and of segments (a reader ignores an index of another version).
VERSION = 1
#: Pending docs are written into a segment once their encoding exceeds this many bytes.
PENDING_BYTES = 8 * 1024
#: At most this many segments: a cold search reads each of them once.
MAX_SEGMENTS = 4
#: A newer segment is merged into the one before it while that one is less than this many times larger.
MERGE_RATIO = 4

Updates = dict[str, Doc | None]


@dataclass(frozen=True)
class SegmentRef:
    sha256: str
    bytes: int


@dataclass
class SearchExt:
    """What ``ext["search"]`` holds: the commit it is exact for (None: unknown), segments, pending docs."""

    seq: int | None = None
    segments: list[SegmentRef] = field(default_factory=list)
    pending: Updates = field(default_factory=dict)

    def encoded(self) -> dict[str, Any]:
        pending = {p: (d.encoded() if d else None) for p, d in sorted(self.pending.items())}
        refs = [{"sha256": s.sha256, "bytes": s.bytes} for s in self.segments]
        return {"v": VERSION, "seq": self.seq, "segments": refs, "pending": pending}

    def pending_bytes(self) -> int:
        return len(json.dumps(self.encoded()["pending"]))


def read_ext(ext: Mapping[str, Any]) -> SearchExt | None:
    """The search index a state's ``ext`` names; None when absent or malformed (then nothing is trusted)."""
    raw = ext.get(EXT_KEY)
    if not isinstance(raw, dict) or raw.get("v") != VERSION:
        return None
    try:
        seq = raw["seq"]
        refs = [SegmentRef(str(r["sha256"]), int(r["bytes"])) for r in raw["segments"]]
        pending = {str(p): (Doc.decoded(d) if d is not None else None) for p, d in raw["pending"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if seq is not None and not isinstance(seq, int):
        return None
    return SearchExt(seq, refs, pending)


@dataclass
class Segment:
    """One immutable segment, parsed: paths, their docs (None: tombstone) without counts, postings."""

    paths: list[str]
    docs: list[Doc | None]
    terms: dict[str, str]
    _decoded: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def postings(self, term: str) -> list[tuple[int, int]]:
        if term not in self._decoded:
            numbers = [int(n) for n in self.terms.get(term, "").split()]
            self._decoded[term] = list(zip(numbers[::2], numbers[1::2], strict=True))
        return self._decoded[term]

    def full_docs(self) -> Updates:
        """Every doc with its token counts (to merge segments)."""
        counts: list[dict[str, int]] = [{} for _ in self.paths]
        for term in self.terms:
            for i, tf in self.postings(term):
                counts[i][term] = tf
        return {p: (_with_counts(d, counts[i]) if d else None) for i, (p, d) in enumerate(zip(self.paths, self.docs))}


def _with_counts(doc: Doc, counts: dict[str, int]) -> Doc:
    return Doc(doc.sha256, doc.length, counts, doc.meta, doc.metadata, doc.lead)


def encode_segment(docs: Updates, writer: str) -> bytes:
    """A segment's bytes (deterministic: equal docs give equal bytes, hence one object)."""
    paths = sorted(docs)
    postings: dict[str, list[str]] = {}
    rows: list[Any] = []
    for i, path in enumerate(paths):
        doc = docs[path]
        rows.append(doc.encoded()[:5] if doc else None)
        for term, tf in (doc.counts.items() if doc else ()):
            postings.setdefault(term, []).append(f"{i} {tf}")
    terms = {t: " ".join(postings[t]) for t in sorted(postings)}
    body = {"format": 1, "v": VERSION, "writer": writer, "paths": paths, "docs": rows, "terms": terms}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_segment(data: bytes) -> Segment:
    """Parse a segment (untrusted: a malformed one raises ValueError)."""
    try:
        body = json.loads(data)
        paths, rows, terms = body["paths"], body["docs"], body["terms"]
        docs = [Doc.decoded([*row, {}]) if row is not None else None for row in rows]
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"malformed search segment: {exc}") from exc
    if body.get("v") != VERSION or len(paths) != len(docs) or not all(isinstance(p, str) for p in paths):
        raise ValueError("malformed search segment")
    if not all(isinstance(t, str) and isinstance(s, str) for t, s in terms.items()):
        raise ValueError("malformed search segment postings")
    return Segment(paths, docs, terms)


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
        owner: dict[str, tuple[int, int] | Doc | None] = {}
        for si, segment in enumerate(segments):
            owner.update((p, (si, i) if segment.docs[i] else None) for i, p in enumerate(segment.paths))
        owner.update(pending)
        self.owner = {p: o for p, o in owner.items() if o is not None}
        self.docs, self.total = 0, 0
        for path in self.owner:
            length = self.doc(path).length
            self.docs, self.total = self.docs + (length > 0), self.total + length

    def doc(self, path: str) -> Doc:
        own = self.owner[path]
        return own if isinstance(own, Doc) else _checked(self.segments[own[0]].docs[own[1]])

    def paths(self) -> Iterable[str]:
        return self.owner.keys()

    def search(
        self, terms: list[str], shadow: Updates, accept: Callable[[str, Doc], bool], limit: int
    ) -> list[Hit]:
        """The `limit` best docs for `terms` (BM25), with `shadow` (unsaved changes) over the corpus."""
        docs, total = self._stats(shadow)
        if not docs or not terms:
            return []
        scores: dict[str, float] = {}
        for term in dict.fromkeys(terms):
            holders = self._holders(term, shadow)
            weight = idf(docs, len(holders))
            for path, (tf, length) in holders.items():
                scores[path] = scores.get(path, 0.0) + term_score(tf, length, total / docs, weight)
        ranked = ((s, p) for p, s in scores.items() if accept(p, self._current(p, shadow)))
        best = heapq.nsmallest(limit, ranked, key=lambda sp: (-sp[0], sp[1]))
        return [(p, s, self._current(p, shadow)) for s, p in best]

    def _stats(self, shadow: Updates) -> tuple[int, int]:
        docs, total = self.docs, self.total
        for path, doc in shadow.items():
            if path in self.owner:
                length = self.doc(path).length
                docs, total = docs - (length > 0), total - length
            if doc is not None:
                docs, total = docs + (doc.length > 0), total + doc.length
        return docs, total

    def _holders(self, term: str, shadow: Updates) -> dict[str, tuple[int, int]]:
        """Live docs holding `term`: path -> (tf, doc length)."""
        found: dict[str, tuple[int, int]] = {}
        for si, segment in enumerate(self.segments):
            for i, tf in segment.postings(term):
                path = segment.paths[i] if i < len(segment.paths) else ""
                if self.owner.get(path) == (si, i) and path not in shadow:
                    found[path] = (tf, _checked(segment.docs[i]).length)
        for path, doc in self.pending.items():
            if doc is not None and term in doc.counts and path not in shadow and self.owner.get(path) is doc:
                found[path] = (doc.counts[term], doc.length)
        for path, doc in shadow.items():
            if doc is not None and term in doc.counts:
                found[path] = (doc.counts[term], doc.length)
        return found

    def _current(self, path: str, shadow: Updates) -> Doc:
        return _checked(shadow[path]) if path in shadow else self.doc(path)


def _checked(doc: Doc | None) -> Doc:
    if doc is None:  # liveness excludes tombstones before this is reached
        raise AssertionError("a tombstone has no doc")
    return doc
