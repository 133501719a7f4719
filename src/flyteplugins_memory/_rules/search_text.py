"""Pure: what search sees of a file: its terms, its length, the text its snippets come from, and BM25.

A term is a word's stem in the search language (`search_stem`: "flights" and "flight" are one term), so
a doc's counts and a query's terms are made the same way (`terms`).

A file is text when its bytes are UTF-8 (as `_api.files.binary` decides); binary files are indexed as empty (they
never match, and are not counted in the corpus statistics). A JSON file is searched by its keys and
values, not by its punctuation and escapes. Only the first `INDEXED_CHARS` characters of a file are
tokenized, so one huge file cannot make every save that writes it slow; its snippets come from the first
`LEAD_CHARS` characters.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .search_stem import search_language, stem_counts, stems

#: Characters of a file that are tokenized.
INDEXED_CHARS = 64 * 1024
#: Characters of a file kept in the index for snippets (a snippet is cut from them).
LEAD_CHARS = 400
#: Characters around the first match shown in a snippet.
SNIPPET_CHARS = 160
#: BM25's parameters (the usual ones: Robertson et al., as Lucene and SQLite FTS5 use them).
K1 = 1.2
B = 0.75

_TOKEN = re.compile(r"\w+", re.UNICODE)
#: Han ideographs, kana and their compatibility forms: scripts written without spaces between words, so a
#: run of them is no word; each character is a token of its own (a query for 東京 then matches 東京タワー).
_CJK = re.compile(r"([\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f])")


#: Longer tokens are left out: nobody types them, and one of them would cost the index its length.
MAX_TOKEN = 64


@functools.cache
def _marks() -> dict[int, None]:
    """Nonspacing marks (Unicode category Mn) that NFKC leaves on their own, as a `str.translate` table that
    drops them: ``İ`` folds to ``i`` and U+0307, Arabic and Hebrew vowel points, ... They are no word
    characters, so they split a word in two (``istanbul`` with U+0307: ``i``, ``stanbul``). Built on first
    use (about 20 ms); `str.translate` is several times faster than a regex class of them."""
    return {c: None for c in range(0x30000) if unicodedata.category(chr(c)) == "Mn"}


def tokenize(text: str) -> list[str]:
    """Case-folded word tokens (letters, digits, underscore; any script) of at most `MAX_TOKEN` characters,
    in NFKC form (``cafe\u0301`` and ``café``, fullwidth and plain letters are one token), without nonspacing
    marks (`_marks`), CJK one per character."""
    folded = text.casefold()
    if not folded.isascii():  # most text is ASCII: no step changes it, and each costs time
        folded = _CJK.sub(r" \1 ", unicodedata.normalize("NFKC", folded).translate(_marks()))
    return [t for t in _TOKEN.findall(folded) if len(t) <= MAX_TOKEN]


def terms(text: str, language: str | None = None) -> list[str]:
    """The terms of `text`: its tokens (`tokenize`) stemmed in `language` (None: `search_language()`)."""
    return stems(tokenize(text), language or search_language())


@dataclass(frozen=True)
class Doc:
    """One file as the index holds it: the sha256 it describes, its token counts and length, what
    `get_meta` gives for it (`meta`: updated_at, updated_by, reason, bytes; `metadata`), a lead, and when
    the file expires (`expires`, seconds since the epoch, None: never) if `expiry_known` (a doc of a segment
    written before expiries were indexed does not know it: a search then looks the file up)."""

    sha256: str
    length: int
    counts: Mapping[str, int]
    meta: tuple[str, str, str, int] = ("", "", "", 0)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    lead: str = ""
    expires: float | None = None
    expiry_known: bool = False

    def encoded(self) -> list[Any]:
        return [self.sha256, self.length, list(self.meta), dict(self.metadata), self.lead, dict(self.counts)]

    @classmethod
    def decoded(cls, raw: Any) -> Doc:
        """A doc read from storage (untrusted: a malformed one raises ValueError or TypeError)."""
        sha, length, meta, metadata, lead, counts = raw
        updated_at, updated_by, reason, size = meta
        checks = (str, int, dict, str, dict)
        if not all(isinstance(v, t) for v, t in zip((sha, length, metadata, lead, counts), checks, strict=True)):
            raise ValueError("malformed search document")
        return cls(sha, length, counts, (str(updated_at), str(updated_by), str(reason), int(size)), metadata, lead)


def searchable_text(data: bytes) -> str | None:
    """The text search sees in a file's bytes; None for binary content."""
    try:
        text = data[: INDEXED_CHARS * 4].decode("utf-8")
    except UnicodeDecodeError:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return _json_words(text) or text


