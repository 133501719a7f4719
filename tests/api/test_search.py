"""Search (`store.search`): BM25 ranking, filters, snippets, the transcript, unsaved writes, and the index
persisted with the store: incremental, merged under concurrent saves, read by a fresh handle in a few
requests, never trusted over the files (stores without it, a missing or corrupt segment, older writers),
collected by gc() only once no kept state names it. On local disk and moto S3."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from flyte.ai.agents import MemoryStore as UpstreamMemoryStore

from flyteplugins_memory import InvalidArgument, InvalidMetadata, InvalidPath, MemoryStore, SearchHit
from flyteplugins_memory._rules.search_index import EXT_KEY, MAX_SEGMENTS, decode_segment, read_ext
from released import ISSUE_9_RELEASE, released_source, run_released

SEGMENTS = "meta/.journal/search/"


def paths(hits: list[SearchHit]) -> list[str]:
    return [h.path for h in hits]


def segments(backend, key: str) -> dict[str, bytes]:
    """The search segments in the store's journal, read through the backend's own filesystem."""
    return {n: d for n, d in backend.journal(key).items() if n.startswith(SEGMENTS)}


def index_of(store: MemoryStore):
    return read_ext(store._checkout.working_copy.base.ext)


def filler(i: int) -> str:
    """About 1 KiB of common words."""
    return f"note {i} " + " ".join(f"common{j % 40}" for j in range(150))


def test_ranking_snippets_json_binary_and_meta(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("notes/a.md", "the weather today is sunny and warm, a good day for a walk")
    store.write_text("notes/b.md", "weather report: rain. The zeppelin landed in the rain at noon.", actor="alice")
    store.write_text("notes/c.md", "nothing to see here, only the weather")
    store.write_json("facts.json", {"city": "Lisbon", "tags": ["zeppelin", "harbour"], "n": 3})
    store.write_bytes("image.png", b"\x89PNG\r\n\x1a\n\xff\xfe zeppelin \xff")
    store.save()
    fresh = MemoryStore.get_or_create(key=key)
    hits = fresh.search("zeppelin weather")
    assert paths(hits)[0] == "notes/b.md"  # the rare term and the common one, twice
    assert set(paths(hits)) == {"notes/a.md", "notes/b.md", "notes/c.md", "facts.json"}  # binary skipped
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True) and hits[-1].score > 0
    assert "zeppelin landed" in hits[0].snippet
    assert hits[0].meta == fresh.get_meta("notes/b.md")
    assert hits[0].meta.updated_by == "alice"
    json_hit = fresh.search("lisbon")
    assert paths(json_hit) == ["facts.json"] and "Lisbon" in json_hit[0].snippet
    assert fresh.search("city") and fresh.search("PNG") == []
    assert fresh.search("") == [] and fresh.search("absent-term") == []


def test_prefix_where_and_limit(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("users/alice/a.md", "alpha memo", metadata={"kind": "memo", "n": 1})
    store.write_text("users/alice/b.md", "alpha alpha note", metadata={"kind": "note"})
    store.write_text("users/alicea/c.md", "alpha", metadata={"kind": "memo"})
    store.write_text("users/bob/d.md", "alpha beta", metadata={"kind": "memo", "n": 1.0})
    store.save()
    fresh = MemoryStore.get_or_create(key=key)
    assert set(paths(fresh.search("alpha", prefix="users/alice"))) == {"users/alice/a.md", "users/alice/b.md"}
    assert set(paths(fresh.search("alpha", where={"kind": "memo"}))) == {
        "users/alice/a.md",
        "users/alicea/c.md",
        "users/bob/d.md",
    }
    assert set(paths(fresh.search("alpha", where={"n": 1}))) == {"users/alice/a.md", "users/bob/d.md"}
    assert paths(fresh.search("alpha", "users", 1, {"kind": "memo"})) == ["users/alicea/c.md"]  # shortest
    assert len(fresh.search("alpha", limit=2)) == 2 and len(fresh.search("alpha")) == 4


def test_bad_input_is_refused_with_typed_errors(local_backend, key):
    store = MemoryStore.create(key=key)
    for bad in (b"bytes", None, 3, "x" * 5000):
        with pytest.raises(InvalidArgument):
            store.search(bad)  # type: ignore[arg-type]
    for limit in (0, -1, 1.5, True, "3"):
        with pytest.raises(InvalidArgument):
            store.search("a", limit=limit)  # type: ignore[arg-type]
    for prefix in ("../up", "/abs"):
        with pytest.raises(InvalidPath):
            store.search("a", prefix=prefix)
    with pytest.raises(InvalidMetadata):
        store.search("a", where={"k": [1]})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgument):
        store.search("a", include_transcript="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.search("a", embed="model")  # type: ignore[arg-type]
    store.write_text("a.md", "a b")
    with pytest.raises(InvalidArgument):
        store.search("a", embed=lambda texts: [[1.0]])  # one vector for two texts
    with pytest.raises(InvalidArgument):
        store.search("a", embed=lambda texts: [["x"] for _ in texts])


def test_transcript_is_searched_only_when_asked(local_backend, key):
    store = MemoryStore.create(key=key)
    store.append({"role": "user", "content": "remember the kumquat"})
    store.append({"role": "assistant", "content": [{"type": "text", "text": "kumquat noted"}]})
    store.write_text("fruit.md", "apples")
    assert store.search("kumquat") == []
    hits = store.search("kumquat", include_transcript=True)
    assert sorted(paths(hits)) == ["messages.json#0", "messages.json#1"] and all(h.meta is None for h in hits)
    with pytest.raises(InvalidArgument, match="include_transcript"):  # was [] (review12: silently dropped)
        store.search("kumquat", prefix="fruit", include_transcript=True)


def test_unsaved_writes_deletes_and_overwrites(durable_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("a.md", "old words about otters")
    store.write_text("b.md", "otters again")
    store.save()
    store.write_text("a.md", "new words about beavers")  # unsaved: searched as the handle sees it
    store.delete("b.md")
    store.write_text("c.md", "more beavers")
    assert store.search("otters") == [] and set(paths(store.search("beavers"))) == {"a.md", "c.md"}
    assert set(paths(MemoryStore.get_or_create(key=key).search("otters"))) == {"a.md", "b.md"}  # not saved yet
    store.save()
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.search("otters") == [] and set(paths(fresh.search("beavers"))) == {"a.md", "c.md"}
    assert index_of(fresh).seq == fresh._checkout.working_copy.base.seq  # exact: no file was read to answer


def test_concurrent_saves_merge_their_index_updates(durable_backend, key):
    MemoryStore.create(key=key).save()
    one, two = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    one.write_text("one.md", "written by the first handle: walrus")
    two.write_text("two.md", "written by the second handle: narwhal")

    async def both() -> None:
        await asyncio.gather(one.save.aio(), two.save.aio())

    asyncio.run(both())
    fresh = MemoryStore.get_or_create(key=key)
    assert paths(fresh.search("walrus")) == ["one.md"] and paths(fresh.search("narwhal")) == ["two.md"]
    assert set(paths(fresh.search("handle"))) == {"one.md", "two.md"}
    assert index_of(fresh).seq == fresh._checkout.working_copy.base.seq


def test_a_fresh_open_searches_from_the_index_in_a_few_requests(durable_backend, key, io_counter):
    store = MemoryStore.create(key=key)
    for i in range(32):
        store.write_text(f"files/{i:03d}.md", filler(i) + (" needle" if i == 7 else ""))
        if i % 8 == 7:
            store.save()  # several saves: a segment each, the newest merge
    assert segments(durable_backend, key) and len(index_of(store).segments) <= MAX_SEGMENTS
    records = [d for n, d in durable_backend.journal(key).items() if "/log/" in n or "/checkpoints/" in n]
    assert records and not [d for d in records if b"needle" in d]  # no content inline in records
    fresh = MemoryStore.get_or_create(key=key)
    io_counter.reset()
    assert paths(fresh.search("needle")) == ["files/007.md"]
    reads = io_counter.names("get")
    assert reads and all(n.startswith(SEGMENTS) for n in reads) and len(reads) <= MAX_SEGMENTS, io_counter.ops
    io_counter.reset()
    assert paths(fresh.search("note 12"))[0] == "files/012.md"
    assert io_counter.count() == 0  # warm


def test_a_one_file_save_adds_index_bytes_for_that_file_only(durable_backend, key, io_counter):
    store = MemoryStore.create(key=key)
    for i in range(20):
        store.write_text(f"files/{i:03d}.md", filler(i))
    store.save()
    before = segments(durable_backend, key)
    handle = MemoryStore.get_or_create(key=key)
    handle.write_text("one.md", "a small new note")
    io_counter.reset()
    handle.save()
    assert len([n for n in io_counter.names("put") if n.startswith(SEGMENTS)]) == 1  # one small segment
    assert not [n for n in io_counter.names("get") if n.startswith(SEGMENTS)]  # nothing read to merge
    added = {n: d for n, d in segments(durable_backend, key).items() if n not in before}
    assert [decode_segment(d).paths for d in added.values()] == [["one.md"]]
    assert sum(map(len, added.values())) < 1024 and len(index_of(handle).segments) == 2


def test_a_store_upstream_wrote_is_searchable(durable_backend, key):
    theirs = UpstreamMemoryStore.get_or_create(key=key)
    theirs.write_text("notes/upstream.md", "written by upstream about pelicans")
    theirs.write_text("notes/other.md", "nothing")
    theirs.save()
    ours = MemoryStore.get_or_create(key=key)
    assert paths(ours.search("pelicans")) == ["notes/upstream.md"]
    ours.write_text("notes/ours.md", "pelicans too")
    ours.save()  # the docs the search indexed are persisted with this save
    fresh = MemoryStore.get_or_create(key=key)
    assert index_of(fresh).seq == fresh._checkout.working_copy.base.seq
    assert set(paths(fresh.search("pelicans"))) == {"notes/upstream.md", "notes/ours.md"}


def test_a_missing_or_corrupt_segment_degrades_to_reading_files(durable_backend, key):
    store = MemoryStore.create(key=key)
    for i in range(15):
        store.write_text(f"files/{i:03d}.md", filler(i) + (" heron" if i == 3 else ""))
    store.save()
    names = list(segments(durable_backend, key))
    assert names
    journal = durable_backend.journal_prefix(key)
    for n, name in enumerate(names):
        target = f"{journal}/{name.removeprefix('meta/.journal/')}"
        if n % 2:
            durable_backend.fs.rm(target)
        else:
            durable_backend.fs.pipe(target, b'{"v": 1, "paths": ["files/000.md"], "not": "a segment"}')
    fresh = MemoryStore.get_or_create(key=key)
    assert paths(fresh.search("heron")) == ["files/003.md"]  # from the files themselves
    fresh.write_text("files/003.md", "no longer a bird")
    fresh.save()  # the save never fails on the index, and drops the unreadable segments from it
    again = MemoryStore.get_or_create(key=key)
    named = {f"{SEGMENTS}{r.sha256[:2]}/{r.sha256}.json" for r in index_of(again).segments}
    assert named and not named & set(names) and index_of(again).seq == again._checkout.working_copy.base.seq
    assert again.search("heron") == [] and paths(again.search("bird")) == ["files/003.md"]


def test_embed_hook_reranks_with_a_fake_embedder(local_backend, key):
    store = MemoryStore.create(key=key)
    store.write_text("cat.md", "a small feline that purrs")
    store.write_text("dog.md", "a loyal canine that barks, small")
    store.write_text("car.md", "a vehicle with four wheels")
    topics = {"feline": 0, "cat": 0, "canine": 1, "dog": 1, "vehicle": 2}

    def embed(texts: list[str]) -> list[list[float]]:  # a one-hot topic per text: deterministic
        return [[1.0 if any(w in t for w, k in topics.items() if k == d) else 0.0 for d in range(3)] for t in texts]

    async def embed_async(texts: list[str]) -> list[list[float]]:
        return embed(texts)

    assert paths(store.search("small cat", embed=embed))[0] == "cat.md"
    assert paths(store.search("small"))[0] == "cat.md" and store.search("pet dog") == []
    assert paths(store.search("pet dog", embed=embed_async))[0] == "dog.md"  # by meaning only
    assert paths(store.search("vehicle", embed=embed, limit=1)) == ["car.md"]
    assert paths(store.search("cat", embed=embed, limit=2))[0] == "cat.md"  # meaning-only match surfaces


def test_gc_keeps_named_segments_and_removes_unnamed_ones(local_backend, key):
    backend = local_backend
    store = MemoryStore.create(key=key)
    for round_ in range(3):
        for i in range(15):
            store.write_text(f"files/{i:03d}.md", filler(i) + f" round{round_}")
        store.save()
    before = set(segments(backend, key))
    assert len(before) >= 2
    store.gc(window=timedelta(0))
    after = set(segments(backend, key))
    named = {f"{SEGMENTS}{s.sha256[:2]}/{s.sha256}.json" for s in index_of(store).segments}
    assert named <= after and after < before
    assert paths(MemoryStore.get_or_create(key=key).search("round2"))[:1] and not MemoryStore.get_or_create(
        key=key
    ).search("round0")


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    return released_source(ISSUE_9_RELEASE, tmp_path_factory.mktemp("previous"))


@pytest.mark.slow
def test_the_previous_release_saves_over_an_index_and_search_stays_right(durable_backend, key, previous, request):
    store = MemoryStore.create(key=key)
    store.write_text("kept.md", "unchanged puffin")
    store.write_text("changed.md", "old puffin")
    store.save()
    endpoint = request.getfixturevalue("moto_endpoint") if durable_backend.name == "s3" else None
    config = {"key": key, "raw": durable_backend.raw_data_path, "endpoint": endpoint}
    done = run_released(previous, "write", config | {"writes": {"changed.md": "new gannet", "added.md": "gannet"}})
    assert "added.md" in done["files"]
    fresh = MemoryStore.get_or_create(key=key)
    assert EXT_KEY in fresh._checkout.working_copy.base.ext  # carried by the release, which knows nothing of it
    assert paths(fresh.search("puffin")) == ["kept.md"]  # the stale doc of changed.md is not believed
    assert set(paths(fresh.search("gannet"))) == {"changed.md", "added.md"}
    fresh.write_text("x.md", "x")
    fresh.save()  # persists what the search had to read, and the index is exact again
    again = MemoryStore.get_or_create(key=key)
    assert index_of(again).seq == again._checkout.working_copy.base.seq and paths(again.search("puffin")) == ["kept.md"]


def test_purge_removes_the_index_copies_and_search_stays_right(durable_backend, key):
    store = MemoryStore.create(key=key, keep_versions=True)
    for i in range(12):
        store.write_text(f"files/{i:03d}.md", filler(i) + " osprey")
    store.write_text("secret.md", "the vault code is quixotrebbly zanzibarfoo, osprey")
    store.save()
    store.write_text("secret.md", "rotated: xylocarpa osprey")
    store.write_text("files/000.md", filler(0) + " kestrel")
    store.save()
    other = MemoryStore.get_or_create(key=key)
    assert paths(other.search("xylocarpa")) == ["secret.md"] and paths(store.search("kestrel")) == ["files/000.md"]

    store.purge("secret.md")

    for word in ("quixotrebbly", "zanzibarfoo", "xylocarpa", "vault code"):  # in no object, anywhere
        assert [n for n, d in durable_backend.stored(key).items() if word.encode() in d] == [], word
    other.refresh()
    for handle in (store, other, MemoryStore.get_or_create(key=key)):  # warm, warm elsewhere, cold
        assert handle.search("xylocarpa") == [] and handle.search("quixotrebbly") == []
        assert len(handle.search("osprey", limit=50)) == 11 and paths(handle.search("kestrel")) == ["files/000.md"]
    store.write_text("files/005.md", "a new heron")
    store.save()  # persists the docs the search had to read again: the index is whole and exact
    fresh = MemoryStore.get_or_create(key=key)
    assert index_of(fresh).seq == fresh._checkout.working_copy.base.seq
    assert paths(fresh.search("heron")) == ["files/005.md"] and len(fresh.search("osprey", limit=50)) == 10


def test_a_handle_that_read_the_index_before_a_purge_warns_once(durable_backend, key, caplog):
    store = MemoryStore.create(key=key)
    for i in range(3):
        store.write_text(f"files/{i}.md", filler(i) + " osprey")
    store.write_text("secret.md", "the vault code is quixotrebbly, osprey")
    store.save()
    stale = MemoryStore.get_or_create(key=key)  # its state names the index's segments; it has read none
    assert stale.read_text("secret.md").startswith("the vault")

    store.purge("secret.md")

    with caplog.at_level("WARNING", logger="flyteplugins_memory"):
        for _ in range(3):  # the index's segments are gone: it reads files again, and the purged one matches nothing
            assert sorted(paths(stale.search("osprey", limit=50))) == ["files/0.md", "files/1.md", "files/2.md"]
            assert stale.search("quixotrebbly") == []
    gone = [r.getMessage() for r in caplog.records if "Search segment" in r.getMessage()]
    assert len(gone) == 1 and "gone" in gone[0], gone  # not once per search, and not called corruption
    stale.refresh()
    assert stale.search("quixotrebbly") == [] and len(stale.search("osprey", limit=50)) == 3
    assert [n for n, d in durable_backend.stored(key).items() if b"quixotrebbly" in d] == []


def test_after_a_purge_saves_keep_indexing_and_the_index_names_only_stored_segments(durable_backend, key, caplog):
    """A purge removes the segments holding the purged file's doc; the next save (by a handle that never
    searched) drops them from the index it carries and indexes its own writes, instead of committing
    without the index (and warning) at every save until some handle searched."""
    store = MemoryStore.create(key=key)
    for i in range(4):
        store.write_text(f"n{i}.md", f"common word{i}")
    store.save()
    store.purge("n1.md")
    writer = MemoryStore.get_or_create(key=key)
    with caplog.at_level("WARNING", logger="flyteplugins_memory"):
        for i in range(3):
            writer.write_text(f"z{i}.md", "zebra")
            writer.save()
    assert not [r for r in caplog.records if "without updating the search index" in r.getMessage()]
    named = {r.sha256 for r in index_of(MemoryStore.get_or_create(key=key)).segments}
    stored = {n.rsplit("/", 1)[-1].removesuffix(".json") for n in segments(durable_backend, key)}
    assert named <= stored
    words = b"".join(
        d for n, d in segments(durable_backend, key).items() if n.rsplit("/", 1)[-1].removesuffix(".json") in named
    )
    assert b"zebra" in words and b"word1" not in words  # the writes are indexed; the purged doc is not
    fresh = MemoryStore.get_or_create(key=key)
    assert sorted(paths(fresh.search("zebra"))) == ["z0.md", "z1.md", "z2.md"]
    assert sorted(paths(fresh.search("common"))) == ["n0.md", "n2.md", "n3.md"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_an_embed_returning_non_finite_numbers_is_refused_not_ranked_silently(local_backend, key, bad):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.md", "apple pie")
    store.write_text("b.md", "apple tart")
    with pytest.raises(InvalidArgument, match="finite"):
        store.search("apple", embed=lambda texts: [[bad, 1.0] for _ in texts])
    with pytest.raises(InvalidArgument, match="vectors"):  # a str is no vector of numbers ("12": 1.0, 2.0)
        store.search("apple", embed=lambda texts: ["12" for _ in texts])


def test_search_matches_accents_whatever_their_unicode_form_and_words_inside_cjk_text(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("nfd.md", "lunch at the cafe\u0301 on Monday")  # e + combining acute (NFD, as macOS writes)
    store.write_text("nfc.json", '{"place": "caf\\u00e9"}')  # the precomposed é
    store.write_text("jp.md", "東京タワーに行きました")  # no spaces between words
    store.write_text("zh.md", "我喜欢北京烤鸭")
    store.write_text("wide.md", "\uff21\uff30\uff30\uff2c\uff25 pie")  # fullwidth APPLE
    store.save()
    fresh = MemoryStore.open(key=key)  # from the persisted index
    for query in ["caf\u00e9", "cafe\u0301", "CAFÉ"]:
        assert sorted(h.path for h in fresh.search(query)) == ["nfc.json", "nfd.md"], query
    # one character a token: the text holding every character of the query ranks first
    assert [h.path for h in fresh.search("東京")][:1] == ["jp.md"]
    assert [h.path for h in fresh.search("タワー")] == ["jp.md"]
    assert [h.path for h in fresh.search("北京")][:1] == ["zh.md"]
    assert [h.path for h in fresh.search("apple")] == ["wide.md"]
    assert "タワー" in fresh.search("タワー")[0].snippet


def test_a_snippet_shows_the_match_when_case_folding_changes_the_texts_length(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.md", "İ" * 300 + " the needle is here")  # İ folds to two characters (i + dot)
    store.write_text("b.md", "Straße " * 50 + "haystack end")  # ß folds to ss
    store.save()
    fresh = MemoryStore.open(key=key)
    assert "needle" in fresh.search("needle")[0].snippet
    assert "haystack" in fresh.search("haystack")[0].snippet


def test_include_transcript_with_a_prefix_or_a_filter_is_refused_not_silently_dropped(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.append({"role": "user", "content": "I love green tea"})
    store.write_text("notes/tea.md", "tea notes", metadata={"k": "v"})
    store.save()
    for options in [{"prefix": "notes"}, {"where": {"k": "v"}}]:
        with pytest.raises(InvalidArgument, match="include_transcript"):
            store.search("tea", include_transcript=True, **options)
    assert sorted(h.path for h in store.search("tea", include_transcript=True)) == ["messages.json#0", "notes/tea.md"]


def test_a_sync_embed_runs_off_the_stores_loop_like_a_sync_summarize(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.md", "apple pie")
    store.write_text("b.md", "apple tart")
    store.save()

    def embed(texts):  # a sync embedder may block (a model call) or use a store's sync API
        held = MemoryStore.open(key=key).list_paths()  # raised BlockingCallOnLoop: it ran on the loop
        return [[1.0, float(len(held)), float("tart" in t)] for t in texts]

    assert sorted(h.path for h in store.search("apple", embed=embed)) == ["a.md", "b.md"]


def test_a_snippet_of_cjk_text_is_cut_around_the_match(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("jp.md", "今日は雨でした。" * 35 + "富士山に登りました。")  # the match after 280 characters
    (hit,) = store.search("富士山")
    assert "富士山" in hit.snippet


def test_search_ignores_combining_marks_that_split_words(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("tr.md", "İstanbul is lovely")  # İ folds to i + U+0307, which split the word in two
    store.write_text("ar.md", "كَتَبَ الولد")  # Arabic with its short vowels written
    for query, path in [("istanbul", "tr.md"), ("İSTANBUL", "tr.md"), ("كتب", "ar.md")]:
        assert [h.path for h in store.search(query)] == [path], query
    assert "lovely" in store.search("istanbul")[0].snippet
