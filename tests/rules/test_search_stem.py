"""Search's stemmer (docs/decisions/0167, 0168): which words find each other and which must not, the
language setting, snippets around a stemmed match, and segments written before stemming answering for stems
exactly as stemmed ones."""

from __future__ import annotations

import pytest

from flyteplugins_memory._rules.search_binary import MAGIC, UNSTEMMED_MAGIC, read_header
from flyteplugins_memory._rules.search_forms import decode_segment, encode_json_segment, encode_segment
from flyteplugins_memory._rules.search_index import Corpus
from flyteplugins_memory._rules.search_restem import Restemmed, in_language
from flyteplugins_memory._rules.search_stem import LANGUAGE_ENV, search_language
from flyteplugins_memory._rules.search_text import make_doc, snippet, terms
from flyteplugins_memory.errors import InvalidArgument

META = ("2026-01-01T00:00:00Z", "me", "", 0)


def doc(text: str, language: str = "english"):
    return make_doc("0" * 64, text.encode(), META, {}, None, language)


def found(query: str, text: str, language: str = "english") -> bool:
    return any(t in doc(text, language).counts for t in terms(query, language))


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("flight", "Cheap flights to Lisbon"),
        ("flights", "one flight a day"),
        ("running", "she runs every morning"),
        ("runs", "a running total"),
        ("connection", "we connected the pipes"),
        ("studies", "a study of herons"),
        ("Argued", "they argue a lot"),
        ("deals", "a good deal"),
    ],
)
def test_words_find_their_other_forms(query, text):
    assert found(query, text)


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("universe", "the university library"),  # univers / universiti
        ("news", "a new car"),
        ("organ", "a charity organization"),  # organ / organ (organiz)
        ("generation", "a generous gift"),
        ("flight", "a flighty mood"),  # flight / flighti
        ("policy", "the police came"),
    ],
)
def test_words_that_only_look_alike_do_not_match(query, text):
    assert not found(query, text)


def test_without_stemming_only_the_word_itself_matches():
    assert not found("flight", "Cheap flights", "none") and found("flights", "Cheap flights", "none")
    assert doc("Cheap flights", "none").counts == {"cheap": 1, "flights": 1}


def test_other_languages_stem_their_own_words():
    assert found("Flüge", "ein Flug nach Berlin", "german") and not found("Flüge", "ein Flug nach Berlin", "english")
    assert found("katzen", "die Katze schläft", "german")
    assert found("maisons", "une maison bleue", "french")


def test_the_language_is_english_unless_the_environment_names_another(monkeypatch):
    monkeypatch.delenv(LANGUAGE_ENV, raising=False)
    assert search_language() == "english"
    monkeypatch.setenv(LANGUAGE_ENV, " German ")
    assert search_language() == "german" and terms("Katzen") == ["katz"]
    monkeypatch.setenv(LANGUAGE_ENV, "none")
    assert terms("Flights") == ["flights"]
    monkeypatch.setenv(LANGUAGE_ENV, "klingon")
    with pytest.raises(InvalidArgument, match=f"{LANGUAGE_ENV}='klingon'.*english"):
        search_language()


def test_a_doc_counts_stems_and_keeps_its_length_in_words():
    d = doc("Running runs; the runner ran")
    assert d.counts == {"run": 2, "the": 1, "runner": 1, "ran": 1} and d.length == 5


def test_a_snippet_starts_near_the_first_word_of_a_queried_stem():
    lead = "x " * 100 + "Cheap FLIGHTS to Lisbon"
    assert "FLIGHTS" in snippet(lead, terms("flight"), "english")
    assert snippet(lead, terms("flight"), "none").startswith("x x")  # flights is not flight unstemmed


def docs(language: str):
    texts = {"a.md": "cheap flights and flight deals", "b.md": "one flight", "c.md": "running runs", "d.md": "herons"}
    return {p: doc(t, language) for p, t in texts.items()}


def ranked(segment, query: str):
    hits = Corpus([segment], {}).search(terms(query, "english"), {}, lambda p, d: True, 10)
    return [(p, round(s, 9)) for p, s, _ in hits]


@pytest.mark.parametrize("form", ["json", "binary"])
def test_a_segment_written_before_stemming_answers_as_a_stemmed_one_of_the_same_files(form):
    words = docs("none")
    if form == "json":
        old = encode_json_segment(words, "old")
    else:  # the older magic: what releases before 0168 wrote
        old = UNSTEMMED_MAGIC + encode_segment(words, "old", "none")[len(MAGIC) :]
    segment = decode_segment(old)
    assert segment.stem is None
    view = in_language(segment, "english")
    assert isinstance(view, Restemmed) and in_language(segment, "english") is view  # stemmed once, cached
    stemmed = decode_segment(encode_segment(docs("english"), "new", "english"))
    for query in ("flight", "flights deal", "run", "heron", "nothing"):
        assert ranked(view, query) == ranked(stemmed, query)
    assert ranked(segment, "flight") != ranked(stemmed, "flight")  # read as it is, it misses "flights"
    merged = {p: d and dict(d.counts) for p, d in view.full_docs().items()}
    assert merged == {p: dict(d.counts) for p, d in docs("english").items()}


def test_new_segments_name_their_language_and_other_languages_are_not_read_as_this_one():
    data = encode_segment(docs("english"), "w", "english")
    assert data.startswith(MAGIC) and read_header(data)[0]["stem"] == "english"
    segment = decode_segment(data)
    assert segment.stem == "english" and in_language(segment, "english") is segment
    assert in_language(segment, "german") is None and in_language(segment, "none") is None
    unstemmed = decode_segment(encode_segment(docs("none"), "w", "none"))
    assert unstemmed.stem is None and in_language(unstemmed, "none") is unstemmed
