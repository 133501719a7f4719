"""Hostile review of issue 11's last parts (scopes, persisted read-only prefixes, staged memories,
compaction, search): each test is a defect found by trying to break them, checked in storage (a new
handle or the backend's objects) where storage is involved."""

from __future__ import annotations

import pytest

from flyteplugins_memory import InvalidArgument, InvalidPath, MemoryStore, ProposalConflict
from flyteplugins_memory._api import staged as _staged


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


@pytest.mark.parametrize("prefix", ["notes/.", "./notes/", "notes//", "notes/./x", "."])
def test_a_read_only_prefix_with_a_dot_segment_is_refused_not_persisted_protecting_nothing(local_backend, key, prefix):
    trusted = MemoryStore.get_or_create(key=key, trusted=True)
    with pytest.raises(InvalidPath):
        trusted.set_read_only_prefixes([prefix])
    with pytest.raises(InvalidPath):
        MemoryStore.create(key=f"{key}-c", read_only_prefixes=(prefix,))
    assert MemoryStore.open(key=key).persisted_read_only_prefixes() == ()
    assert not MemoryStore.exists(key=f"{key}-c")


def test_an_accept_that_loses_to_a_discard_leaves_no_file_for_upstream_readers(durable_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    pid = store.propose("memory/fact.md", "unreviewed").id
    store.save()
    accepter, discarder = MemoryStore.open(key=key), MemoryStore.open(key=key)
    make = _staged._Decision.make

    async def racing(self, view):
        made = await make(self, view)
        if self.status == "accepted":  # the discard lands between the accept's check and its commit
            await discarder.discard.aio(pid)
        return made

    monkeypatch.setattr(_staged._Decision, "make", racing)
    with pytest.raises(ProposalConflict):
        accepter.accept(pid)
    assert "memory/fact.md" not in durable_backend.upstream_view(key)  # was left there: a discarded memory, listed
    fresh = MemoryStore.open(key=key)
    assert fresh.proposal(pid).status == "discarded" and not fresh.exists("memory/fact.md")
    assert [e["op"] for e in fresh.audit_tail(0)] == ["propose", "discard"]


def test_a_scopes_log_does_not_show_the_reasons_and_actors_of_other_scopes_writes(local_backend, key):
    store = MemoryStore.get_or_create(key=key)  # one handle serving two users, saved once
    store.scope("users/alice").write_text("note.md", "hi", actor="alice-agent", reason="alice likes tea")
    store.scope("users/bob").write_text("dx.md", "flu", actor="bob-agent", reason="bob's diagnosis: flu")
    store.save()
    store.scope("users/alice").write_text("own.md", "x", actor="alice-agent", reason="alice's own save")
    store.save()
    shared, own = MemoryStore.open(key=key).scope("users/alice").log()[::-1]
    assert shared.wrote == ("note.md",) and "bob" not in shared.reason and "bob" not in shared.actor
    assert (own.actor, own.reason) == ("alice-agent", "alice's own save")  # a commit wholly in the scope


def test_include_transcript_with_a_prefix_or_a_filter_is_refused_not_silently_dropped(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.append({"role": "user", "content": "I love green tea"})
    store.write_text("notes/tea.md", "tea notes", metadata={"k": "v"})
    store.save()
    for options in [{"prefix": "notes"}, {"where": {"k": "v"}}]:
        with pytest.raises(InvalidArgument, match="include_transcript"):
            store.search("tea", include_transcript=True, **options)
    assert sorted(h.path for h in store.search("tea", include_transcript=True)) == ["messages.json#0", "notes/tea.md"]


@pytest.mark.parametrize(
    "path",
    ["%f0%80%80%ae%f0%80%80%ae/x", "a/%F0%80%80%AF", "%u002e%u002e/x", "a%u2215b", "%U002F"],
)
def test_a_scope_refuses_four_byte_overlong_and_u_escaped_dots_and_separators(local_backend, key, path):
    from flyteplugins_memory import PathEscapesRoot

    store = MemoryStore.get_or_create(key=key)
    alice = store.scope("users/alice")
    with pytest.raises(PathEscapesRoot):
        alice.write_text(path, "x")
    assert store.list_paths() == [] and not store.has_unsaved_changes()
    alice.write_text("100%u.md", "fine")  # a % followed by anything else stays an ordinary character


def test_compaction_refuses_an_unarchivable_message_before_calling_summarize(local_backend, key):
    from flyteplugins_memory import InvalidMessage

    store = MemoryStore.get_or_create(key=key)
    store.extend([{"role": "user", "content": "x", "score": float("nan")}, {"role": "user", "content": "y"}])
    store.save()
    calls = []
    with pytest.raises(InvalidMessage, match="archived"):
        store.compact_transcript(lambda messages: calls.append(messages) or "summary", keep_last=1)
    assert calls == []  # a model call wasted on a compaction that cannot land
    assert len(MemoryStore.open(key=key).messages) == 2


@pytest.mark.parametrize("name", [".", ".."])
def test_a_session_named_dot_is_refused_not_the_log_of_every_session(local_backend, key, name):
    store = MemoryStore.get_or_create(key=key)
    store.session("s1").append({"role": "user", "content": "s1's message"})
    store.save()
    for owner in [store, store.scope("users/alice")]:
        with pytest.raises(InvalidPath):  # "." was "sessions": its segments among the session directories
            owner.session(name)
    assert store.list_paths("sessions") == [p for p in store.list_paths() if p.startswith("sessions/s1/")]


@pytest.mark.parametrize("name", [5, None, b"versions/x", "../x", "", "users/alice/notes.md"])
def test_a_scope_refuses_a_malformed_version_name_as_the_store_does(local_backend, key, name):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    alice = store.scope("users/alice")
    with pytest.raises(InvalidPath):
        store.read_version(name)
    for read in (alice.read_version, alice.read_version_bytes):
        with pytest.raises(InvalidPath):  # was VersionNotFound: "no such version" for what is no name at all
            read(name)


def test_a_scopes_purge_result_names_the_path_as_the_scope_does(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    alice = store.scope("users/alice")
    alice.write_text("secret.md", "redact me")
    store.save()
    result = alice.purge("secret.md")
    assert result.path == "secret.md" and result.commit is not None  # was "users/alice/secret.md"
    assert "users/alice/secret.md" not in durable_backend.upstream_view(key)
    assert MemoryStore.open(key=key).list_paths() == []


def test_a_scopes_log_does_not_show_the_reason_of_a_settings_change_saved_with_its_writes(local_backend, key):
    admin = MemoryStore.get_or_create(key=key, trusted=True)
    admin.scope("users/alice").write_text("note.md", "hi")
    admin.set_read_only_prefixes(["users/bob/"], actor="admin", reason="lock bob's medical records")
    (commit,) = MemoryStore.open(key=key).scope("users/alice").log()
    assert commit.wrote == ("note.md",) and "bob" not in commit.reason


def test_a_proposal_cannot_forge_a_record_log_segment(durable_backend, key):
    from flyteplugins_memory import Proposal
    from flyteplugins_memory._rules import proposals as _proposals

    store = MemoryStore.get_or_create(key=key)
    store.records("memory/decisions").append({"by": "reviewer"})
    store.save()
    forged = "memory/decisions/99999999999999999999-abcdefabcdef.jsonl"
    with pytest.raises(InvalidPath, match="segment"):  # as write_text refuses it
        store.propose(forged, '{"by": "an agent"}\n')
    # one staged before this check (or by an older writer) is refused at accept, and can still be discarded
    staged = _proposals.draft(forged, '{"by": "an agent"}\n', "agent", "", {})
    store._checkout.working_copy.changes.entries[(_proposals.EXT_MAP, staged.id)] = _proposals.stored(staged)
    store.save()
    with pytest.raises(InvalidPath, match="segment"):
        store.accept(staged.id)
    assert isinstance(store.discard(staged.id), Proposal)
    assert MemoryStore.open(key=key).records("memory/decisions").read() == [{"by": "reviewer"}]
    assert forged not in durable_backend.upstream_view(key)


def test_a_scopes_session_validates_messages_when_the_store_does(local_backend, key):
    from flyteplugins_memory import InvalidMessage

    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    for owner in [store, store.scope("users/alice")]:
        with pytest.raises(InvalidMessage):
            owner.session("s1").append({"role": "wizard", "content": "not a chat message"})
    store.save()
    assert MemoryStore.open(key=key).list_paths() == []


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


def test_a_compaction_refused_by_a_newly_read_only_archive_leaves_the_handle_as_it_was(durable_backend, key):
    from flyteplugins_memory import ReadOnlyPath

    store = MemoryStore.get_or_create(key=key)
    store.extend([{"role": "user", "content": f"m{i}"} for i in range(4)])
    store.save()
    admin = MemoryStore.open(key=key, trusted=True)

    def summarize(messages):  # meanwhile, an admin locks the archive's prefix
        admin.set_read_only_prefixes(["archive/"])
        return "summary"

    with pytest.raises(ReadOnlyPath):
        store.compact_transcript(summarize, keep_last=1)
    assert [m["content"] for m in store.messages] == ["m0", "m1", "m2", "m3"]  # was the summary, uncommitted
    store.append({"role": "user", "content": "later"})
    store.save()  # raised ReadOnlyPath forever: the staged archive segment stayed in the handle
    assert [m["content"] for m in MemoryStore.open(key=key).messages] == ["m0", "m1", "m2", "m3", "later"]
    assert not [p for p in durable_backend.upstream_view(key) if p.startswith("archive/")]
