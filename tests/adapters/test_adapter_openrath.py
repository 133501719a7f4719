"""The OpenRath backend (`flyteplugins_memory.adapters.openrath`) through the real ``rath.memory`` framework
(openrath 2.0): every op on local disk and moto S3, checked through fresh handles and the backend's own
object listing; failure kinds, handle refcounting, a ``flow.Agent`` run leaving memory in our store, and
two processes writing through the backend to one key."""

from __future__ import annotations

import json
import time

import pytest
import rath.memory as rm
from rath.memory import (
    MemoryCommitResult,
    MemoryEntry,
    MemoryExecutionFailure,
    MemoryFindResult,
    MemoryListResult,
    MemoryOpCommit,
    MemoryOpFind,
    MemoryOpList,
    MemoryOpRead,
    MemoryOpResource,
    MemoryOpSearch,
    MemoryOpTree,
    MemoryOpWrite,
    MemoryReadResult,
    MemoryStoreClosed,
    MemoryStoreSpec,
    MemoryWriteResult,
)

from flyteplugins_memory import ConcurrencyError, MemoryStore
from flyteplugins_memory.adapters.openrath import FlyteMemoryBackend, path_of, store_key, uri_of
from helpers import race_children
from repo import SUPPORT

TESTS = str(SUPPORT)


def opened(key: str, **options):
    return rm.get("flyte").open(MemoryStoreSpec(options={"key": key, **options}))


def stored(backend, key: str) -> dict[str, str]:
    """The backend's entries as storage itself lists them."""
    return {n: d.decode() for n, d in backend.objects(key).items() if n.startswith("openrath/")}


def read(store, uri: str, level: str = "detail"):
    result = store.dispatch(MemoryOpRead(uri=uri, level=level))  # type: ignore[arg-type]
    assert isinstance(result, MemoryReadResult), result
    return result.data


def test_registered_with_capabilities():
    assert "flyte" in rm.list_names() and rm.is_available("flyte")
    assert rm.get_class("flyte") is FlyteMemoryBackend
    caps = FlyteMemoryBackend.capabilities()
    assert caps.supports_session_commit and caps.supports_l0_l1_l2 and caps.supports_resource_ingest
    assert MemoryOpResource in FlyteMemoryBackend.supported_ops()
    assert path_of("memory://user/a b/x") == "openrath/user/~612062/x.md"
    assert uri_of("openrath/user/~612062/x.md") == "memory://user/a b/x"
    assert uri_of("openrath/user/x.txt") is None


def test_write_read_levels_and_modes(durable_backend, key):
    store = opened(key)
    body = "Likes green tea.\nPrefers mornings.\n" + "\n".join(f"line {i}" for i in range(30))
    assert store.dispatch(MemoryOpWrite(uri="memory://user/prefs/drink", content=body)) == MemoryWriteResult(
        uri="memory://user/prefs/drink", bytes_written=len(body.encode())
    )
    store.dispatch(MemoryOpWrite(uri="memory://user/prefs/drink/extra", content="a file under the name"))
    store.dispatch(
        MemoryOpWrite(uri="memory://agent/odd name/ü", content="x", metadata={"abstract": "A.", "overview": "O."})
    )
    store.dispatch(MemoryOpWrite(uri="memory://session/s1/log", content="first", mode="append"))
    store.dispatch(MemoryOpWrite(uri="memory://session/s1/log", content="second", mode="append"))

    fresh = opened(key)  # a new handle on the key: what was committed
    assert read(fresh, "memory://user/prefs/drink") == body
    assert read(fresh, "memory://user/prefs/drink", "abstract") == "Likes green tea."
    assert read(fresh, "memory://user/prefs/drink", "overview") == "\n".join(body.splitlines()[:20])
    assert read(fresh, "memory://agent/odd name/ü", "abstract") == "A."
    assert read(fresh, "memory://agent/odd name/ü", "overview") == "O."
    assert read(fresh, "memory://session/s1/log") == "first\nsecond"
    raw = fresh.dispatch(MemoryOpRead(uri="memory://user/prefs/drink/extra", encoding=None))
    assert isinstance(raw, MemoryReadResult) and raw.data == b"a file under the name"
    on_disk = stored(durable_backend, key)
    assert on_disk["openrath/user/prefs/drink.md"] == body
    assert "openrath/user/prefs/drink/extra.md" in on_disk
    assert on_disk["openrath/agent/~6f6464206e616d65/~c3bc.md"] == "x"

    fresh.dispatch(MemoryOpWrite(uri="memory://user/prefs/drink", content="coffee now"))
    assert read(opened(key), "memory://user/prefs/drink", "abstract") == "coffee now"


