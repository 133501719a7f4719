"""The typed transcript: message models, ``validate_messages=True`` on `append`/`extend`, and the windowed
reads `messages_tail` / `messages_since`.

What an Agent writes validates; malformed tool calls and unknown roles are refused before anything is
appended; typed instances are stored as upstream's plain dicts; the flag travels with a store sent to
another task; two validating handles appending at once both land.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from flyte.ai.agents import Agent, LLMMessage
from pydantic import TypeAdapter

from flyteplugins_memory import (
    AssistantMessage,
    FunctionCall,
    InvalidArgument,
    InvalidMessage,
    MemoryStore,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

MESSAGE = TypeAdapter(Message)


def _stored(backend, key) -> list[dict]:
    return json.loads(backend.upstream_view(key)["messages.json"])


def _tool_calling_llm():
    """Turn 1: two tool calls (one with arguments that are not JSON); turn 2: the final answer."""
    replies = [
        LLMMessage(
            content="",
            tool_calls=[
                {"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}},
                {"id": "call_2", "name": "shout", "arguments": {"text": "hi"}},
            ],
        ),
        LLMMessage(content="2 + 3 = 5, and HI"),
    ]

    async def call_llm(model, system, messages, tools):
        return replies.pop(0)

    return call_llm


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def test_what_an_agent_writes_validates_and_lands_as_upstreams_json(durable_backend, key):
    memory = MemoryStore.get_or_create(key=key, validate_messages=True)
    agent = Agent(name="t", instructions="I", tools=[add, shout], call_llm=_tool_calling_llm())
    result = agent.run("add 2 and 3, shout hi", memory=memory)
    assert result.error == "" and result.memory is memory
    memory.save()
    stored = _stored(durable_backend, key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    assert stored[1]["tool_calls"][0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
    }
    assert [(m["tool_call_id"], m["content"]) for m in stored[2:4]] == [("call_1", "5"), ("call_2", "HI")]
    assert [type(MESSAGE.validate_python(m)) for m in stored][1:3] == [AssistantMessage, ToolMessage]
    reopened = MemoryStore.get_or_create(key=key, validate_messages=True)
    assert reopened.messages == stored and reopened.messages_tail(1) == [stored[-1]]


def test_typed_instances_are_stored_as_plain_dicts(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)  # accepted without validation too
    call = ToolCall(id="c1", function=FunctionCall(name="lookup", arguments='{"q": "x"}'))
    store.extend(
        [
            SystemMessage(content="be brief"),
            UserMessage(content=[{"type": "text", "text": "hi"}], name="ada"),  # an extra key, kept
            AssistantMessage(tool_calls=[call]),
            ToolMessage(tool_call_id="c1", content="found"),
        ]
    )
    store.save()
    assert _stored(durable_backend, key) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "ada"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": call.function.model_dump()}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    assert all(type(m) is dict for m in store.messages)


def test_provider_keys_are_kept_as_given(local_backend, key):
    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    message = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}],
    }
    store.append(message)
    store.save()
    assert _stored(local_backend, key) == [message]


def _calling(**call) -> dict:
    """An assistant message with one tool call built from `call`."""
    return {"role": "assistant", "tool_calls": [call]}


BAD = {
    "unknown role": ({"role": "wizard", "content": "x"}, "role among"),
    "no role": ({"content": "x"}, "got None"),
    "not a dict": (["user", "x"], "must be a dict"),
    "arguments as a dict": (
        _calling(id="c", type="function", function={"name": "f", "arguments": {}}),
        "tool_calls.0.function.arguments",
    ),
    "tool call without id": (
        _calling(type="function", function={"name": "f", "arguments": "{}"}),
        "tool_calls.0.id",
    ),
    "tool call of another type": (
        _calling(id="c", type="code", function={"name": "f", "arguments": ""}),
        "tool_calls.0.type",
    ),
    "function without name": (
        _calling(id="c", type="function", function={"arguments": ""}),
        "tool_calls.0.function.name",
    ),
    "assistant saying nothing": ({"role": "assistant", "content": None}, "needs content or tool_calls"),
    "tool result without its call": ({"role": "tool", "content": "5"}, "tool_call_id"),
    "user content not text": ({"role": "user", "content": 5}, "content"),
}


@pytest.mark.parametrize("bad,reason", BAD.values(), ids=BAD.keys())
def test_a_malformed_message_is_refused_with_its_reason(tmp_path, bad, reason):
    store = MemoryStore(key="k", root=tmp_path, validate_messages=True)
    with pytest.raises(InvalidMessage, match=re.escape(reason)):
        store.append(bad)
    assert store.messages == [] and not store.has_unsaved_changes()
    if isinstance(bad, dict):  # a store that does not validate takes it, as upstream does
        lax = MemoryStore(key="k", root=tmp_path / "lax")
        lax.append(bad)
        assert lax.messages == [bad]


def test_extend_is_all_or_nothing_and_nothing_reaches_storage(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, validate_messages=True)
    store.append({"role": "user", "content": "kept"})
    store.save()
    with pytest.raises(InvalidMessage, match=r"message 1: .*role among"):
        store.extend([{"role": "assistant", "content": "fine"}, {"role": "bot", "content": "no"}])
    with pytest.raises(InvalidMessage):
        MemoryStore(key="other", messages=[{"role": "bot"}], validate_messages=True)
    assert store.messages == [{"role": "user", "content": "kept"}] and not store.has_unsaved_changes()
    store.save()
    assert _stored(durable_backend, key) == [{"role": "user", "content": "kept"}]


def test_the_flag_is_checked_and_travels_with_a_store_sent_to_another_task(local_backend, key):
    with pytest.raises(InvalidArgument):
        MemoryStore.get_or_create(key=key, validate_messages="yes")  # type: ignore[arg-type]
    lax = MemoryStore.get_or_create(key=key)
    lax.append({"content": "written by a handle that does not validate"})
    lax.save()
    strict = MemoryStore.open(key=key, validate_messages=True)  # the committed transcript is not re-checked
    received = MemoryStore._deserialize(strict._serialize())  # as a task input
    assert received.validate_messages and received.messages_since(0) == lax.messages
    with pytest.raises(InvalidMessage):
        received.append({"role": "bot", "content": "x"})
    assert not MemoryStore._deserialize(lax._serialize()).validate_messages
    old_payload = {k: v for k, v in lax._serialize().items() if k != "validate_messages"}  # a sender of issue 9
    assert not MemoryStore._deserialize(old_payload).validate_messages


def test_two_validating_handles_appending_at_once_both_land(durable_backend, key):
    MemoryStore.create(key=key).save()

    async def turn(text: str) -> None:
        handle = await MemoryStore.get_or_create.aio(key=key, validate_messages=True)
        handle.extend([UserMessage(content=text), {"role": "assistant", "content": f"re: {text}"}])
        await handle.save.aio()

    async def both() -> None:
        await asyncio.gather(turn("a"), turn("b"))

    asyncio.run(both())
    stored = [m["content"] for m in _stored(durable_backend, key)]
    assert sorted(stored) == ["a", "b", "re: a", "re: b"]
    assert stored.index("re: a") == stored.index("a") + 1 and stored.index("re: b") == stored.index("b") + 1


def test_tail_and_since_return_copies_and_refuse_bad_windows(durable_backend, key):
    seed = MemoryStore.get_or_create(key=key)
    seed.extend([{"role": "user", "content": str(i)} for i in range(5)])
    seed.save()
    handle = MemoryStore(key=key, remote_path=seed.remote_path)  # not loaded: the reads load first
    assert [m["content"] for m in handle.messages_tail(2)] == ["3", "4"]
    assert [m["content"] for m in handle.messages_tail(9)] == ["0", "1", "2", "3", "4"]
    assert handle.messages_tail(0) == [] and handle.messages_since(5) == []
    since = handle.messages_since(3)
    since[0]["content"] = "edited"
    assert handle.messages[3]["content"] == "3" and not handle.has_unsaved_changes()
    for bad in (-1, True, "2", 1.0):
        with pytest.raises(InvalidArgument):
            handle.messages_tail(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            handle.messages_since(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="holds 5 messages"):
        handle.messages_since(6)
    assert asyncio.run(handle.messages_tail.aio(1)) == [{"role": "user", "content": "4"}]
    assert _stored(durable_backend, key) == handle.messages


def test_messages_too_deep_for_the_journal_are_refused_at_append(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes.md", "important")
    store.save()
    deep: dict = {"v": 1}
    for _ in range(200):
        deep = {"c": deep}
    with pytest.raises(InvalidMessage, match="deeper"):
        store.append({"role": "tool", "content": deep})
    assert MemoryStore.get_or_create(key=key).read_text("notes.md") == "important"


def test_keys_json_makes_equal_are_refused(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    with pytest.raises(InvalidMessage, match="equal"):
        store.append({"content": {1: "int key", "1": "str key"}})
