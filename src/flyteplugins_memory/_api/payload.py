"""What a store travels as between Flyte tasks, and when it may not travel.

A store leaves a task as a small payload (key, location, options, the inline transcript and the commit it
was sent at; the files stay in storage). Flyte reaches it two ways:

- as a task output or input of type `MemoryStore`, or an element of ``list[MemoryStore]`` or
  ``dict[str, MemoryStore]``, through our type transformer (`_api.flyte_type`), which is async and saves a store
  with unsaved changes before sending it;
- nested in a value Flyte encodes as one MessagePack blob (a dataclass field, ``list[SomeDataclass]``,
  ``dict[int, MemoryStore]``), through mashumaro's synchronous ``MemoryStore._serialize``. That call runs on
  flyte's event loop: a save there would block every coroutine on that loop for the whole upload (our own
  I/O runs on our own loop since issue 9, so it would no longer deadlock; docs/decisions/0029, "Stores nested in
  task outputs", says why we still refuse). Sending the payload anyway would drop the unsaved files silently
  (the receiver would see the new messages, which travel inline, but not the files), so `refuse_unsaved`
  fails the task instead, before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._rules.transcript import committed_form
from ..errors import UnsavedChanges

if TYPE_CHECKING:
    from .store import MemoryStore

S = TypeVar("S", bound="MemoryStore")


def payload(store: MemoryStore) -> dict[str, Any]:
    """The fields a store travels as (upstream's, plus the commit number it was sent at)."""
    return {
        "messages": committed_form(store.messages),  # what storage holds, as the receiver will see it
        "key": store.key,
        "remote_path": store.remote_path,
        "read_only_prefixes": list(store.read_only_prefixes),
        "audit": store.audit,
        "keep_versions": store.keep_versions,
        "validate_messages": store.validate_messages,  # the receiver checks its appends as the sender did
        "seq": store._checkout.payload_seq(),
        # which of the key's stores that commit belongs to (`_journal.generations`; None: the sender never loaded)
        "generation": store._checkout.generation,
    }


def refuse_unsaved(store: MemoryStore) -> None:
    """Raise `UnsavedChanges` if `store` holds changes that a payload alone would lose."""
    if store.has_unsaved_changes():
        raise UnsavedChanges(
            f"MemoryStore {store.key!r} has unsaved changes and is being sent inside another value (a dataclass "
            "field, or a collection Flyte encodes as one value). Flyte encodes those synchronously on its event "
            "loop, where the store cannot save itself, and sending it unsaved would lose the changes: call "
            "`await store.save.aio()` (`store.save()` in sync code) before returning or passing it. A store "
            "returned on its own, or in a list[MemoryStore] or dict[str, MemoryStore], is saved for you."
        )


def received_store(cls: type[S], value: dict[str, Any]) -> S:
    """A store rebuilt from its payload; it loads the exact commit it was sent at on first use.

    A sender that had loaded its store sends the commit it was at: its inline transcript is that commit's
    plus its own changes, and wins (as upstream). One that never loaded sends no commit: its messages are
    appends made before any load, kept after the committed transcript when this loads."""
    store = cls(
        key=value["key"],
        messages=list(value.get("messages") or []),
        remote_path=value.get("remote_path"),
        read_only_prefixes=tuple(value.get("read_only_prefixes") or ()),
        audit=value.get("audit", True),
        keep_versions=value.get("keep_versions", False),
    )
    # set after: the inline transcript holds the committed one, which other handles may have written
    # unvalidated; the flag governs this handle's own appends
    store.validate_messages = value.get("validate_messages") is True
    seq, generation = value.get("seq"), value.get("generation")
    if isinstance(generation, int) and not isinstance(generation, bool) and generation >= 0:
        store._checkout.generation = generation  # a sender before generations sends none: its store is the first
    elif isinstance(seq, int):
        store._checkout.generation = 0
    store._checkout.receive(store, seq if isinstance(seq, int) else None)
    return store


def pydantic_schema(cls: type[S]) -> Any:
    """Inside a pydantic model a store travels as the same payload as anywhere else (pydantic would
    otherwise treat it as upstream's dataclass: dump its fields, temp root included, and fail to rebuild
    it); a store with unsaved changes refuses to travel, as in a dataclass."""
    from pydantic_core import core_schema

    def validate(value: Any) -> S:
        if isinstance(value, cls):
            return value
        if isinstance(value, dict) and isinstance(value.get("key"), str):
            return received_store(cls, value)
        raise ValueError(f"Expected a MemoryStore or its payload, got {type(value).__name__}")

    def serialize(store: MemoryStore) -> dict[str, Any]:
        refuse_unsaved(store)
        return payload(store)

    return core_schema.no_info_plain_validator_function(
        validate, serialization=core_schema.plain_serializer_function_ser_schema(serialize)
    )