def test_list_and_tree(durable_backend, key):
    store = opened(key)
    for uri in ["memory://user/a/b/c", "memory://user/a/x", "memory://user/top", "memory://agent/n"]:
        store.dispatch(MemoryOpWrite(uri=uri, content="12345"))

    listed = store.dispatch(MemoryOpList(uri="memory://user"))
    assert listed == MemoryListResult(
        entries=(
            MemoryEntry(name="a", uri="memory://user/a", is_dir=True, size=None),
            MemoryEntry(name="top", uri="memory://user/top", is_dir=False, size=5),
        )
    )
    roots = store.dispatch(MemoryOpList(uri="memory://"))
    assert isinstance(roots, MemoryListResult)
    assert [(e.name, e.uri, e.is_dir) for e in roots.entries] == [
        ("agent", "memory://agent", True),
        ("user", "memory://user", True),
    ]
    tree = store.dispatch(MemoryOpTree(uri="memory://user/", depth=2))
    assert isinstance(tree, MemoryListResult)
    assert [e.uri for e in tree.entries] == [
        "memory://user/a",
        "memory://user/a/b",
        "memory://user/a/b/c",
        "memory://user/a/x",
        "memory://user/top",
    ]
    shallow = store.dispatch(MemoryOpTree(uri="memory://user", depth=0))
    assert isinstance(shallow, MemoryListResult) and [e.name for e in shallow.entries] == ["a", "top"]
    assert store.dispatch(MemoryOpList(uri="memory://resources/none")) == MemoryListResult(entries=())


def test_find_and_search_rank_under_target(durable_backend, key):
    store = opened(key)
    store.dispatch(MemoryOpWrite(uri="memory://user/m/tea", content="green tea green tea every morning"))
    store.dispatch(MemoryOpWrite(uri="memory://user/m/cafe", content="coffee, sometimes tea"))
    store.dispatch(MemoryOpWrite(uri="memory://agent/m/tea", content="the agent brews tea"))

    found = opened(key).dispatch(MemoryOpFind(query="tea", target_uri="memory://user"))
    assert isinstance(found, MemoryFindResult)
    assert [h.uri for h in found.hits] == ["memory://user/m/tea", "memory://user/m/cafe"]
    assert found.hits[0].score >= found.hits[1].score and "tea" in (found.hits[0].snippet or "")
    everywhere = store.dispatch(MemoryOpSearch(query="tea", session_id="s", top_k=10))
    assert isinstance(everywhere, MemoryFindResult) and len(everywhere.hits) == 3
    assert len(store.dispatch(MemoryOpFind(query="tea", top_k=1)).hits) == 1  # type: ignore[attr-defined]
    assert store.dispatch(MemoryOpFind(query="zeppelin")) == MemoryFindResult(hits=())
    assert store.dispatch(MemoryOpFind(query="  ")) == MemoryFindResult(hits=())


def test_commit_archives_and_extracts(durable_backend, key):
    def extract(messages):
        return [(f"memory://user/memories/{i}", m["content"]) for i, m in enumerate(messages) if m["role"] == "user"]

    store = opened(key, extract=extract)
    messages = (
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "I live in Oslo"},
        {"role": "assistant", "parts": [{"text": "Noted"}]},
    )
    result = store.dispatch(MemoryOpCommit(session_id="s-1", messages=messages, wait=True))
    assert isinstance(result, MemoryCommitResult) and result.extracted_count == 1 and result.task_id is None
    uri = str(result.archived_uri)
    assert uri.startswith("memory://session/s-1/commits/") and uri.endswith("/messages.json")
    later = store.dispatch(MemoryOpCommit(session_id="s-1", messages=({"role": "user", "content": "and Rome"},)))
    assert isinstance(later, MemoryCommitResult) and later.extracted_count == -1  # no wait: not reported (0134)
    assert later.archived_uri != uri  # each commit its own archive, as the local backend

    fresh = opened(key)
    assert json.loads(read(fresh, uri)) == list(messages)  # the messages as given, as JSON
    assert json.loads(read(fresh, str(later.archived_uri))) == [{"role": "user", "content": "and Rome"}]
    commits = fresh.dispatch(MemoryOpList(uri="memory://session/s-1/commits"))
    assert isinstance(commits, MemoryListResult) and [e.is_dir for e in commits.entries] == [True, True]
    assert [e.uri + "/messages.json" for e in commits.entries] == [uri, later.archived_uri]
    files = stored(durable_backend, key)  # storage itself: one object per archive, the JSON as read back
    assert sorted(p for p in files if "/commits/" in p) == sorted(path_of(u) for u in (uri, str(later.archived_uri)))
    assert json.loads(files[path_of(uri)]) == list(messages)
    assert read(fresh, "memory://user/memories/1") == "I live in Oslo"
    assert read(fresh, "memory://user/memories/0") == "and Rome"  # extract runs without wait too
    assert read(fresh, "memory://session/s-1/transcript") == (
        "system: be nice\nuser: I live in Oslo\nassistant: Noted\nuser: and Rome"
    )
    handle = MemoryStore.get_or_create(key=key)
    assert [m["content"] for m in handle.session("openrath-s-1").messages][-1] == "and Rome"
    plain = opened(key).dispatch(MemoryOpCommit(session_id="s-2", messages=messages, wait=True))
    assert isinstance(plain, MemoryCommitResult) and plain.extracted_count == 0


