"""`search` finds words by their stems (docs/decisions/0167, 0168): through a fresh handle's persisted index
and a handle's unsaved writes, in stores whose segments were written before stemming (found without reading
their files), and in stores stemmed in another language than the process's (their files indexed again). On
local disk (the backend does not matter here)."""

from __future__ import annotations

import logging

import pytest

from flyteplugins_memory import MemoryStore, SearchHit
from flyteplugins_memory._journal import search_segments
from flyteplugins_memory._rules.search_binary import MAGIC, read_header
from flyteplugins_memory._rules.search_forms import encode_json_segment
from flyteplugins_memory._rules.search_stem import LANGUAGE_ENV

SEGMENTS = "meta/.journal/search/"
TEXTS = {
    "trips/lisbon.md": "Cheap flights to Lisbon in May",
    "trips/notes.md": "The flight was delayed twice",
    "campus.md": "The university library opens at nine",
    "habits.md": "She runs every morning before work",
}


def paths(hits: list[SearchHit]) -> set[str]:
    return {h.path for h in hits}


def written(key: str) -> MemoryStore:
    store = MemoryStore.create(key=key)
    for path, text in TEXTS.items():
        store.write_text(path, text)
    store.save()
    return store


def assert_stemmed_answers(store: MemoryStore) -> None:
    assert paths(store.search("flight")) == {"trips/lisbon.md", "trips/notes.md"}
    assert paths(store.search("FLIGHTS")) == {"trips/lisbon.md", "trips/notes.md"}
    assert paths(store.search("running")) == {"habits.md"}
    assert paths(store.search("universe")) == set()  # univers is not universiti
    assert paths(store.search("libraries")) == {"campus.md"}


def test_a_fresh_handle_finds_words_by_their_stems(local_backend, key, monkeypatch):
    monkeypatch.delenv(LANGUAGE_ENV, raising=False)
    written(key)
    fresh = MemoryStore.get_or_create(key=key)
    assert_stemmed_answers(fresh)
    (hit,) = [h for h in fresh.search("flight") if h.path == "trips/lisbon.md"]
    assert "flights" in hit.snippet
    segments = [d for n, d in local_backend.journal(key).items() if n.startswith(SEGMENTS)]
    assert segments and all(d.startswith(MAGIC) and read_header(d)[0]["stem"] == "english" for d in segments)


def test_unsaved_writes_and_the_transcript_are_searched_by_stems(local_backend, key):
    store = written(key)
    store.write_text("draft.md", "two more flights booked")
    store.append({"role": "user", "content": "any flights left?"})
    assert paths(store.search("flight", include_transcript=True)) == {
        "trips/lisbon.md",
        "trips/notes.md",
        "draft.md",
        "messages.json#0",
    }


def old_release_segments(monkeypatch) -> None:
    """Saves write segments as releases before 0167 did: words unstemmed, in the JSON form."""
    monkeypatch.setenv(LANGUAGE_ENV, "none")
    monkeypatch.setattr(search_segments, "encode_segment", encode_json_segment)  # never passes a language


def test_segments_written_before_stemming_are_searched_by_stems_without_reading_files(
    local_backend, key, monkeypatch, io_counter
):
    with monkeypatch.context() as old:
        old_release_segments(old)
        written(key)
    segments = [d for n, d in local_backend.journal(key).items() if n.startswith(SEGMENTS)]
    assert segments and all(d.startswith(b"{") for d in segments)
    fresh = MemoryStore.get_or_create(key=key)
    io_counter.reset()
    assert_stemmed_answers(fresh)
    assert not [n for n in io_counter.names("get") if n in TEXTS or "/blobs/" in n], io_counter.ops
    fresh.write_text("trips/porto.md", "flights to Porto")  # a save of this version merges the old segment
    fresh.save()
    again = MemoryStore.get_or_create(key=key)
    assert paths(again.search("flight")) == {"trips/lisbon.md", "trips/notes.md", "trips/porto.md"}
    assert paths(again.search("universe")) == set() and paths(again.search("running")) == {"habits.md"}


def test_a_store_stemmed_in_another_language_is_searched_in_this_one(local_backend, key, monkeypatch, caplog):
    monkeypatch.setenv(LANGUAGE_ENV, "german")
    store = MemoryStore.create(key=key)
    store.write_text("de.md", "Die Katzen schlafen")
    store.write_text("en.md", "Cheap flights")
    store.save()
    monkeypatch.setenv(LANGUAGE_ENV, "english")
    fresh = MemoryStore.get_or_create(key=key)
    with caplog.at_level(logging.WARNING):
        assert paths(fresh.search("flight")) == {"en.md"}  # german kept "flights": its files are read again
    assert "stemmed in german, not english" in caplog.text
    fresh.write_text("more.md", "one flight")
    fresh.save()  # drops the german segment from the index and writes the files' docs in english
    headers = [read_header(d)[0] for n, d in local_backend.journal(key).items() if n.startswith(SEGMENTS)]
    assert {"english"} <= {h["stem"] for h in headers}
    assert paths(MemoryStore.get_or_create(key=key).search("flight")) == {"en.md", "more.md"}


def test_an_unknown_language_is_refused_by_name_by_search_and_never_fails_a_save(local_backend, key, monkeypatch):
    store = written(key)
    monkeypatch.setenv(LANGUAGE_ENV, "klingon")
    with pytest.raises(ValueError, match=LANGUAGE_ENV):
        store.search("flight")
    store.write_text("trips/porto.md", "flights to Porto")
    store.save()  # the index is a cache: committed without its update
    monkeypatch.setenv(LANGUAGE_ENV, "english")
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("trips/porto.md") == "flights to Porto"
    assert paths(fresh.search("flight")) == {"trips/lisbon.md", "trips/notes.md", "trips/porto.md"}
