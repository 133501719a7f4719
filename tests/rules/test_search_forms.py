"""Search segments' two forms (docs/decisions/0155): the binary form a save writes and the JSON form older
releases wrote give the same docs, the same hits and the same scores, alone and mixed in one corpus; a
doc that does not know its file's expiry keeps not knowing it through a merge; a malformed binary segment
is refused with ValueError, or, where its damage shows only when a term's postings or a doc are decoded,
reported there as `DamagedSegment`. Pure: no store, no storage."""

from __future__ import annotations

import random
import re
from array import array
from collections.abc import Callable

import pytest

from flyteplugins_memory._rules.search_binary import MAGIC, read_header
from flyteplugins_memory._rules.search_forms import (
    BinarySegment,
    DamagedSegment,
    Segment,
    decode_segment,
    encode_json_segment,
    encode_segment,
)
from flyteplugins_memory._rules.search_index import Corpus
from flyteplugins_memory._rules.search_text import Doc, make_doc, tokenize
from segment_damage import rebuilt

WORDS = [f"w{i}" for i in range(60)] + ["café", "東京", "naïve"]


def docs(count: int, seed: int = 5, expires: bool = True) -> dict[str, Doc | None]:
    rng = random.Random(seed)
    out: dict[str, Doc | None] = {}
    for i in range(count):
        text = " ".join(rng.choices(WORDS, k=rng.randrange(1, 40)))
        meta = (f"2026-01-0{i % 9 + 1}", "agent", f"why {i}", len(text))
        when = (1_900_000_000.0 + i if i % 3 == 0 else None) if expires else None
        doc = make_doc(f"{i:064x}", text.encode(), meta, {"n": i} if i % 2 else {}, when)
        out[f"notes/{i:03d}.md"] = doc if expires else Doc(*_fields(doc)[:6])
    out["empty.bin"] = make_doc("f" * 64, b"\xff\xfe", ("", "", "", 2), {})
    return out


def _fields(doc: Doc) -> tuple:
    return (doc.sha256, doc.length, doc.counts, doc.meta, doc.metadata, doc.lead, doc.expires, doc.expiry_known)


def answers(corpus: Corpus, shadow: dict | None = None) -> list:
    out = []
    for query in ("w1 w2", "w7", "café naive", "東", "w59 w3 w44", "absent"):
        for accept, limit in ((lambda p, d: True, 10), (lambda p, d: p.endswith("7.md"), 3), (lambda p, d: True, 500)):
            out.append(
                [(p, s, _fields(d)[:6]) for p, s, d in corpus.search(tokenize(query), shadow or {}, accept, limit)]
            )
    return out


def test_both_forms_hold_the_same_docs_and_answer_alike():
    written = docs(120)
    binary, old = encode_segment(written, "w"), encode_json_segment(written, "w")
    assert binary.startswith(MAGIC) and old.startswith(b"{")
    assert len(binary) < len(old)
    new_segment, old_segment = decode_segment(binary), decode_segment(old)
    assert isinstance(new_segment, BinarySegment) and not isinstance(old_segment, BinarySegment)
    full = {p: _fields(d) if d else None for p, d in new_segment.full_docs().items()}
    assert full == {p: _fields(d) if d else None for p, d in old_segment.full_docs().items()}
    assert full == {p: _fields(d) if d else None for p, d in written.items()}  # counts, meta, labels, lead, expiry
    assert answers(Corpus([new_segment], {})) == answers(Corpus([old_segment], {}))
    assert encode_segment(written, "w") == binary  # deterministic: one content-addressed object


def test_a_corpus_of_old_and_new_segments_answers_as_one_of_new_ones():
    first, second = docs(90, seed=1), docs(60, seed=2)
    second.update({"notes/004.md": None, "notes/011.md": None})  # tombstones over the older segment
    pending = {"notes/020.md": None, "extra.md": make_doc("e" * 64, b"w7 w7 w1", ("", "", "", 8), {})}
    shadow = {"notes/030.md": None, "notes/031.md": make_doc("d" * 64, b"w2 w2 w2", ("", "", "", 8), {})}
    mixed = Corpus(
        [decode_segment(encode_json_segment(first, "w")), decode_segment(encode_segment(second, "w"))], pending
    )
    binary = Corpus([decode_segment(encode_segment(first, "w")), decode_segment(encode_segment(second, "w"))], pending)
    assert answers(mixed) == answers(binary) and answers(mixed, shadow) == answers(binary, shadow)
    assert sorted(mixed.paths()) == sorted(binary.paths()) and (mixed.docs, mixed.total) == (binary.docs, binary.total)
    assert "notes/004.md" not in mixed.owner and "notes/020.md" not in mixed.owner and "extra.md" in mixed.owner
    assert all(p != "notes/004.md" for p, _, _ in mixed.search(tokenize("w1 w2 w3 w4 w5"), {}, lambda p, d: True, 500))