def test_failure_kinds(local_backend, key):
    store = opened(key, extract=lambda messages: [("file:///etc/passwd", "x")])
    for uri in ["file:///x", "memory://nope/x", "memory://user/../x", "memory://user//x", "memory://user", 7]:
        result = store.dispatch(MemoryOpWrite(uri=uri, content="x"))  # type: ignore[arg-type]
        assert isinstance(result, MemoryExecutionFailure) and result.kind == "invalid_uri", (uri, result)
    assert store.dispatch(MemoryOpList(uri="memory://x")).kind == "invalid_uri"  # type: ignore[attr-defined]
    assert store.dispatch(MemoryOpFind(query="q", target_uri="s3://x")).kind == "invalid_uri"  # type: ignore[attr-defined]
    missing = store.dispatch(MemoryOpRead(uri="memory://user/none"))
    assert isinstance(missing, MemoryExecutionFailure) and missing.kind == "not_found"
    assert read(store, "memory://session/none/transcript") == ""  # no commit yet: an empty transcript
    bad_mode = store.dispatch(MemoryOpWrite(uri="memory://user/x", content="x", mode="merge"))
    assert isinstance(bad_mode, MemoryExecutionFailure) and bad_mode.kind == "unsupported"
    bad_extract = store.dispatch(MemoryOpCommit(session_id="s", messages=({"role": "user", "content": "hi"},)))
    assert isinstance(bad_extract, MemoryExecutionFailure) and bad_extract.kind == "extraction_failed"
    assert "openrath-s" not in str(MemoryStore.get_or_create(key=key).list_paths())  # nothing committed
    raising = opened(key, extract=lambda messages: 1 / 0)
    failed = raising.dispatch(MemoryOpCommit(session_id="s", messages=()))
    assert isinstance(failed, MemoryExecutionFailure) and failed.kind == "extraction_failed"
    assert store.dispatch(MemoryOpCommit(session_id="a/b", messages=())).kind == "invalid_uri"  # type: ignore[attr-defined]
    refused = store.dispatch(MemoryOpResource(source="/tmp"))  # no resource_import_roots: no local path
    assert isinstance(refused, MemoryExecutionFailure) and refused.kind == "unauthorized"

    backend = store.backend
    backend.close(store)
    assert store.closed and backend.dispatch(store, MemoryOpFind(query="x")).kind == "store_closed"  # type: ignore[attr-defined]
    with pytest.raises(MemoryStoreClosed):
        store.dispatch(MemoryOpFind(query="x"))


def test_a_failed_op_commits_nothing_later(local_backend, key):
    def extract(messages):
        return [("memory://user/free/a", "x"), ("memory://user/locked/b", "y")]

    store = opened(key, read_only_prefixes=("openrath/user/locked",), extract=extract)
    denied = store.dispatch(MemoryOpWrite(uri="memory://user/locked/z", content="no"))
    assert isinstance(denied, MemoryExecutionFailure) and denied.kind == "unauthorized"
    failed = store.dispatch(MemoryOpCommit(session_id="s", messages=({"role": "user", "content": "hi"},)))
    assert isinstance(failed, MemoryExecutionFailure) and failed.kind == "unauthorized"
    assert isinstance(store.dispatch(MemoryOpWrite(uri="memory://user/ok", content="ok")), MemoryWriteResult)
    paths = MemoryStore.get_or_create(key=key).list_paths()
    assert paths == ["openrath/user/ok.md"], paths  # neither the extracted file nor the session log


def test_a_failed_save_stages_nothing_even_when_storage_stays_down(local_backend, key, storage_faults):
    """A failed op drops what it staged (files and session-log appends) from the backend's handle and from
    a caller's ``options["store"]``: nothing of it reaches a later save, though storage cannot be reopened."""
    extract = lambda messages: [("memory://user/extracted", "x")]  # noqa: E731
    caller = MemoryStore.get_or_create(key=key)
    ours = opened(key, extract=extract)
    theirs = rm.get("flyte").open(MemoryStoreSpec(options={"store": caller, "extract": extract}))
    assert isinstance(ours.dispatch(MemoryOpWrite(uri="memory://user/base", content="ok")), MemoryWriteResult)
    kept = ours.dispatch(MemoryOpCommit(session_id="s", messages=({"role": "user", "content": "kept"},)))
    assert isinstance(kept, MemoryCommitResult)
    storage_faults.arm(lambda n, op, path: "permanent")  # storage down for every call
    for store in (ours, theirs):
        for op in (
            MemoryOpWrite(uri="memory://user/ghost", content="failed"),
            MemoryOpWrite(uri="memory://user/base", content="failed", mode="append"),
            MemoryOpCommit(session_id="s", messages=({"role": "user", "content": "failed"},)),
        ):
            failed = store.dispatch(op)
            assert isinstance(failed, MemoryExecutionFailure) and failed.kind == "transport", failed
    storage_faults.clear()
    caller.save()  # the caller's handle holds nothing the failed ops staged
    assert isinstance(ours.dispatch(MemoryOpWrite(uri="memory://user/next", content="next")), MemoryWriteResult)
    assert isinstance(theirs.dispatch(MemoryOpWrite(uri="memory://user/more", content="more")), MemoryWriteResult)
    expected = {"openrath/user/base.md": "ok", "openrath/user/next.md": "next", "openrath/user/more.md": "more"}
    expected["openrath/user/extracted.md"] = "x"  # by the commit that succeeded
    files = stored(local_backend, key)
    (archive,) = [path for path in files if "/commits/" in path]  # the kept commit's archive alone
    assert archive.startswith("openrath/session/s/commits/") and json.loads(files.pop(archive))[0]["content"] == "kept"
    assert files == expected
    assert read(opened(key), "memory://user/base") == "ok"
    assert read(opened(key), "memory://session/s/transcript") == "user: kept"  # the failed appends are gone
    assert len([name for name in local_backend.objects(key) if name.startswith("sessions/openrath-s/")]) == 1


