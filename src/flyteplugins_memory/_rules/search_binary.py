"""Pure: the binary form of a search segment (docs/decisions/0155-search-segments-in-a-binary-columnar-form.md).

A cold search parses only what a query needs. The JSON form (`search_index.encode_json_segment`) made a first
search parse every posting string and every doc's lead; this form is columns of raw little-endian arrays that
`array.frombytes` reads at memory speed, decoded lazily:

- at open: the paths (one ``\\n``-joined string: paths hold no control characters), the tombstones, the
  docs' token counts, and the term dictionary (one ``\\n``-joined string: a term is a run of word characters);
- per queried term, on first use: its rows and term frequencies, two slices of the postings columns;
- per hit, on first use: its doc (sha256, meta, metadata, lead, expiry), one small JSON array of its own.

Opening checks the columns' shape only; a term's postings and a doc's row are checked when decoded (a
row number the segment does not hold, offsets out of order, a row that is not the doc it should be raise
ValueError then: docs/decisions/0161). Checking every row at open would cost a cold search ~60x its parse.

Layout: ``MAGIC``, a little-endian u32 header length, the header (JSON: the writer, the counts, the byte
width of each column, the byte length of each block, and ``stem``: the language its terms are stems in),
then the blocks in `BLOCKS` order. The bytes are deterministic (equal docs give equal bytes, hence one
content-addressed object).
"""

from __future__ import annotations

import json
import math
import struct
import sys
from array import array
from collections.abc import Mapping
from typing import Any

from .search_text import Doc

#: What a binary segment starts with (a JSON segment starts with ``{``): its terms are stems, in the language
#: its header's ``stem`` names (null: words as folded). A new magic, not only a header field, because releases
#: before decision 0168 ignore header fields they do not know and would look unstemmed words up among stems:
#: they refuse this magic as malformed instead, and index the segment's files (correct, slower).
MAGIC = b"FMSEG\x00\x05\n"
#: What binary segments of releases before decision 0168 start with: their terms are words as folded.
UNSTEMMED_MAGIC = b"FMSEG\x00\x04\n"
#: The blocks after the header, in order: (name, array type code or "" for bytes).
BLOCKS = ("paths", "gone", "len", "rows", "docs", "terms", "starts", "ids", "tfs")
_BIG_ENDIAN = sys.byteorder == "big"


def _packed(values: list[int], code: str) -> bytes:
    numbers = array(code, values)
    if _BIG_ENDIAN:
        numbers.byteswap()
    return numbers.tobytes()


def _unpacked(data: bytes | memoryview, code: str) -> array:
    numbers = array(code)
    if len(data) % numbers.itemsize:
        raise ValueError(f"malformed search segment: a column of {len(data)} bytes is not of {code!r} items")
    numbers.frombytes(data)
    if _BIG_ENDIAN:
        numbers.byteswap()
    return numbers


def _width(largest: int) -> str:
    """The smallest unsigned array type code that holds `largest`."""
    return next(code for code in ("B", "H", "I", "Q") if largest < 1 << (8 * array(code).itemsize))


def doc_row(doc: Doc) -> list[Any]:
    """A doc without its token counts, as the JSON array this form keeps per doc."""
    updated_at, updated_by, reason, size = doc.meta
    expires = doc.expires if doc.expiry_known else False  # false: unknown (merged from an older segment)
    return [doc.sha256, updated_at, updated_by, reason, size, dict(doc.metadata), doc.lead, expires]


def encode(paths: list[str], rows: list[Doc], gone: list[int], writer: str, stem: str | None) -> bytes:
    """The binary segment of docs `rows` (sorted by `paths`; tombstones at rows `gone`), whose terms are
    stems in language `stem` (None: unstemmed words)."""
    postings: dict[str, tuple[list[int], list[int]]] = {}
    for i, doc in enumerate(rows):
        for term, tf in doc.counts.items():
            found = postings.setdefault(term, ([], []))
            found[0].append(i)
            found[1].append(tf)
    terms = sorted(postings)
    starts, ids, tfs = [0], [], []
    for term in terms:
        ids += postings[term][0]
        tfs += postings[term][1]
        starts.append(len(ids))
    encoded_rows = [json.dumps(doc_row(d), ensure_ascii=False, separators=(",", ":")).encode() for d in rows]
    offsets = [0]
    for row in encoded_rows:
        offsets.append(offsets[-1] + len(row))
    widths = {
        "gone": "I", "len": _width(max((d.length for d in rows), default=0)), "rows": _width(offsets[-1]),
        "starts": _width(len(ids)), "ids": _width(len(rows)), "tfs": _width(max(tfs, default=0)),
    }  # fmt: skip
    blocks = {
        "paths": "\n".join(paths).encode(), "gone": _packed(gone, widths["gone"]),
        "len": _packed([d.length for d in rows], widths["len"]), "rows": _packed(offsets, widths["rows"]),
        "docs": b"".join(encoded_rows), "terms": "\n".join(terms).encode(),
        "starts": _packed(starts, widths["starts"]), "ids": _packed(ids, widths["ids"]),
        "tfs": _packed(tfs, widths["tfs"]),
    }  # fmt: skip
    header = {
        "format": 2, "writer": writer, "docs": len(rows), "terms": len(terms), "widths": widths,
        "bytes": [len(blocks[name]) for name in BLOCKS], "stem": stem,
    }  # fmt: skip
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + b"".join(blocks[name] for name in BLOCKS)


