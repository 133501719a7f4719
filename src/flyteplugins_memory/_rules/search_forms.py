"""Pure: a search segment's two forms, parsed (see `search_index` for what segments are).

Segments written before docs/decisions/0155 are JSON: per-doc columns, and per term a posting string
``"i tf i tf ..."`` decoded only when a query asks for that term. New segments are binary (`search_binary`):
postings and docs are raw columns decoded per queried term and per hit. Both are read; only the binary form
is written (`encode_json_segment` stays to test that the JSON form is still read).

Opening a segment checks its shape; what is decoded later (a term's postings, a hit's doc) is checked when
decoded, and damage found then raises `DamagedSegment` naming the segment: its caller treats the segment as
unreadable, as one missing or corrupt (docs/decisions/0161).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from typing import Any

from .search_binary import MAGIC, UNSTEMMED_MAGIC, BinaryColumns
from .search_binary import encode as binary_segment
from .search_stem import NO_STEMMING, search_language
from .search_text import Doc

#: Version of the ``ext["search"]`` map and of segments (a reader ignores an index of another version;
#: 1, with docs inline in the records, and 2, tokenized without NFKC and CJK characters, were never
#: released). The tokenizer is part of the format: a query's tokens must be made as the index's were; so is the
#: stemmer, which each binary segment names (`Segment.stem`, docs/decisions/0168: a segment of unstemmed words
#: is read as a stemmed one, `search_restem`). Both segment forms are of this version: they differ in encoding.
VERSION = 3

Updates = dict[str, Doc | None]
#: What decoding a malformed part of a segment raises (a hostile or buggy writer's bytes still match their sha256).
_MALFORMED = (KeyError, TypeError, ValueError, IndexError, RecursionError, AttributeError, struct.error)


class DamagedSegment(ValueError):
    """A segment that opened but whose postings or a doc turned out malformed when a query or a merge
    decoded them. Never for a user: a search reads the segment's files instead (`_handle.search_cache`),
    a save's merge drops the segment from the index (`_journal.search_segments`)."""

    def __init__(self, segment: Segment, detail: str):
        super().__init__(f"search segment {segment.sha256 or '(unnamed)'} is malformed: {detail}")
        self.segment = segment


class Segment:
    """One immutable segment, parsed. Columns, not one object per doc: lists of strings are not tracked by
    Python's cycle collector, so parsing 10,000 docs does not trigger collections over the whole heap."""

    #: the sha256 the index names it by (set by whoever read it from storage; None: not read from there)
    sha256: str | None = None
    #: the language its terms are stems in; None: words as folded (every JSON segment, docs/decisions/0168)
    stem: str | None = None

    def __init__(self, columns: dict[str, Any]):
        self.paths: list[str] = columns["paths"]
        self.gone: set[int] = set(columns["gone"])
        self.lengths: Sequence[int] = _numbers(columns["len"])
        self.sizes: list[int] = _numbers(columns["size"])
        self._columns = columns
        self.terms: dict[str, str] = columns["terms"]
        #: when each doc's file expires (None: never); absent from segments written before it was indexed
        self.expires: list[float | None] | None = columns.get("exp")
        self._decoded: dict[str, tuple[Sequence[int], Sequence[int]]] = {}

    def doc(self, i: int) -> Doc | None:
        """Doc `i` without its token counts (None: a tombstone); `DamagedSegment` if its row is malformed."""
        if i in self.gone:
            return None
        try:
            return self._doc(i)
        except _MALFORMED as exc:
            raise DamagedSegment(self, f"doc {i}: {exc}") from exc

    def _doc(self, i: int) -> Doc:
        c = self._columns
        meta = (c["at"][i], c["by"][i], c["why"][i], self.sizes[i])
        metadata = c["md"].get(str(i), {})
        metadata = metadata if isinstance(metadata, dict) else {}
        expires, known = (self.expires[i], True) if self.expires is not None else (None, False)
        return Doc(c["sha"][i], self.lengths[i], {}, meta, metadata, c["lead"][i], expires, known)

    def postings(self, term: str) -> tuple[Sequence[int], Sequence[int]]:
        """Docs holding `term` and how often (decoded and checked on first use: every row one the segment
        holds, as many frequencies as rows; else `DamagedSegment`)."""
        if term not in self._decoded:
            try:
                self._decoded[term] = self._postings(term)
            except _MALFORMED as exc:
                raise DamagedSegment(self, f"postings of {term!r}: {exc}") from exc
        return self._decoded[term]

    def _postings(self, term: str) -> tuple[Sequence[int], Sequence[int]]:
        numbers = _numbers(self.terms.get(term, ""))
        rows, tfs = numbers[::2], numbers[1::2]
        if len(rows) != len(tfs) or (rows and not 0 <= min(rows) <= max(rows) < len(self.paths)):
            raise ValueError("rows out of range, or a row without its frequency")
        return rows, tfs

    def full_docs(self) -> Updates:
        """Every doc with its token counts (to merge segments; `DamagedSegment` if any part is malformed)."""
        counts: list[dict[str, int]] = [{} for _ in self.paths]
        for term in self.terms:
            for i, tf in zip(*self.postings(term), strict=True):
                counts[i][term] = tf
        out: Updates = {}
        for i, path in enumerate(self.paths):
            doc = self.doc(i)
            out[path] = _with_counts(doc, counts[i]) if doc else None
        return out