def test_refcounting_closes_on_last_release(local_backend, key):
    backend = rm.get("flyte")
    store = backend.open(MemoryStoreSpec(namespace=key))
    assert backend.store_count() == 1 and store.refcount == 0
    with store:
        store.acquire()
        assert store.refcount == 2
        store.release()
        assert not store.closed
        store.dispatch(MemoryOpWrite(uri="memory://user/n", content="kept"))
    assert store.closed and backend.store_count() == 0
    backend.close(store)  # closing twice is a no-op
    with pytest.raises(MemoryStoreClosed):
        store.acquire()
    assert MemoryStore.get_or_create(key=key).read_text("openrath/user/n.md") == "kept"


def test_agent_runs_with_our_store(durable_backend, key):
    from rath import flow
    from rath.llm.chat_response import RathLLMAssistantMessage, RathLLMChatChoice, RathLLMChatResponse
    from rath.llm.registry import register_chat_client
    from rath.session import Session

    class Dummy:  # the model "dummy": answers without a network
        def __init__(self, provider):
            self.provider = provider

        def complete(self, req):
            message = RathLLMAssistantMessage(content="Tea it is.")
            choice = RathLLMChatChoice(index=0, finish_reason="stop", message=message)
            return RathLLMChatResponse(id="d", choices=(choice,), created=int(time.time()), model="dummy")

    register_chat_client("dummy", Dummy)
    seed = opened(key)
    seed.dispatch(MemoryOpWrite(uri="memory://user/memories/drink", content="The user drinks green tea."))
    store = opened(key)
    agent = flow.Agent(
        "You are helpful.",
        provider=flow.Provider(model="dummy", provider_kind="dummy"),
        memory=store,
        commit_on_forward=True,
    )
    assert store.refcount == 1
    out = agent(Session.from_user_message("What tea do I drink?"))
    assert "Tea it is." in str(out.text())
    note = agent.remember_memory("Lives in Oslo.", category="places")
    assert isinstance(note, MemoryWriteResult)
    recalled = agent.recall_memory("tea")
    assert isinstance(recalled, MemoryFindResult) and recalled.hits[0].uri == "memory://user/memories/drink"
    agent.close()
    assert store.closed

    handle = MemoryStore.get_or_create(key=key)
    sessions = [p for p in handle.list_paths("sessions") if "openrath-" in p]
    assert sessions, handle.list_paths()
    stored_now = stored(durable_backend, key)
    assert any(v == "Lives in Oslo." for k, v in stored_now.items() if k.startswith("openrath/user/memories/places/"))


def test_an_entry_and_a_directory_of_one_name_never_share_a_file(durable_backend, key):
    """Only entries' files end in .md: a directory named like an entry's file is hex-encoded."""
    store = opened(key)
    writes = [
        ("memory://user/x", "entry x"),  # entry first, then a directory of its file's name
        ("memory://user/x.md/y", "under x.md"),
        ("memory://agent/d.md/y", "under d.md"),  # directory first, then the entry
        ("memory://agent/d", "entry d"),
        ("memory://agent/X.MD/z", "any case"),
        ("memory://agent/n.md", "an entry named n.md"),
    ]
    for uri, text in writes:
        assert isinstance(store.dispatch(MemoryOpWrite(uri=uri, content=text)), MemoryWriteResult), uri

    assert stored(durable_backend, key) == {
        "openrath/user/x.md": "entry x",
        "openrath/user/~782e6d64/y.md": "under x.md",
        "openrath/agent/~642e6d64/y.md": "under d.md",
        "openrath/agent/d.md": "entry d",
        "openrath/agent/~582e4d44/z.md": "any case",
        "openrath/agent/~6e2e6d64.md": "an entry named n.md",
    }
    fresh = opened(key)
    for uri, text in writes:
        assert read(fresh, uri) == text
        assert uri_of(path_of(uri)) == uri
    listed = fresh.dispatch(MemoryOpList(uri="memory://user"))
    assert isinstance(listed, MemoryListResult)
    assert [(e.name, e.is_dir) for e in listed.entries] == [("x.md", True), ("x", False)]


