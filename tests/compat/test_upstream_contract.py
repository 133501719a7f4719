"""Promises of the upstream contract: ours *is* an upstream ``MemoryStore`` (its ``Agent`` uses it), its
working root has upstream's layout, its audit records are copies, and its version snapshots are one per
write, oldest first."""

from __future__ import annotations

import json
import pathlib
import shutil
import time

import flyte.ai.agents as upstream
import pytest
from flyte.ai.agents import Agent, LLMMessage

from flyteplugins_memory import AccessDenied, ConcurrencyError, MemoryStore, MemoryStoreError, PathEscapesRoot
from flyteplugins_memory._handle import mirror

#: what upstream's dataclass defines that is data or plumbing, not behaviour
_PLUMBING = {
    "__module__", "__annotations__", "__doc__", "__dict__", "__weakref__", "__dataclass_params__",
    "__dataclass_fields__", "__match_args__", "root", "read_only_prefixes", "audit", "keep_versions",
}  # fmt: skip
_HIDDEN = ["__post_init__", "_meta_path", "_versions_dir", "_audit_path", "_append_audit", "_load_from_dir"]


def _scripted_llm(replies: list[str], seen: list[list[dict]]):
    async def call_llm(model, system, messages, tools):
        seen.append([dict(m) for m in messages])
        return LLMMessage(content=replies[len(seen) - 1], tool_calls=[])

    return call_llm


# -- identity -------------------------------------------------------------------------------------


def test_ours_is_an_upstream_store_and_our_errors_are_upstreams(tmp_path):
    store = MemoryStore(key="k", root=tmp_path)
    assert isinstance(store, upstream.MemoryStore)
    assert issubclass(ConcurrencyError, upstream.ConcurrencyError)
    assert issubclass(AccessDenied, upstream.AccessDenied) and issubclass(AccessDenied, PermissionError)
    assert issubclass(MemoryStoreError, upstream.MemoryStoreError)
    with pytest.raises(upstream.AccessDenied):
        store.write_text("meta/x.json", "no")
    other = MemoryStore(key="k", root=tmp_path / "other")
    assert store == store and store != other and len({store, other}) == 2  # identity, hashable


def test_no_upstream_helper_is_reachable_unless_we_redefine_it(tmp_path):
    ours_first = MemoryStore.__mro__[: MemoryStore.__mro__.index(upstream.MemoryStore)]
    for name in vars(upstream.MemoryStore):
        if name not in _PLUMBING:
            assert any(name in vars(cls) for cls in ours_first), f"upstream's {name} is reachable"
    store = MemoryStore(key="k", root=tmp_path)
    for name in _HIDDEN:
        assert not hasattr(store, name) and not hasattr(MemoryStore, name), name
    # the redefined ones keep our rules
    with pytest.raises(AccessDenied):
        store._assert_can_write("versions/x")
    (tmp_path / "out").symlink_to(tmp_path.parent)
    with pytest.raises(PathEscapesRoot):
        store._abs("out/secret")


# -- upstream's Agent ----------------------------------------------------------------------------


