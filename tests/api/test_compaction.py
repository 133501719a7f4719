"""Transcript compaction (`store.compact_transcript`), on local disk and moto S3: older messages move to an
archive record log, exactly and in order, and one summary takes their place; storage holds both; messages
other handles append meanwhile survive after the summary; two compactions of the same messages never
archive one twice; bad input and a failing summarizer change nothing. Sessions validate typed messages."""

from __future__ import annotations

import json
import threading

import pytest
from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import (
    CompactionResult,
    ConcurrencyError,
    InvalidArgument,
    InvalidMessage,
    InvalidPath,
    MemoryStore,
    ReadOnlyPath,
    UserMessage,
)
from flyteplugins_memory._api.transcript.compaction import DEFAULT_ARCHIVE
from flyteplugins_memory._rules.fold import fold_point
from released import ISSUE_9_RELEASE, released_source, run_released


def turns(n: int, start: int = 0) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(start, start + n)]


def stored_transcript(backend, key: str) -> list[dict]:
    return json.loads(backend.objects(key)["messages.json"])


def archived_in_storage(backend, key: str, log: str = DEFAULT_ARCHIVE) -> list[dict]:
    """The archive's records as the backend holds them (segments in name order: one writer here)."""
    segments = sorted((n, d) for n, d in backend.objects(key).items() if n.startswith(log + "/"))
    return [json.loads(line) for _, data in segments for line in data.decode().splitlines()]


def summary_of(messages: list[dict]) -> str:
    return "summary of " + ",".join(m["content"] for m in messages)