def test_entries_the_first_rule_wrote_are_still_read(local_backend, key):
    """The first release kept names ending in .md plain (x.md/ for a directory, x.md.md for an entry)."""
    handle = MemoryStore.get_or_create(key=key)
    handle.write_text("openrath/user/old.md.md", "old entry")
    handle.write_text("openrath/user/notes.md/a.md", "old child")
    handle.save()

    store = opened(key)
    assert read(store, "memory://user/old.md") == "old entry"
    assert read(store, "memory://user/notes.md/a") == "old child"
    found = store.dispatch(MemoryOpFind(query="child", target_uri="memory://user/notes.md"))
    assert isinstance(found, MemoryFindResult) and [h.uri for h in found.hits] == ["memory://user/notes.md/a"]

    store.dispatch(MemoryOpWrite(uri="memory://user/notes.md/b", content="new child"))
    store.dispatch(MemoryOpWrite(uri="memory://user/notes.md/a", content="appended", mode="append"))
    assert read(opened(key), "memory://user/notes.md/a") == "old child\nappended"
    store.dispatch(MemoryOpWrite(uri="memory://user/old.md", content="rewritten"))
    assert read(opened(key), "memory://user/old.md") == "rewritten"  # this rule's file wins
    tree = opened(key).dispatch(MemoryOpTree(uri="memory://user", depth=1))
    assert isinstance(tree, MemoryListResult)
    assert [(e.uri, e.is_dir) for e in tree.entries] == [
        ("memory://user/notes.md", True),  # both rules' directories are one
        ("memory://user/notes.md/a", False),  # appended: now at this rule's file
        ("memory://user/notes.md/b", False),
        ("memory://user/old.md", False),  # both rules' files are one entry
    ]
    paths = MemoryStore.get_or_create(key=key).list_paths()
    assert {"openrath/user/~6e6f7465732e6d64/a.md", "openrath/user/~6e6f7465732e6d64/b.md"} <= set(paths)


def test_an_entry_both_rules_wrote_is_found_once_and_a_transcript_file_never(durable_backend, key):
    """find shows what listings show: an entry at this rule's file only (not the first release's stale
    ``x.md.md`` too), and a file the first release let a write put at a transcript URI nowhere."""
    handle = MemoryStore.get_or_create(key=key)
    handle.write_text("openrath/user/old.md.md", "stale coffee preference")
    handle.write_text("openrath/user/legacy.md.md", "legacy coffee only")
    handle.write_text("openrath/session/s1/transcript.md", "forged coffee transcript")
    handle.save()
    opened(key).dispatch(MemoryOpWrite(uri="memory://user/old.md", content="fresh coffee preference"))
    assert stored(durable_backend, key)["openrath/user/old.md.md"] == "stale coffee preference"  # kept, never shown

    store = opened(key)
    found = store.dispatch(MemoryOpFind(query="coffee", top_k=10))
    assert isinstance(found, MemoryFindResult)
    assert sorted((h.uri, h.snippet) for h in found.hits) == [
        ("memory://user/legacy.md", "legacy coffee only"),  # only the first rule wrote it: found there
        ("memory://user/old.md", "fresh coffee preference"),
    ]
    best = store.dispatch(MemoryOpSearch(query="stale coffee preference", top_k=1))
    assert isinstance(best, MemoryFindResult) and [(h.uri, h.snippet) for h in best.hits] == [
        ("memory://user/old.md", "fresh coffee preference")  # the stale copy scores higher but is dropped
    ]
    assert store.dispatch(MemoryOpFind(query="forged transcript")) == MemoryFindResult(hits=())
    assert store.dispatch(MemoryOpList(uri="memory://session/s1")) == MemoryListResult(entries=())
    tree = store.dispatch(MemoryOpTree(uri="memory://", depth=5))
    assert isinstance(tree, MemoryListResult)
    assert [e.uri for e in tree.entries] == ["memory://user", "memory://user/legacy.md", "memory://user/old.md"]


def test_a_transcript_is_written_by_commits_only(durable_backend, key):
    store = opened(key, extract=lambda messages: [("memory://session/s1/transcript", "forged")])
    plain = opened(key)
    committed = plain.dispatch(MemoryOpCommit(session_id="s1", messages=({"role": "user", "content": "hi"},)))
    assert isinstance(committed, MemoryCommitResult)
    for uri in ["memory://session/s1/transcript", "viking://session/s1/transcript", "memory://session/s2/transcript"]:
        for mode in ("replace", "append"):
            refused = plain.dispatch(MemoryOpWrite(uri=uri, content="forged", mode=mode))
            assert isinstance(refused, MemoryExecutionFailure) and refused.kind == "unauthorized", (uri, refused)
    forged = store.dispatch(MemoryOpCommit(session_id="s1", messages=({"role": "user", "content": "again"},)))
    assert isinstance(forged, MemoryExecutionFailure) and forged.kind == "extraction_failed"

    assert not any("transcript" in name for name in stored(durable_backend, key))
    assert read(opened(key), "memory://session/s1/transcript") == "user: hi"  # "again" was not committed
    assert [m["content"] for m in MemoryStore.get_or_create(key=key).session("openrath-s1").messages] == ["hi"]
    child = plain.dispatch(MemoryOpWrite(uri="memory://session/s1/transcript/notes", content="a note"))
    assert isinstance(child, MemoryWriteResult)  # below the transcript is an ordinary directory


def test_a_file_at_a_transcript_shadows_nothing(local_backend, key):
    """A file the first release let a plain write put at a transcript URI is never read as the transcript."""
    handle = MemoryStore.get_or_create(key=key)
    handle.write_text("openrath/session/s1/transcript.md", "forged")
    handle.save()
    store = opened(key)
    assert read(store, "memory://session/s1/transcript") == ""
    store.dispatch(MemoryOpCommit(session_id="s1", messages=({"role": "user", "content": "real"},)))
    assert read(opened(key), "memory://session/s1/transcript") == "user: real"


