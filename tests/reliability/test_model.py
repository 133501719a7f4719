"""Model-based: three handles of one key, driven through random writes, deletes, appends, saves,
refreshes, compactions and reopens, checked after every step against a plain in-memory model.

The model states the merge rules in a few lines: a path conflicts when its committed content changed
since the handle's base and differs from ours; transcripts only grow, so appends merge.
FLYTEPLUGINS_MEMORY_STRESS=1 runs a larger budget.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from flyteplugins_memory import ConcurrencyError, MemoryStore
from flyteplugins_memory._journal import commit as _commit
from reports import report

STRESS = bool(os.environ.get("FLYTEPLUGINS_MEMORY_STRESS"))
#: (examples, steps per example) per backend
BUDGET = {"local": (400, 60) if STRESS else (50, 30), "s3": (200, 60) if STRESS else (20, 25)}
HANDLES = 3
#: invariant checks made, per backend (one after each step), for the report
STEPS: Counter[str] = Counter()

paths = st.sampled_from(["a.txt", "b.txt", "notes/c.md", "notes/d.md"])
texts = st.sampled_from(["x", "y", "z"])
handles = st.integers(0, HANDLES - 1)


@dataclass
class Committed:
    """What storage must hold: file contents, the transcript and the audit trail."""

    files: dict[str, str] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    #: the path of every audit event, in commit order
    audit: list[str] = field(default_factory=list)


@dataclass
class Handle:
    """One handle as the model sees it: the committed state it is based on, plus its unsaved changes."""

    store: MemoryStore
    base: Committed
    changes: dict[str, str | None] = field(default_factory=dict)
    appended: list[str] = field(default_factory=list)
    #: the path of every unsaved write and delete (each one an audit event)
    events: list[str] = field(default_factory=list)

    def files(self) -> dict[str, str]:
        merged: dict[str, str | None] = {**self.base.files, **self.changes}
        return {p: c for p, c in merged.items() if c is not None}

    def conflicts(self, committed: Committed) -> list[str]:
        return sorted(
            p
            for p, ours in self.changes.items()
            if committed.files.get(p) != self.base.files.get(p) and committed.files.get(p) != ours
        )


def copy(state: Committed) -> Committed:
    return Committed(dict(state.files), list(state.messages), list(state.audit))


def model_test(backend_name: str) -> None:
    class StoreModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.key = f"model-{uuid.uuid4().hex[:10]}"
            MemoryStore.create(key=self.key)
            self.committed = Committed()
            self.handles = [self._open() for _ in range(HANDLES)]

        def _open(self) -> Handle:
            return Handle(MemoryStore.get_or_create(key=self.key), copy(self.committed))

        @rule(h=handles, path=paths, text=texts)
        def write(self, h: int, path: str, text: str) -> None:
            self.handles[h].store.write_text(path, text)
            self.handles[h].changes[path] = text
            self.handles[h].events.append(path)

        @rule(h=handles, path=paths)
        def delete(self, h: int, path: str) -> None:
            handle = self.handles[h]
            existed = path in handle.files()
            assert handle.store.delete(path) == existed
            if existed:
                handle.events.append(path)
            if path in handle.base.files:
                handle.changes[path] = None
            else:  # created and deleted before any save: nothing left to save
                handle.changes.pop(path, None)

        @rule(h=handles, text=texts)
        def append(self, h: int, text: str) -> None:
            self.handles[h].store.append({"role": "user", "content": text})
            self.handles[h].appended.append(text)

        @rule(h=handles, compact=st.booleans())
        def save(self, h: int, compact: bool) -> None:
            handle = self.handles[h]
            conflicting = handle.conflicts(self.committed)
            if conflicting:
                with pytest.raises(ConcurrencyError) as refused:
                    handle.store.compact() if compact else handle.store.save()
                assert list(refused.value.paths) == conflicting
                return
            handle.store.compact() if compact else handle.store.save()
            if not (handle.events or handle.appended):
                return  # nothing to save: no commit, and the handle stays where it is
            for path, content in handle.changes.items():
                if content is None:
                    self.committed.files.pop(path, None)
                else:
                    self.committed.files[path] = content
            self.committed.messages += handle.appended
            self.committed.audit += handle.events
            self.handles[h] = Handle(handle.store, copy(self.committed))
            fresh = MemoryStore.get_or_create(key=self.key)
            assert {p: fresh.read_text(p) for p in fresh.list_paths()} == self.committed.files
            assert [m["content"] for m in fresh.messages] == self.committed.messages
            assert [e["path"] for e in fresh.audit_tail(0)] == self.committed.audit

        @rule(h=handles)
        def refresh(self, h: int) -> None:
            handle = self.handles[h]
            dropped = handle.conflicts(self.committed)
            assert handle.store.refresh() == dropped
            kept = {p: c for p, c in handle.changes.items() if p not in dropped}
            events = [p for p in handle.events if p not in dropped]
            self.handles[h] = Handle(handle.store, copy(self.committed), kept, handle.appended, events)

        @rule(h=handles)
        def reopen(self, h: int) -> None:
            self.handles[h] = self._open()

        @invariant()
        def every_handle_shows_its_model(self) -> None:
            STEPS[backend_name] += 1
            for handle in self.handles:
                files = handle.files()
                assert handle.store.list_paths() == sorted(files)
                assert {p: handle.store.read_text(p) for p in files} == files
                assert [m["content"] for m in handle.store.messages] == handle.base.messages + handle.appended

    examples, steps = BUDGET[backend_name]
    run_state_machine_as_test(
        StoreModel, settings=settings(max_examples=examples, stateful_step_count=steps, deadline=None, database=None)
    )


@pytest.fixture
def model_backend(durable_backend, monkeypatch):
    # checkpoint every few commits, so saves, opens and refreshes cross checkpoints all the time
    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 3)
    return durable_backend


def test_handles_of_one_key_match_the_model(model_backend):
    model_test(model_backend.name)
    examples, steps = BUDGET[model_backend.name]
    report(
        f"model_{model_backend.name}",
        {"max_examples": examples, "max_steps": steps, "checks": STEPS[model_backend.name]},
    )