def _json_words(text: str) -> str | None:
    """Keys and scalar values of a JSON object or array, one per line (None if `text` is not one)."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return "\n".join(_scalars(value))


def _scalars(value: Any) -> Iterable[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                stack.append(inner)
                stack.append(str(key))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif item is not None:
            yield str(item)


def make_doc(
    sha256: str,
    data: bytes,
    meta: tuple[str, str, str, int],
    metadata: Mapping[str, Any],
    expires: float | None = None,
    language: str | None = None,
) -> Doc:
    """The index's doc for content `data` (binary: an empty doc that never matches), of a file that
    expires at `expires` (None: never), its terms stemmed in `language` (None: `search_language()`)."""
    text = searchable_text(data)
    if text is None:
        return Doc(sha256, 0, {}, meta, dict(metadata), "", expires, True)
    tokens = tokenize(text[:INDEXED_CHARS])
    counts = stem_counts(Counter(tokens), language or search_language())  # each distinct word stemmed once
    return Doc(sha256, len(tokens), counts, meta, dict(metadata), text[:LEAD_CHARS], expires, True)


def idf(docs: int, df: int) -> float:
    """BM25's inverse document frequency (the non-negative variant Lucene uses)."""
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def term_score(tf: int, length: int, avg_length: float, weight: float) -> float:
    """One term's BM25 contribution to a document holding it `tf` times."""
    norm = K1 * (1.0 - B + B * length / avg_length) if avg_length else K1
    return weight * tf * (K1 + 1.0) / (tf + norm)


def snippet(lead: str, terms: Iterable[str], language: str | None = None) -> str:
    """About `SNIPPET_CHARS` characters of `lead` around the first word whose term (its stem in `language`,
    None: `search_language()`) is a query term (else its start), on one line."""
    folded, origin = _folded(lead)
    found = _first_match(folded, set(terms), language or search_language())
    start = max(0, origin[found] - SNIPPET_CHARS // 4) if found is not None else 0
    cut = lead[start : start + SNIPPET_CHARS]
    text = " ".join(cut.split())
    return ("…" if start else "") + text + ("…" if start + SNIPPET_CHARS < len(lead) else "")


def _first_match(folded: str, wanted: set[str], language: str) -> int | None:
    """Where in `folded` the first word stemming to a `wanted` term starts (a CJK term: anywhere, its
    neighbours are word characters too); None if nowhere."""
    found = [m.start() for t in wanted if _CJK.fullmatch(t) and (m := re.search(re.escape(t), folded))]
    words = [(m.start(), m.group()) for m in _TOKEN.finditer(folded) if len(m.group()) <= MAX_TOKEN]
    stemmed = stems([w for _, w in words], language)
    found += [at for (at, _), stem in zip(words, stemmed, strict=True) if stem in wanted][:1]
    return min(found, default=None)


def _folded(text: str) -> tuple[str, list[int]]:
    """`text` folded as `tokenize` folds it, character by character, and for each character of the result
    the index of the character of `text` it came from (folding changes lengths: ``İ`` gives two, ``ß``
    two, a ligature several), so that a match in the folded text points into `text`."""
    pieces = [
        ch.casefold() if ch.isascii() else unicodedata.normalize("NFKC", ch.casefold()).translate(_marks())
        for ch in text
    ]
    return "".join(pieces), [i for i, piece in enumerate(pieces) for _ in piece]