@pytest.mark.parametrize("session_id", ["", ".", "..", "a/b", "/", "a\x00b", "a\nb", "\x7f", None, 7])
def test_a_bad_session_id_is_refused_before_anything_runs(local_backend, key, session_id):
    calls = []
    store = opened(key, extract=lambda messages: calls.append(messages) or [("memory://user/m", "x")])
    messages = ({"role": "user", "content": "hi"},)
    result = store.dispatch(MemoryOpCommit(session_id=session_id, messages=messages))  # type: ignore[arg-type]
    assert isinstance(result, MemoryExecutionFailure) and result.kind == "invalid_uri", result
    assert calls == []  # extract never ran
    assert MemoryStore.get_or_create(key=key).list_paths() == []
    assert not any(name.startswith("sessions/") for name in local_backend.objects(key))


@pytest.mark.parametrize("session_id", ["s-1", "x.md", "a b", "ü", "~61", ".hidden"])
def test_an_archived_uri_reads_back(durable_backend, key, session_id):
    store = opened(key)
    result = store.dispatch(MemoryOpCommit(session_id=session_id, messages=({"role": "user", "content": "hi"},)))
    assert isinstance(result, MemoryCommitResult), result
    assert json.loads(read(opened(key), str(result.archived_uri))) == [{"role": "user", "content": "hi"}]
    assert read(opened(key), f"memory://session/{session_id}/transcript") == "user: hi"
    logs = {name.split("/")[1] for name in durable_backend.objects(key) if name.startswith("sessions/")}
    assert len(logs) == 1 and logs.pop().startswith("openrath-")


def test_a_lone_surrogate_is_no_segment(durable_backend, key):
    """A lone surrogate has no UTF-8 form: its bytes decode to no name, so its file would list (and read)
    as the entry spelled ``~eda080``. It is refused wherever a segment is taken."""
    store = opened(key, extract=lambda messages: [("memory://user/\udc00", "x")])
    for op in (
        MemoryOpWrite(uri="memory://user/\ud800", content="surrogate"),
        MemoryOpWrite(uri="memory://user/\ud800/child", content="surrogate"),
        MemoryOpRead(uri="memory://user/\ud800"),
        MemoryOpList(uri="memory://user/\ud800"),
        MemoryOpFind(query="surrogate", target_uri="memory://user/\ud800"),
        MemoryOpCommit(session_id="s\ud800", messages=({"role": "user", "content": "hi"},)),
    ):
        refused = store.dispatch(op)
        assert isinstance(refused, MemoryExecutionFailure) and refused.kind == "invalid_uri", (op, refused)
    failed = store.dispatch(MemoryOpCommit(session_id="s", messages=({"role": "user", "content": "hi"},)))
    assert isinstance(failed, MemoryExecutionFailure) and failed.kind == "extraction_failed"
    assert isinstance(opened(key).dispatch(MemoryOpWrite(uri="memory://user/~eda080", content="t")), MemoryWriteResult)
    assert stored(durable_backend, key) == {"openrath/user/~7e656461303830.md": "t"}  # only the real name's file
    assert not any(name.startswith("sessions/") for name in durable_backend.objects(key))
    with pytest.raises(ValueError, match="surrogate"):
        rm.get("flyte").open(MemoryStoreSpec(namespace=key, user_id="\ud800"))


def test_an_empty_commit_reads_back_as_an_empty_transcript(durable_backend, key):
    """As OpenRath's local backend, a commit of no messages succeeds and archives an empty list, which its
    archived_uri reads back; the transcript is empty, the log untouched; later messages follow as usual."""
    store = opened(key)
    empty = store.dispatch(MemoryOpCommit(session_id="empty", messages=(), wait=True))
    assert isinstance(empty, MemoryCommitResult) and empty.extracted_count == 0
    assert json.loads(read(opened(key), str(empty.archived_uri))) == []
    assert read(opened(key), "memory://session/empty/transcript") == ""
    assert read(opened(key), "memory://session/empty/transcript", "abstract") == ""
    assert not any(name.startswith("sessions/") for name in durable_backend.objects(key))
    store.dispatch(MemoryOpCommit(session_id="empty", messages=({"role": "user", "content": "now"},)))
    assert read(opened(key), "memory://session/empty/transcript") == "user: now"


def test_users_of_one_namespace_never_see_each_others_memories(durable_backend, key):
    def as_user(user_id):
        return rm.get("flyte").open(MemoryStoreSpec(namespace=key, user_id=user_id))

    alice, bob, carol = as_user("alice"), as_user("bob"), as_user("carol@example.com")
    alice.dispatch(MemoryOpWrite(uri="memory://user/secret", content="alice's secret"))
    alice.dispatch(MemoryOpCommit(session_id="s", messages=({"role": "user", "content": "alice speaking"},)))
    bob.dispatch(MemoryOpWrite(uri="memory://user/secret", content="bob's secret"))

    assert read(as_user("alice"), "memory://user/secret") == "alice's secret"
    assert read(as_user("bob"), "memory://user/secret") == "bob's secret"
    missing = carol.dispatch(MemoryOpRead(uri="memory://user/secret"))
    assert isinstance(missing, MemoryExecutionFailure) and missing.kind == "not_found"
    assert read(carol, "memory://session/s/transcript") == ""  # none of alice's messages
    assert carol.dispatch(MemoryOpList(uri="memory://")) == MemoryListResult(entries=())
    assert carol.dispatch(MemoryOpFind(query="secret")) == MemoryFindResult(hits=())
    bob_found = bob.dispatch(MemoryOpFind(query="secret"))
    assert isinstance(bob_found, MemoryFindResult) and [h.snippet for h in bob_found.hits] == ["bob's secret"]

    assert store_key(key, "alice") == f"{key}@alice" and store_key(key, None) == key
    assert store_key(key, "carol@example.com") == f"{key}@~" + b"carol@example.com".hex()
    alices = stored(durable_backend, f"{key}@alice")
    assert [p for p in alices if p.startswith("openrath/session/s/commits/")] != []  # her commit's archive
    assert {p: t for p, t in alices.items() if "/commits/" not in p} == {"openrath/user/secret.md": "alice's secret"}
    assert stored(durable_backend, f"{key}@bob") == {"openrath/user/secret.md": "bob's secret"}
    assert stored(durable_backend, key) == {}  # the namespace without a user is a store of its own
    assert not any(n.startswith("sessions/") for n in durable_backend.objects(f"{key}@bob"))


