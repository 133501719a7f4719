"""The journal seam (issue 24, item 3): `JournalStorage` maps the journal's logical names to where the journal
lives, so the object-storage contract is about objects under one prefix; each backend is one module."""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from flyteplugins_memory import Capabilities, ObjectStorage
from flyteplugins_memory._journal.journal_storage import JournalStorage
from flyteplugins_memory._rules.journal_location import journal_root, old_journal_root
from flyteplugins_memory.storage import _gcs, _local, _memory, _registry, _s3
from flyteplugins_memory.storage._fsspec import FsspecStorage, filesystem_for


def _run(coro):
    return asyncio.run(coro)


def _files(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _store(tmp_path: pathlib.Path) -> tuple[JournalStorage, pathlib.Path, pathlib.Path]:
    prefix = tmp_path / "stores" / "mine"
    remote = JournalStorage.at(str(prefix))
    return remote, prefix, pathlib.Path(journal_root(str(prefix)))


def test_journal_names_go_to_the_journal_root_and_the_rest_to_the_prefix(tmp_path):
    remote, prefix, journal = _store(tmp_path)
    assert remote.journal_moved and remote.journal_root == str(journal)
    _run(remote.write_many({"a.txt": b"a", "meta/.journal/log/1.json": b"one", "meta/a.txt.json": b"{}"}))
    assert _files(prefix) == {"a.txt": b"a", "meta/a.txt.json": b"{}"}
    assert _files(journal) == {"log/1.json": b"one"}
    assert _run(remote.read("meta/.journal/log/1.json")) == b"one"
    assert _run(remote.read_many(["meta/.journal/log/1.json", "a.txt", "missing"])) == {
        "meta/.journal/log/1.json": b"one",
        "a.txt": b"a",
    }
    assert set(_run(remote.list())) == {"a.txt", "meta/a.txt.json"}  # the prefix only: the journal is outside
    assert _run(remote.list(under="meta/.journal")) == {"meta/.journal/log/1.json": 3}
    assert _run(remote.list(under="meta/.journal/log")) == {"meta/.journal/log/1.json": 3}


def test_creates_and_removals_are_routed_and_kept_in_order(tmp_path):
    remote, prefix, journal = _store(tmp_path)
    assert _run(remote.create_exclusive("meta/.journal/log/1.json", b"first"))
    assert not _run(remote.create_exclusive("meta/.journal/log/1.json", b"second"))
    created = _run(remote.create_many({"x.txt": b"x", "meta/.journal/log/1.json": b"again", "meta/.journal/b": b"b"}))
    assert created == {"x.txt", "meta/.journal/b"}
    assert _run(remote.exists("meta/.journal/b")) and not _run(remote.exists("b"))
    order: list[tuple[str, list[str]]] = []
    for side in (remote.store, remote.journal):
        original = side.remove_many

        async def noted(names, side=side, original=original):
            order.append((side.prefix, list(names)))
            await original(names)

        side.remove_many = noted  # type: ignore[method-assign]
    _run(remote.remove_many(["x.txt", "meta/.journal/b", "meta/.journal/log/1.json"]))
    assert order == [(str(prefix), ["x.txt"]), (str(journal), ["b", "log/1.json"])]
    assert _files(prefix) == {} and _files(journal) == {}


def test_a_view_of_another_journal_shares_the_prefix(tmp_path):
    remote, prefix, _ = _store(tmp_path)
    old = remote.with_journal_root(old_journal_root(remote.prefix))
    assert not old.journal_moved and old.store is remote.store
    _run(old.write_many({"meta/.journal/head.json": b"{}"}))
    assert _files(prefix) == {"meta/.journal/head.json": b"{}"}
    assert _run(old.list()) == {"meta/.journal/head.json": 2}  # inside the prefix: listed with it
    assert _run(remote.read("meta/.journal/head.json")) is None


def test_a_bucket_root_store_keeps_its_journal_inside(tmp_path):
    remote = JournalStorage.at("memory://bucket")
    assert not remote.journal_moved and remote.journal_root == f"{remote.prefix}/meta/.journal"


def test_the_contract_is_about_objects_only(tmp_path):
    for member in ("journal_root", "journal_moved", "with_journal_root"):
        assert member not in ObjectStorage.__dict__
    remote: ObjectStorage = FsspecStorage(str(tmp_path / "s"))
    journal: ObjectStorage = JournalStorage.at(str(tmp_path / "s"))
    assert isinstance(remote, ObjectStorage) and isinstance(journal, ObjectStorage)
    assert not hasattr(remote, "journal_root")
    beside = FsspecStorage(str(tmp_path / "s")).beside(str(tmp_path / "t"))
    _run(beside.write_many({"o": b"1"}))
    assert _files(tmp_path / "t") == {"o": b"1"}


def test_each_verified_backend_is_declared_by_its_own_module():
    declared = [_local.LOCAL, _memory.MEMORY, _s3.S3, _gcs.GCS]
    assert list(_registry.BACKENDS.values()) == declared and set(_registry.VERIFIED) == set(_registry.BACKENDS)
    assert {b.protocols for b in _registry.BACKENDS.values()} == {
        ("file", "local"),
        ("memory",),
        ("s3",),
        ("gs", "gcs"),
    }
    assert _registry.backend_for_protocol("gcs") is _registry.backend_for_protocol("gs")
    assert _registry.backend_for_protocol("abfs") is None
    memory = filesystem_for("memory://x")
    assert _registry.backend_of(memory) is _registry.backend_for_protocol("memory")
    assert _registry.capabilities_of(memory) == Capabilities(
        atomic_create=True, if_match=False, symlinks=False, cross_process=False
    )


def test_the_gcs_emulator_declares_what_it_does_not_honor(monkeypatch):
    gcs = _registry.backend_for_protocol("gs")
    assert gcs is not None
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    assert gcs.declared().atomic_create is True and not gcs.is_emulated()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://localhost:1")
    assert gcs.declared().atomic_create is False and gcs.is_emulated()


@pytest.mark.parametrize("name", ["meta/.journal", "meta/.journalx/a", "meta/.journa/a"])
def test_only_names_inside_the_journal_directory_are_the_journals(tmp_path, name):
    remote, _, _ = _store(tmp_path)
    side, _ = remote._side(name)
    assert (side is remote.journal) == (name == "meta/.journal")