def test_a_doc_merged_from_an_old_segment_keeps_not_knowing_its_expiry():
    unknown = decode_segment(encode_json_segment(docs(10, expires=False), "w")).full_docs()
    assert not any(d.expiry_known for d in unknown.values() if d and d.sha256 != "f" * 64)
    merged = {**unknown, **docs(5, seed=9)}  # newer docs (notes/000-004) know theirs
    segment = decode_segment(encode_segment(merged, "w"))
    known = {p: segment.doc(i).expiry_known for i, p in enumerate(segment.paths)}  # type: ignore[union-attr]
    assert {p for p, k in known.items() if not k} == {f"notes/{i:03d}.md" for i in range(5, 10)}
    assert segment.doc(segment.paths.index("notes/003.md")).expires == 1_900_000_003.0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b + b"x",  # a byte too many
        lambda b: b[: len(MAGIC)] + b"\xff\xff\xff\x00" + b[len(MAGIC) + 4 :],  # a header length past the end
        lambda b: b.replace(b'"ids":"B"', b'"ids":"Z"'),  # an unknown width
        lambda b: b.replace(b'"docs":', b'"docs":1'),  # more docs than columns
    ],
)
def test_a_malformed_binary_segment_is_refused(damage):
    good = encode_segment(docs(20), "w")
    assert decode_segment(good)
    with pytest.raises(ValueError, match="malformed search segment"):
        decode_segment(damage(good))


def test_segments_of_both_forms_are_segments():
    assert issubclass(BinarySegment, Segment)
    assert (
        decode_segment(encode_segment({}, "w")).paths == [] and decode_segment(encode_json_segment({}, "w")).paths == []
    )


def column(data: bytes, name: str, edit) -> bytes:
    """`data` with its column `name` edited (`edit(values)` changes the list of values in place)."""
    code = read_header(data)[0]["widths"][name]

    def changed(block: bytes) -> bytes:
        values = array(code, block)
        edit(values)
        return values.tobytes()

    return rebuilt(data, **{name: changed})


def _set(index: int, value) -> Callable[[array], None]:
    def edit(values: array) -> None:
        values[index] = value(values) if callable(value) else value

    return edit


#: Damage a hostile or buggy writer can leave in a segment whose bytes still match their sha256.
DAMAGE = {
    # the review's two: a doc row that is not JSON, and one whose sha256 is no string
    "doc row not JSON": lambda b: b.replace(b'["' + b"f" * 64, b'{"' + b"f" * 64, 1),
    "doc sha not a string": lambda b: b.replace(b'["' + b"f" * 64 + b'"', b'["' + b"f" * 64 + b"1", 1),
    "postings out of order": lambda b: column(b, "starts", _set(2, lambda v: v[-1])),
    "postings past the columns": lambda b: column(b, "starts", _set(2, lambda v: v[-1] + 3)),
    "a doc id out of range": lambda b: column(b, "ids", _set(0, 200)),
    "doc rows out of order": lambda b: column(b, "rows", _set(3, lambda v: v[5])),
    "truncated docs column": lambda b: rebuilt(b, docs=lambda block: block[:-5]),
    "truncated postings column": lambda b: rebuilt(b, tfs=lambda block: block[:-1]),
    "truncated lengths column": lambda b: rebuilt(b, len=lambda block: block[: len(block) // 2]),
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_binary_segment_is_refused_at_decode_or_named_where_its_damage_is_decoded(damage):
    """From the review: such a segment passed decode and escaped search as a bare ValueError. Decode
    checks shape only (docs/decisions/0161: parsing every doc row at open would cost a cold search ~60x);
    postings and docs are checked where decoded, and damage there is a `DamagedSegment` naming the segment,
    which `_handle.search_cache` and `_journal.search_segments` treat as unreadable (tests/journal/
    test_search_segment_damage.py: a store's search and save meet them)."""
    good = encode_segment(docs(20), "w")
    bad = damage(good)
    assert bad != good
    try:
        segment = decode_segment(bad)
    except ValueError as exc:
        assert "malformed search segment" in str(exc)
        return
    segment.sha256 = "a" * 64
    terms = tokenize(" ".join(WORDS))
    every_hit = lambda: Corpus([segment], {}).search(terms, {}, lambda p, d: True, 500)  # noqa: E731
    every_doc = lambda: [segment.doc(i) for i in range(len(segment.paths))]  # noqa: E731
    raised = [_raised(read) for read in (every_hit, every_doc, segment.full_docs)]  # full_docs: what a merge reads
    assert raised[2] is not None and (raised[0] or raised[1])  # the damage shows where decoded, and only so:
    assert all(e is None or (type(e) is DamagedSegment and e.segment is segment) for e in raised), raised
    assert "a" * 64 in str(raised[2])


def _raised(read: Callable[[], object]) -> Exception | None:
    try:
        read()
    except Exception as exc:
        return exc
    return None


def test_a_damaged_json_segment_is_named_where_its_postings_are_decoded():
    written = docs(20)
    # a row without its frequency, a row out of range, no number
    for damage in ('"w1":"0 1 2"', '"w1":"0 1 99 1"', '"w1":"0 x"'):
        bad = re.sub(rb'"w1":"[0-9 ]*"', damage.encode(), encode_json_segment(written, "w"))
        segment = decode_segment(bad)
        with pytest.raises(DamagedSegment):
            Corpus([segment], {}).search(["w1"], {}, lambda p, d: True, 500)
        with pytest.raises(DamagedSegment):
            segment.full_docs()