def test_a_key_that_cannot_hold_a_user_is_refused(local_backend, key):
    with pytest.raises(ValueError, match="'@'"):
        rm.get("flyte").open(MemoryStoreSpec(namespace=f"{key}@alice"))
    with pytest.raises(ValueError, match="'@'"):
        rm.get("flyte").open(MemoryStoreSpec(user_id="bob", options={"key": f"{key}@alice"}))
    with pytest.raises(ValueError, match="user_id"):
        rm.get("flyte").open(MemoryStoreSpec(user_id="bob", options={"store": MemoryStore.get_or_create(key=key)}))
    alone = rm.get("flyte").open(MemoryStoreSpec(user_id=key))  # a user without a namespace: the default base
    alone.dispatch(MemoryOpWrite(uri="memory://user/n", content="x"))
    assert MemoryStore.get_or_create(key=f"openrath@{key}").read_text("openrath/user/n.md") == "x"


def test_any_user_id_opens_a_key_of_its_own(durable_backend, key):
    """A user whose segment would make the key too long for a directory name is its sha256 (``~~``+hex)."""
    import hashlib

    def as_user(user_id):
        return rm.get("flyte").open(MemoryStoreSpec(namespace=key, user_id=user_id))

    long_a, long_b = "a b" * 40, "a b" * 39 + "a c"  # 240 hex digits encoded: over the limit
    as_user(long_a).dispatch(MemoryOpWrite(uri="memory://user/n", content="a"))
    as_user(long_b).dispatch(MemoryOpWrite(uri="memory://user/n", content="b"))
    assert read(as_user(long_a), "memory://user/n") == "a" and read(as_user(long_b), "memory://user/n") == "b"
    digest = f"{key}@~~" + hashlib.sha256(long_a.encode()).hexdigest()
    assert store_key(key, long_a) == digest
    assert stored(durable_backend, digest) == {"openrath/user/n.md": "a"}
    fits = "u" * (255 - len(key) - 1)  # the longest user kept as itself: keys that worked never move
    assert store_key(key, fits) == f"{key}@{fits}"
    with pytest.raises(ValueError, match="255-byte limit"):
        rm.get("flyte").open(MemoryStoreSpec(namespace="k" * 256))
    with pytest.raises(ValueError, match="255-byte limit"):
        store_key("k" * 200, long_a)  # even the digest form does not fit


CHILD = """
import json, os, sys, time
sys.path.insert(0, {tests!r})
from workers import setup
config = json.loads(sys.argv[1])
setup(config)
import flyteplugins_memory.adapters.openrath
import rath.memory as rm
from rath.memory import MemoryOpWrite, MemoryOpCommit, MemoryStoreSpec, MemoryWriteResult, MemoryCommitResult

store = rm.get("flyte").open(MemoryStoreSpec(options={{"key": config["key"]}}))
while not os.path.exists(config["go"]):
    time.sleep(0.01)
w = config["worker"]
for i in range(config["rounds"]):
    r = store.dispatch(MemoryOpWrite(uri=f"memory://user/w{{w}}/{{i}}", content=f"item {{w}} {{i}}"))
    assert isinstance(r, MemoryWriteResult), r
    r = store.dispatch(MemoryOpWrite(uri="memory://agent/shared", content=f"{{w}}:{{i}}", mode="append"))
    assert isinstance(r, MemoryWriteResult), r
    r = store.dispatch(MemoryOpCommit(session_id="s", messages=({{"role": "user", "content": f"{{w}}:{{i}}"}},)))
    assert isinstance(r, MemoryCommitResult), r
"""


def test_two_processes_writing_one_key_lose_nothing(durable_backend_and_endpoint, key, tmp_path):
    backend, endpoint = durable_backend_and_endpoint
    MemoryStore.create(key=key)
    go = tmp_path / "go"
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "rounds": 3, "go": str(go)}
    code = CHILD.format(tests=TESTS)
    race_children(code, config, timeout=120)

    expected = {f"{w}:{i}" for w in range(2) for i in range(3)}
    on_disk = stored(backend, key)
    assert {k for k in on_disk if k.startswith("openrath/user/")} == {
        f"openrath/user/w{w}/{i}.md" for w in range(2) for i in range(3)
    }
    assert set(on_disk["openrath/agent/shared.md"].split("\n")) == expected  # every append kept
    transcript = read(opened(key), "memory://session/s/transcript")
    assert {line.removeprefix("user: ") for line in str(transcript).splitlines()} == expected


