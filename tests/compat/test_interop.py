"""Stores move both ways between ours and the real upstream ``flyte.ai.agents.MemoryStore``."""

from __future__ import annotations

import pathlib

from flyte.ai.agents import MemoryStore as UpstreamStore

from flyteplugins_memory import MemoryStore


def _write_sample(store, texts: dict[str, str]) -> None:
    for path, text in texts.items():
        store.write_text(path, text, actor="writer", reason=f"write {path}")
    store.write_text("notes/a.md", "second version", actor="writer", reason="rewrite")
    store.extend([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
    store.save()


SAMPLE = {"notes/a.md": "first version", "data/x.json": '{"k": 1}', "top.txt": "top"}


def test_upstream_store_opens_in_ours(durable_backend, key):
    upstream = UpstreamStore.get_or_create(key=key, keep_versions=True)
    _write_sample(upstream, SAMPLE)

    ours = MemoryStore.get_or_create(key=key)
    assert ours.remote_path == upstream.remote_path
    assert ours.list_paths() == upstream.list_paths() == ["data/x.json", "notes/a.md", "top.txt"]
    for path in ours.list_paths():
        assert ours.read_text(path) == upstream.read_text(path)
        assert ours.get_meta(path) == _as_ours(upstream.get_meta(path))
    assert ours.messages == upstream.messages
    assert ours.audit_tail(0) == upstream.audit_tail_sync(0)
    upstream_versions = _versions_in(upstream)
    ours_versions = sorted(v for path in SAMPLE for v in ours.list_versions(path))
    assert ours_versions == upstream_versions and len(ours_versions) == 4
    assert {ours.read_version(v) for v in ours.list_versions("notes/a.md")} == {"first version", "second version"}


def test_our_store_opens_in_upstream(durable_backend, key):
    ours = MemoryStore.get_or_create(key=key, keep_versions=True)
    _write_sample(ours, SAMPLE)
    ours.compact()  # brings upstream's audit/log.jsonl up to date (saves do it at checkpoints)

    upstream = UpstreamStore.get_or_create(key=key)
    assert upstream.list_paths() == ours.list_paths()
    for path in ours.list_paths():
        assert upstream.read_text(path) == ours.read_text(path)
        assert _as_ours(upstream.get_meta(path)) == ours.get_meta(path)
        assert upstream.current_sha(path) == ours.current_sha(path)
    assert upstream.messages == ours.messages
    assert upstream.audit_tail_sync(0) == ours.audit_tail(0)
    upstream_versions = _versions_in(upstream)
    assert upstream_versions == sorted(v for path in SAMPLE for v in ours.list_versions(path))


def test_upstream_store_adopted_by_ours_stays_readable_by_upstream(durable_backend, key):
    upstream = UpstreamStore.get_or_create(key=key)
    upstream.write_text("a.txt", "from upstream")
    upstream.append({"role": "user", "content": "1"})
    upstream.save()

    ours = MemoryStore.get_or_create(key=key)
    ours.write_text("b.txt", "from ours")
    ours.delete("a.txt")
    ours.write_text("c.txt", "also ours")
    ours.append({"role": "assistant", "content": "2"})
    ours.compact()

    again = UpstreamStore.get_or_create(key=key)
    assert again.list_paths() == ["b.txt", "c.txt"]
    assert again.read_text("b.txt") == "from ours"
    assert [m["content"] for m in again.messages] == ["1", "2"]
    assert [(e["op"], e["path"]) for e in again.audit_tail_sync(0)] == [
        ("create", "a.txt"),
        ("create", "b.txt"),
        ("delete", "a.txt"),
        ("create", "c.txt"),
    ]
    reopened = MemoryStore.get_or_create(key=key)
    assert reopened.list_paths() == ["b.txt", "c.txt"]
    assert reopened.audit_tail(0) == again.audit_tail_sync(0)


def _versions_in(upstream) -> list[str]:
    """Version snapshots in an upstream store's local working directory."""
    root = pathlib.Path(upstream.root)
    return sorted(p.relative_to(root).as_posix() for p in (root / "versions").rglob("*.txt") if p.is_file())


def _as_ours(meta):
    from flyteplugins_memory import MemoryMeta

    return None if meta is None else MemoryMeta(**vars(meta))