def read_header(data: bytes) -> tuple[dict[str, Any], int]:
    """A binary segment's header and the offset of its first block (untrusted: raises ValueError,
    TypeError, KeyError or struct.error when malformed)."""
    (size,) = struct.unpack_from("<I", data, len(MAGIC))  # both magics are of one length
    start = len(MAGIC) + 4
    header = json.loads(data[start : start + size])
    if not isinstance(header, dict):
        raise ValueError("malformed search segment: a header that is not an object")
    return header, start + size


class BinaryColumns:
    """A binary segment's columns, checked for shape; postings and docs decoded on first use."""

    def __init__(self, data: bytes):
        view = memoryview(data)
        header, at = read_header(data)
        widths, lengths = header["widths"], header["bytes"]
        if not isinstance(widths, dict) or not isinstance(lengths, list) or len(lengths) != len(BLOCKS):
            raise ValueError("malformed search segment: a header without block lengths")
        if not all(isinstance(n, int) and n >= 0 for n in lengths) or at + sum(lengths) != len(data):
            raise ValueError("malformed search segment: blocks that do not add up to its size")
        blocks: dict[str, memoryview] = {}
        for name, length in zip(BLOCKS, lengths, strict=True):
            blocks[name], at = view[at : at + length], at + length
        n = header["docs"]
        self.paths: list[str] = str(blocks["paths"], "utf-8").split("\n") if n else []
        self.gone = set(_unpacked(blocks["gone"], _code(widths, "gone")))
        self.lengths = _unpacked(blocks["len"], _code(widths, "len"))
        self._offsets = _unpacked(blocks["rows"], _code(widths, "rows"))
        self._docs = bytes(blocks["docs"])
        terms = str(blocks["terms"], "utf-8").split("\n") if header["terms"] else []
        self.terms = dict(zip(terms, range(len(terms)), strict=True))
        self._starts = _unpacked(blocks["starts"], _code(widths, "starts"))
        self._ids, self._tfs = blocks["ids"], blocks["tfs"]
        self._id_code, self._tf_code = _code(widths, "ids"), _code(widths, "tfs")
        self._check(n, len(terms))
        #: the language its terms are stems in (None: unstemmed words, as every segment of the older magic)
        self.stem = _stem_of(header) if data.startswith(MAGIC) else None

    def _check(self, n: int, terms: int) -> None:
        if not (len(self.paths) == len(self.lengths) == n and len(self._offsets) == n + 1):
            raise ValueError("malformed search segment: columns of different lengths")
        if len(self._starts) != terms + 1 or len(self.terms) != terms:
            raise ValueError("malformed search segment: a term dictionary of another length")
        sizes = (array(self._id_code).itemsize, array(self._tf_code).itemsize)
        postings = self._starts[-1]
        if len(self._ids) != postings * sizes[0] or len(self._tfs) != postings * sizes[1]:
            raise ValueError("malformed search segment: postings of another length")
        if self._offsets[-1] != len(self._docs) or not all(g < n for g in self.gone):
            raise ValueError("malformed search segment: rows or tombstones out of range")

    def postings(self, term: str) -> tuple[array, array]:
        """Rows holding `term` and how often, checked: raises ValueError if they run out of the columns or
        name a row the segment does not hold (the slice's own max, at C speed: only the queried terms pay)."""
        t = self.terms.get(term)
        if t is None:
            return array("I"), array("I")
        lo, hi = self._starts[t], self._starts[t + 1]
        if not 0 <= lo <= hi <= self._starts[-1]:
            raise ValueError(f"malformed search segment: postings of term {term!r} out of order")
        ids = _unpacked(_slice(self._ids, self._id_code, lo, hi), self._id_code)
        if ids and max(ids) >= len(self.paths):
            raise ValueError(f"malformed search segment: postings of term {term!r} name a row it does not hold")
        return ids, _unpacked(_slice(self._tfs, self._tf_code, lo, hi), self._tf_code)

    def doc(self, i: int) -> Doc:
        """Doc `i` without its token counts (its row parsed and checked here, not at open: raises ValueError
        or RecursionError when malformed)."""
        lo, hi = self._offsets[i], self._offsets[i + 1]
        if lo >= hi:
            raise ValueError(f"malformed search segment: doc {i} has no row")
        return _doc(json.loads(self._docs[lo:hi]), self.lengths[i])


def _slice(block: memoryview, code: str, lo: int, hi: int) -> memoryview:
    size = array(code).itemsize
    return block[lo * size : hi * size]


def _stem_of(header: Mapping[str, Any]) -> str | None:
    stem = header.get("stem")
    if stem is not None and not isinstance(stem, str):
        raise ValueError(f"malformed search segment: a stemming language {stem!r} that is not a name")
    return stem


def _code(widths: Mapping[str, Any], name: str) -> str:
    code = widths.get(name)
    if code not in ("B", "H", "I", "Q"):
        raise ValueError(f"malformed search segment: column {name} of width {code!r}")
    return str(code)


def _doc(raw: Any, length: int) -> Doc:
    try:
        sha, updated_at, updated_by, reason, size, metadata, lead, expires = raw
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed search segment: a doc that is not one: {exc}") from exc
    if not all(isinstance(t, str) for t in (sha, updated_at, updated_by, reason, lead)) or type(size) is not int:
        raise ValueError("malformed search segment: a doc of unexpected types")
    expiry: float | None = None
    if isinstance(expires, int | float) and not isinstance(expires, bool) and math.isfinite(expires):
        expiry = float(expires)
    elif expires is not None and expires is not False:
        raise ValueError("malformed search segment: an expiry that is not a number")
    meta = (updated_at, updated_by, reason, size)
    metadata = metadata if isinstance(metadata, dict) else {}
    return Doc(sha, length, {}, meta, metadata, lead, expiry, expires is not False)