class BinarySegment(Segment):
    """A segment of the binary form (`search_binary`): docs and postings decoded on first use."""

    def __init__(self, data: bytes):
        self._binary = BinaryColumns(data)
        self.paths, self.gone, self.lengths = self._binary.paths, self._binary.gone, self._binary.lengths
        self.terms = self._binary.terms  # type: ignore[assignment]  # term -> its index, not a posting string
        self.stem = self._binary.stem
        self._decoded = {}

    def _doc(self, i: int) -> Doc:
        return self._binary.doc(i)

    def _postings(self, term: str) -> tuple[Sequence[int], Sequence[int]]:
        return self._binary.postings(term)


def _numbers(text: str) -> list[int]:
    return [int(n) for n in text.split()]


def _with_counts(doc: Doc, counts: dict[str, int]) -> Doc:
    return Doc(doc.sha256, doc.length, counts, doc.meta, doc.metadata, doc.lead, doc.expires, doc.expiry_known)


def encode_segment(docs: Updates, writer: str, language: str | None = None) -> bytes:
    """A segment's bytes, in the binary form (deterministic: equal docs give equal bytes, hence one object),
    of docs whose terms are stems in `language` (None: `search_language()`), as its header says."""
    paths = sorted(docs)
    gone = [i for i, p in enumerate(paths) if docs[p] is None]
    stem = language or search_language()
    return binary_segment(paths, [docs[p] or _GONE for p in paths], gone, writer, None if stem == NO_STEMMING else stem)


def encode_json_segment(docs: Updates, writer: str) -> bytes:
    """A segment's bytes in the JSON form releases before the binary one wrote (kept to test that they
    are still read)."""
    paths = sorted(docs)
    rows = [docs[p] or _GONE for p in paths]
    postings: dict[str, list[int]] = {}
    for i, doc in enumerate(rows):
        for term, tf in doc.counts.items():
            postings.setdefault(term, []).extend((i, tf))
    body = {
        "format": 1, "v": VERSION, "writer": writer, "paths": paths,
        "gone": [i for i, p in enumerate(paths) if docs[p] is None],
        "sha": [d.sha256 for d in rows], "len": " ".join(str(d.length) for d in rows),
        "at": [d.meta[0] for d in rows], "by": [d.meta[1] for d in rows], "why": [d.meta[2] for d in rows],
        "size": " ".join(str(d.meta[3]) for d in rows),
        "md": {str(i): dict(d.metadata) for i, d in enumerate(rows) if d.metadata},
        "lead": [d.lead for d in rows], "terms": {t: " ".join(map(str, postings[t])) for t in sorted(postings)},
    }  # fmt: skip
    if all(d.expiry_known for d in rows):  # a doc merged from an older segment does not know it
        body["exp"] = [d.expires for d in rows]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


_GONE = Doc("", 0, {}, expiry_known=True)
_COLUMNS = {"paths": list, "gone": list, "sha": list, "len": str, "at": list, "by": list, "why": list}
_COLUMNS |= {"size": str, "md": dict, "lead": list, "terms": dict}


def decode_segment(data: bytes) -> Segment:
    """Parse a segment of either form (untrusted: a malformed one raises ValueError)."""
    if data.startswith((MAGIC, UNSTEMMED_MAGIC)):
        try:
            return BinarySegment(data)
        except _MALFORMED as exc:
            detail = str(exc).removeprefix("malformed search segment: ")
            raise ValueError(f"malformed search segment: {detail}") from exc
    try:
        body = json.loads(data)
        if body.get("v") != VERSION or not all(isinstance(body[k], t) for k, t in _COLUMNS.items()):
            raise ValueError("unexpected columns")
        segment = Segment(body)
    except (KeyError, TypeError, ValueError, RecursionError, AttributeError) as exc:
        raise ValueError(f"malformed search segment: {exc}") from exc
    n = len(segment.paths)
    if any(len(body[k]) != n for k in ("sha", "at", "by", "why", "lead")) or {
        len(segment.lengths),
        len(segment.sizes),
    } != {n}:
        raise ValueError("malformed search segment: columns of different lengths")
    columns = (segment.paths, body["sha"], body["at"], body["by"], body["why"], body["lead"], body["terms"].values())
    if not set().union(*(map(type, c) for c in columns)) <= {str}:  # map(type): C speed over 10,000s of values
        raise ValueError("malformed search segment: a value that is not a string")
    if not all(isinstance(i, int) and 0 <= i < n for i in segment.gone):
        raise ValueError("malformed search segment: tombstones out of range")
    if segment.expires is not None and not _expiries(segment.expires, n):
        raise ValueError("malformed search segment: expiries that are not numbers")
    return segment


def _expiries(values: object, n: int) -> bool:
    return (
        isinstance(values, list)
        and len(values) == n
        and all(
            v is None or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)) for v in values
        )
    )