def test_reads_over_a_callers_handle_never_drop_its_unsaved_changes(durable_backend, key):
    """A read that would refresh (a missing entry, an empty transcript) does not while the caller's handle
    holds unsaved changes: the caller's conflicting edit stays, and its save conflicts as without us."""
    caller = MemoryStore.get_or_create(key=key)
    caller.write_text("openrath/user/x.md", "mine")  # unsaved
    other = MemoryStore.get_or_create(key=key)
    other.write_text("openrath/user/x.md", "theirs")
    other.save(actor="other")
    theirs = rm.get("flyte").open(MemoryStoreSpec(options={"store": caller}))
    missing = theirs.dispatch(MemoryOpRead(uri="memory://user/missing"))
    assert isinstance(missing, MemoryExecutionFailure) and missing.kind == "not_found"
    assert read(theirs, "memory://session/none/transcript") == ""
    assert read(theirs, "memory://user/x") == "mine"  # the handle's state, as is
    assert caller.has_unsaved_changes() and caller.read_text("openrath/user/x.md") == "mine"
    with pytest.raises(ConcurrencyError):
        caller.save(actor="caller")
    assert stored(durable_backend, key) == {"openrath/user/x.md": "theirs"}


def test_writes_over_a_callers_handle_never_commit_its_unsaved_changes(durable_backend, key, tmp_path):
    """Every mutating op over a caller's handle holding unsaved changes is refused (``unauthorized``,
    detail ``UnsavedChanges``) before anything runs or lands; the caller's change stays unsaved and
    saves under the caller's actor; once saved, the adapter writes again."""
    (tmp_path / "note.txt").write_text("a note\n")
    caller = MemoryStore.get_or_create(key=key)
    caller.write_text("base.md", "committed")
    caller.save(actor="caller")
    caller.write_text("mine/draft.md", "caller's unsaved draft")
    extracted: list[object] = []
    theirs = rm.get("flyte").open(
        MemoryStoreSpec(
            options={
                "store": caller,
                "extract": lambda messages: extracted.append(messages) or [],
                "resource_import_roots": [str(tmp_path)],
            }
        )
    )
    before = durable_backend.objects(key)
    for op in (
        MemoryOpWrite(uri="memory://user/n", content="adapter's"),
        MemoryOpWrite(uri="memory://user/n", content="adapter's", mode="append"),
        MemoryOpCommit(session_id="s", messages=({"role": "user", "content": "hi"},)),
        MemoryOpResource(source=str(tmp_path / "note.txt")),
    ):
        refused = theirs.dispatch(op)
        assert isinstance(refused, MemoryExecutionFailure), refused
        assert refused.kind == "unauthorized" and refused.detail == "UnsavedChanges", refused
        assert "save() or revert()" in refused.message
    assert extracted == []  # refused before extract ran
    assert durable_backend.objects(key) == before  # nothing new in storage
    assert caller.has_unsaved_changes() and caller.read_text("mine/draft.md") == "caller's unsaved draft"
    assert sorted(caller.list_paths()) == ["base.md", "mine/draft.md"]  # nothing of the adapter's staged
    caller.save(actor="caller")
    assert caller.log(limit=1)[0].actor == "caller"
    assert isinstance(theirs.dispatch(MemoryOpWrite(uri="memory://user/n", content="now")), MemoryWriteResult)
    assert MemoryStore.get_or_create(key=key).log(limit=1)[0].actor == "openrath"
    assert stored(durable_backend, key) == {"openrath/user/n.md": "now"}


def test_read_only_prefixes_persist_when_the_open_creates_the_key(durable_backend, key):
    """``read_only_prefixes`` of the open that creates the key are persisted with the store (every later
    handle enforces them); given to an open of a key that exists, they are that handle's alone."""
    first = opened(key, read_only_prefixes=("openrath/agent",))
    refused = first.dispatch(MemoryOpWrite(uri="memory://agent/rule", content="x"))
    assert isinstance(refused, MemoryExecutionFailure) and refused.kind == "unauthorized", refused
    later = opened(key).dispatch(MemoryOpWrite(uri="memory://agent/rule", content="x"))  # opened without them
    assert isinstance(later, MemoryExecutionFailure) and later.kind == "unauthorized", later
    assert MemoryStore.get_or_create(key=key).persisted_read_only_prefixes() == ("openrath/agent",)

    other = f"{key}-exists"
    assert isinstance(opened(other).dispatch(MemoryOpWrite(uri="memory://user/a", content="a")), MemoryWriteResult)
    scoped = opened(other, read_only_prefixes=("openrath/agent",))
    refused = scoped.dispatch(MemoryOpWrite(uri="memory://agent/rule", content="x"))
    assert isinstance(refused, MemoryExecutionFailure) and refused.kind == "unauthorized", refused
    assert isinstance(opened(other).dispatch(MemoryOpWrite(uri="memory://agent/rule", content="x")), MemoryWriteResult)
    assert stored(durable_backend, other) == {"openrath/user/a.md": "a", "openrath/agent/rule.md": "x"}
    assert "openrath/agent/rule.md" not in stored(durable_backend, key)