def test_agent_run_uses_our_store_as_memory(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.extend([{"role": "user", "content": "my name is Ada"}, {"role": "assistant", "content": "hi Ada"}])
    store.write_text("notes/profile.md", "name: Ada")
    store.save()
    seen: list[list[dict]] = []
    agent = Agent(name="t", instructions="I", call_llm=_scripted_llm(["you are Ada"], seen))
    memory = MemoryStore.get_or_create(key=key)
    result = agent.run("what is my name?", memory=memory)
    assert result.memory is memory
    assert [m["content"] for m in seen[0]] == ["my name is Ada", "hi Ada", "what is my name?"]
    memory.save()
    stored = json.loads(durable_backend.upstream_view(key)["messages.json"])
    assert [m["content"] for m in stored] == ["my name is Ada", "hi Ada", "what is my name?", "you are Ada"]
    assert MemoryStore.get_or_create(key=key).read_text("notes/profile.md") == "name: Ada"


async def test_agent_run_aio_appends_to_a_received_store(durable_backend, key):
    store = await MemoryStore.get_or_create.aio(key=key)
    store.append({"role": "user", "content": "first"})
    await store.save.aio()
    received = MemoryStore._deserialize(store._serialize())  # as a task input
    seen: list[list[dict]] = []
    agent = Agent(name="t", instructions="I", call_llm=_scripted_llm(["second reply"], seen))
    result = await agent.run.aio("second", memory=received)
    assert result.memory is received and [m["content"] for m in seen[0]] == ["first", "second"]
    await received.save.aio()
    reopened = await MemoryStore.get_or_create.aio(key=key)
    assert [m["content"] for m in reopened.messages] == ["first", "second", "second reply"]


async def test_upstream_style_awaits_keep_working(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "1")
    assert [e["path"] for e in await store.audit_tail()] == ["a.txt"]  # upstream returned a coroutine
    assert await store.flush_messages() is None
    assert await MemoryStore.exists(key=key) and not await MemoryStore.exists(key=key + "-none")
    assert store.audit_tail()[0]["path"] == "a.txt"  # and the plain call still returns the value


# -- audit records are copies --------------------------------------------------------------------


def test_editing_what_audit_tail_returned_changes_nothing(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.txt", "1", actor="alice")
    for event in store.audit_tail(0):
        event["actor"] = "mallory"  # pending events
    store.save()
    for event in store.audit_tail(0):
        event["actor"] = "mallory"  # committed events
    store.write_text("b.txt", "2", actor="bob")
    store.save()
    store.compact()
    actors = [e["actor"] for e in MemoryStore.get_or_create(key=key).audit_tail(0)]
    assert actors == ["alice", "bob"]
    assert b"mallory" not in durable_backend.upstream_view(key)["audit/log.jsonl"]


# -- the working root ----------------------------------------------------------------------------


def _tree(root: pathlib.Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_root_holds_what_the_handle_wrote_in_upstreams_layout(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.write_text("a/b", "first", actor="t")
    store.write_text("a__b", "second")
    store.write_text("gone.txt", "x")
    store.delete("gone.txt")
    tree = _tree(store.root)  # before any save: written through at once
    assert tree["a/b"] == b"first" and tree["a__b"] == b"second" and "gone.txt" not in tree
    assert json.loads(tree["meta/a%2Fb.json"])["updated_by"] == "t" and "meta/gone.txt.json" not in tree
    assert {p.split("/")[1] for p in tree if p.startswith("versions/")} == {"a%2Fb", "a__b", "gone.txt"}
    lines = [json.loads(line) for line in tree["audit/log.jsonl"].splitlines()]
    assert lines == store.audit_tail(0)
    assert not [p for p in tree if ".~fpm-" in p]  # atomic writes leave no temp files
    store.flush_messages()
    assert (store.root / "messages.json").read_bytes() == b"[]"


def test_a_root_the_caller_chose_holds_each_write_when_the_call_returns(tmp_path, monkeypatch):
    root = tmp_path / "root"
    store = MemoryStore(key="k", root=root)
    submitted: list[object] = []
    real = mirror._submit
    monkeypatch.setattr(mirror, "_submit", lambda fn, *args: submitted.append(fn) or real(fn, *args))
    for i in range(3):
        store.write_text(f"notes/{i}.md", f"note {i}", actor="t")
        # the directory itself, not `store.root` (which waits for queued mirroring): the caller holds its path
        assert (root / f"notes/{i}.md").read_text() == f"note {i}"
        assert json.loads((root / f"meta/notes%2F{i}.md.json").read_text())["updated_by"] == "t"
        assert len((root / "audit/log.jsonl").read_text().splitlines()) == i + 1
    assert submitted == []  # small writes are mirrored on the loop: no trip to the writer thread
    big = "x" * (mirror.INLINE_MAX_BYTES + 1)
    store.write_text("big.txt", big)
    assert (root / "big.txt").read_text() == big and len(submitted) == 1
    assert not [p for p in _tree(root) if ".~fpm-" in p]


def test_a_write_whose_mirroring_fails_is_refused_on_a_root_the_caller_chose(tmp_path):
    root = tmp_path / "root"
    store = MemoryStore(key="k", root=root)
    store.write_text("a.txt", "one")
    shutil.rmtree(root / "meta")
    (root / "meta").write_text("a code tool's file where the sidecars go")
    with pytest.raises(NotADirectoryError):
        store.write_text("b.txt", "two")
    assert store.list_paths() == ["a.txt"] and store.unsaved_paths() == ["a.txt"]
    assert [e["path"] for e in store.audit_tail(0)] == ["a.txt"]


def test_prefetch_materializes_upstreams_view_of_the_whole_store(durable_backend, key, tmp_path):
    writer = MemoryStore.get_or_create(key=key, keep_versions=True)
    for i in range(5):
        writer.write_text(f"notes/{i}.md", f"note {i}", actor="w")
    writer.write_text("notes/0.md", "note 0 again")
    writer.append({"role": "user", "content": "hello"})
    writer.save()
    writer.compact()  # upstream's audit/log.jsonl is brought up to date at checkpoints
    reader = MemoryStore.get_or_create(key=key)
    assert reader.read_text("notes/3.md") == "note 3"
    assert set(_tree(reader.root)) == {"notes/3.md", "meta/notes%2F3.md.json"}  # only what it read
    assert reader.prefetch() == 4
    theirs = upstream.MemoryStore.get_or_create(key=key)
    expected = {n: d for n, d in _tree(pathlib.Path(theirs.root)).items() if not n.startswith("meta/.journal/")}
    assert _tree(reader.root) == expected


def test_a_code_tool_changing_the_root_does_not_change_what_is_read_or_saved(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("plan.md", "v1")
    store.save()
    (store.root / "plan.md").write_text("edited behind our back")
    assert store.read_text("plan.md") == "v1"  # verified against its sha256, fetched again
    assert (store.root / "plan.md").read_text() == "v1"


# -- versions ------------------------------------------------------------------------------------


def test_every_write_gets_its_own_snapshot_oldest_first(durable_backend, key):
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    other = MemoryStore.get_or_create(key=key, keep_versions=True)
    written = []
    for text in ["A", "B", "A"]:  # the same bytes twice within one second
        store.write_text("p.txt", text)
        written.append(text)
    store.save()
    store.write_text("p.txt", "A")  # and again after a save, still within the second (usually)
    written.append("A")
    store.save()
    other.write_text("q.txt", "A")
    other.save()
    names = store.list_versions("p.txt")
    assert len(names) == 4 and [store.read_version(n) for n in names] == written
    stored = [n for n in durable_backend.upstream_view(key) if n.startswith("versions/p.txt/")]
    assert sorted(stored) == sorted(names)
    store.delete("p.txt")
    time.sleep(0.01)
    assert store.list_versions("p.txt")[-1].rsplit("/", 1)[-1].split("_")[1] == "deleted"
