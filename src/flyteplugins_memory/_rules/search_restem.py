"""Pure: a segment read in the search language (docs/decisions/0168).

Segments written before stemming (every JSON segment, binary ones of the older magic) hold words as folded.
A word's stem is a function of the word alone, so such a segment answers for a stem exactly as a stemmed
segment of the same docs would: its postings for stem ``s`` are the postings of every word of its dictionary
that stems to ``s``, summed per doc; a merge stems its docs' counts the same way, and the merged segment is a
stemmed one. No file is read again. The dictionary is stemmed once per segment and language (cached on the
segment, which a handle caches across searches). A segment stemmed in another language cannot be turned into
this one's stems: `in_language` gives None, and the caller treats it as unreadable (its files are indexed).
"""

from __future__ import annotations

from collections.abc import Sequence

from .search_forms import Segment, Updates
from .search_stem import NO_STEMMING, stem_counts, stems
from .search_text import Doc


def in_language(segment: Segment, language: str) -> Segment | None:
    """`segment` as it answers queries of terms stemmed in `language`: itself when its terms are those,
    a `Restemmed` view of it when it holds unstemmed words, None when it cannot answer them."""
    stem = None if language == NO_STEMMING else language
    if segment.stem == stem:
        return segment
    if segment.stem is not None or stem is None:
        return None
    views: dict[str, Restemmed] = vars(segment).setdefault("_restemmed", {})
    if stem not in views:
        views[stem] = Restemmed(segment, stem)
    return views[stem]


class Restemmed(Segment):
    """An unstemmed segment answering for stems in `language` (see the module docstring)."""

    def __init__(self, inner: Segment, language: str):
        self.inner, self.stem = inner, language
        self.sha256 = inner.sha256
        self.paths, self.gone, self.lengths = inner.paths, inner.gone, inner.lengths
        words = list(inner.terms)
        groups: dict[str, list[str]] = {}
        for word, stem in zip(words, stems(words, language), strict=True):
            groups.setdefault(stem, []).append(word)
        #: each stem and the words of the segment's dictionary that stem to it
        self.groups = groups
        self.terms = dict.fromkeys(groups, "")
        self._decoded = {}

    def doc(self, i: int) -> Doc | None:
        return self.inner.doc(i)

    def postings(self, term: str) -> tuple[Sequence[int], Sequence[int]]:
        """The rows of docs holding a word that stems to `term`, and how many such words each holds
        (`DamagedSegment` of the inner segment if a word's postings are malformed)."""
        if term not in self._decoded:
            words = self.groups.get(term, [])
            if len(words) == 1:
                self._decoded[term] = self.inner.postings(words[0])
            else:
                summed: dict[int, int] = {}
                for word in words:
                    for row, tf in zip(*self.inner.postings(word), strict=True):
                        summed[row] = summed.get(row, 0) + tf
                rows = sorted(summed)
                self._decoded[term] = (rows, [summed[row] for row in rows])
        return self._decoded[term]

    def full_docs(self) -> Updates:
        """Every doc with its counts stemmed (`DamagedSegment` of the inner segment if any part is malformed)."""
        assert self.stem is not None  # a view exists only for a language that stems
        out: Updates = {}
        for path, doc in self.inner.full_docs().items():
            out[path] = doc and _with_counts(doc, stem_counts(doc.counts, self.stem))
        return out


def _with_counts(doc: Doc, counts: dict[str, int]) -> Doc:
    return Doc(doc.sha256, doc.length, counts, doc.meta, doc.metadata, doc.lead, doc.expires, doc.expiry_known)