def test_round_trip_summary_archive_audit_and_what_lands_in_storage(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.extend(turns(6))
    result = store.compact_transcript(summary_of, keep_last=2, actor="janitor", reason="context window")
    expected_summary = {"role": "user", "content": "summary of m0,m1,m2,m3"}
    assert result == CompactionResult(archived=4, archive=DEFAULT_ARCHIVE, summary=expected_summary)
    assert store.messages == [expected_summary, *turns(2, 4)] and not store.has_unsaved_changes()
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.messages == store.messages and fresh.records(DEFAULT_ARCHIVE).read() == turns(4)
    assert stored_transcript(durable_backend, key) == store.messages  # upstream's messages.json
    assert archived_in_storage(durable_backend, key) == turns(4)
    event = [e for e in fresh.audit_tail(10) if e["op"] == "compact"]
    assert len(event) == 1 and event[0]["path"] == "messages.json" and event[0]["actor"] == "janitor"
    assert "4 messages moved to log archive/transcript" in event[0]["reason"] and "context window" in event[0]["reason"]
    assert fresh.log(1)[0].reason.endswith("context window")
    upstream = UpstreamStore.get_or_create(key=key)  # upstream reads the compacted transcript
    assert upstream.messages == store.messages


def test_repeated_compactions_archive_everything_once_in_order(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.extend(turns(5))
    store.compact_transcript(summary_of, keep_last=1)
    store.extend(turns(4, 5))  # unsaved: compact_transcript saves them first
    second = store.compact_transcript(lambda ms: "rolled up", keep_last=2, archive="logs/old")
    assert second.archived == 4 and store.messages == [{"role": "user", "content": "rolled up"}, *turns(2, 7)]
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.records(DEFAULT_ARCHIVE).read() == turns(4)
    first_summary = {"role": "user", "content": "summary of m0,m1,m2,m3"}
    assert fresh.records("logs/old").read() == [first_summary, *turns(3, 4)]  # the earlier summary too
    store.compact_transcript(summary_of, keep_last=0, archive="logs/old")
    everything = [first_summary, *turns(3, 4), {"role": "user", "content": "rolled up"}, *turns(2, 7)]
    assert MemoryStore.get_or_create(key=key).records("logs/old").read() == everything


def test_keep_last_edges_change_nothing_and_bad_input_is_refused(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    called = []
    assert store.compact_transcript(called.append, keep_last=3) == CompactionResult(0, DEFAULT_ARCHIVE, None)
    store.extend(turns(3))
    store.save()
    seq = store.log(1)[0].seq
    for keep in (3, 4, 100):
        assert store.compact_transcript(called.append, keep_last=keep).archived == 0
    assert called == [] and store.log(1)[0].seq == seq and store.messages == turns(3)
    for bad in ("2", 1.5, True, -1, None):
        with pytest.raises(InvalidArgument):
            store.compact_transcript(summary_of, keep_last=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.compact_transcript("not callable", keep_last=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.compact_transcript(summary_of, keep_last=1, archive=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage):
        store.compact_transcript(summary_of, keep_last=1, actor=3)  # type: ignore[arg-type]
    assert store.messages == turns(3) and MemoryStore.get_or_create(key=key).list_paths() == []
    result = store.compact_transcript(summary_of, keep_last=0)  # everything folds
    assert result.archived == 3 and store.messages == [{"role": "user", "content": "summary of m0,m1,m2"}]


def test_a_read_only_or_reserved_archive_is_refused_before_summarizing(local_backend, key):
    store = MemoryStore.get_or_create(key=key, read_only_prefixes=("frozen/",))
    store.extend(turns(4))
    with pytest.raises(ReadOnlyPath):
        store.compact_transcript(summary_of, keep_last=1, archive="frozen/archive")
    with pytest.raises(InvalidPath):
        store.compact_transcript(summary_of, keep_last=1, archive="../escape")
    assert store.messages == turns(4)


def test_tool_exchanges_stay_on_one_side():
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    messages = [*turns(2), call, result, dict(result, tool_call_id="c2"), {"role": "assistant", "content": "done"}]
    assert fold_point(messages, 1) == 5  # the boundary falls after the exchange
    assert fold_point(messages, 2) == 2 and fold_point(messages, 3) == 2  # inside it: rounds up, keeps it whole
    assert fold_point(messages, 4) == 2 and fold_point(messages, 5) == 1
    assert fold_point([*turns(2), call], 0) == 2  # an unanswered call stays, for its results to follow
    assert fold_point([call, result], 1) == 0


def test_tool_calls_are_kept_with_their_results_in_the_store(local_backend, key):
    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    call = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": "3"}
    store.extend([*turns(2), call, result, {"role": "assistant", "content": "it is 3"}])
    assert store.compact_transcript(summary_of, keep_last=2).archived == 2
    assert store.messages[1:] == [call, result, {"role": "assistant", "content": "it is 3"}]


def test_async_summarize_and_typed_summary(local_backend, key):
    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    store.extend(turns(4))

    async def summarize(messages):
        return UserMessage(content=f"{len(messages)} folded")

    assert store.compact_transcript(summarize, keep_last=1).summary == {"role": "user", "content": "3 folded"}
    assert MemoryStore.get_or_create(key=key).messages[0] == {"role": "user", "content": "3 folded"}


def test_a_summarize_that_raises_or_returns_a_bad_summary_changes_nothing(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    store.extend(turns(4))
    store.save()
    seq = store.log(1)[0].seq

    def boom(messages):
        raise RuntimeError("model down")

    with pytest.raises(RuntimeError, match="model down"):
        store.compact_transcript(boom, keep_last=1)
    for bad in (None, 7, {"role": "wizard", "content": "x"}, {"role": "assistant"}):
        with pytest.raises(InvalidMessage):
            store.compact_transcript(lambda ms, bad=bad: bad, keep_last=1)
    assert store.messages == turns(4) and not store.has_unsaved_changes()
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.log(1)[0].seq == seq and fresh.messages == turns(4) and fresh.list_paths() == []
    assert not any(n.startswith("archive/") for n in durable_backend.objects(key))


def test_an_unvalidated_store_takes_any_dict_summary(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.extend(turns(3))
    summary = {"role": "wizard", "content": "free form"}
    assert store.compact_transcript(lambda ms: summary, keep_last=1).summary == summary


def test_a_message_appended_by_another_handle_during_compaction_survives(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.extend(turns(4))
    store.save()
    other = MemoryStore.get_or_create(key=key)

    def summarize(messages):  # runs in a thread: another handle appends and saves meanwhile
        other.append({"role": "user", "content": "late"})
        other.save()
        store.append({"role": "user", "content": "mine, unsaved"})
        return "short"

    store.compact_transcript(summarize, keep_last=1)
    # this handle's own append made meanwhile is committed with the compaction, after the other's
    late, mine = {"role": "user", "content": "late"}, {"role": "user", "content": "mine, unsaved"}
    expected = [{"role": "user", "content": "short"}, turns(4)[3], late, mine]
    assert store.messages == expected and not store.has_unsaved_changes()
    assert MemoryStore.get_or_create(key=key).messages == stored_transcript(durable_backend, key) == expected
    other.append({"role": "user", "content": "after"})  # the other handle appends onto the compacted transcript
    other.save()
    assert MemoryStore.get_or_create(key=key).messages == [*expected, {"role": "user", "content": "after"}]
    assert archived_in_storage(durable_backend, key) == turns(3)


def test_racing_compactions_archive_each_message_once(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.extend(turns(6))
    store.save()
    other = MemoryStore.get_or_create(key=key)

    async def summarize(messages):  # the other handle compacts the same messages first
        await other.compact_transcript.aio(lambda ms: "theirs", keep_last=2)
        return "ours"

    with pytest.raises(ConcurrencyError) as raised:
        store.compact_transcript(summarize, keep_last=2)
    assert raised.value.paths == ("messages.json",)
    assert store.messages == turns(6) and not store.has_unsaved_changes()  # left as it was
    assert archived_in_storage(durable_backend, key) == turns(4)  # once, by the winner
    store.refresh()
    assert store.compact_transcript(summary_of, keep_last=2).archived == 1  # retry after refresh
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.records(DEFAULT_ARCHIVE).read() == [*turns(4), {"role": "user", "content": "theirs"}]
    assert fresh.messages == [{"role": "user", "content": "summary of theirs"}, *turns(2, 4)]


def test_threads_compacting_and_appending_lose_nothing(local_backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.extend(turns(8))
    seed.save()
    handles = [MemoryStore.get_or_create(key=key) for _ in range(4)]
    barrier, outcomes = threading.Barrier(4), []

    def compact(store):
        barrier.wait()
        try:
            outcomes.append(store.compact_transcript(lambda ms: f"{len(ms)} folded", keep_last=2).archived)
        except ConcurrencyError:
            outcomes.append("conflict")

    def append(store, i):
        barrier.wait()
        store.append({"role": "user", "content": f"extra{i}"})
        store.save()

    threads = [threading.Thread(target=compact, args=(h,)) for h in handles[:2]]
    threads += [threading.Thread(target=append, args=(h, i)) for i, h in enumerate(handles[2:])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fresh = MemoryStore.get_or_create(key=key)
    originals = [m["content"] for m in fresh.records(DEFAULT_ARCHIVE).read() + fresh.messages]
    originals = [c for c in originals if not c.endswith("folded")]
    assert sorted(originals) == sorted([f"m{i}" for i in range(8)] + ["extra0", "extra1"])  # each once
    assert [o for o in outcomes if o != "conflict"] and fresh.messages[0]["content"].endswith("folded")


def test_session_messages_are_validated_with_the_typed_models(local_backend, key):
    strict = MemoryStore.get_or_create(key=key, validate_messages=True).session("chat")
    strict.append(UserMessage(content="hi"))
    with pytest.raises(InvalidMessage):
        strict.append({"role": "wizard", "content": "x"})
    with pytest.raises(InvalidMessage):
        strict.extend([{"role": "user", "content": "ok"}, {"role": "assistant"}])
    assert strict.messages == [{"role": "user", "content": "hi"}]
    loose = MemoryStore.get_or_create(key=key).session("chat")
    loose.append({"role": "wizard", "content": "x"})  # upstream's rule: any dict
    assert loose.count() == 1


def test_the_previous_release_saves_over_a_compacted_transcript(local_backend, key, tmp_path):
    store = MemoryStore.get_or_create(key=key)
    store.extend(turns(4))
    store.compact_transcript(summary_of, keep_last=1)
    released = released_source(ISSUE_9_RELEASE, tmp_path / "released")
    config = {"key": key, "raw": local_backend.raw_data_path, "endpoint": None}
    run_released(released, "write", {**config, "writes": {"notes/a.md": "from 0.4"}})
    fresh = MemoryStore.get_or_create(key=key)
    summary = {"role": "user", "content": "summary of m0,m1,m2"}
    assert fresh.messages == [summary, turns(4)[3], {"role": "user", "content": "notes/a.md"}]
    assert fresh.records(DEFAULT_ARCHIVE).read() == turns(3)


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
