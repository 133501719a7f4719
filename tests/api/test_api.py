"""The public surface: a superset of upstream's, uniformly sync + ``.aio``, typed and exported."""

from __future__ import annotations

import inspect
import pathlib
from importlib.metadata import entry_points

import flyte.ai.agents as upstream
import pytest
from flyte.types import TypeEngine

import flyteplugins_memory
from flyteplugins_memory import MemoryStore, MemoryStoreTransformer

IO_METHODS = [
    "save",
    "flush_messages",
    "read_text",
    "read_json",
    "write_text",
    "write_json",
    "get_meta",
    "current_sha",
    "list_paths",
    "exists",
    "audit_tail",
    "list_versions",
    "read_version",
    "gc",
    "purge",
    "set_gc_window",
    "set_metadata",
    "messages_tail",
    "messages_since",
    "write_bytes",
    "read_bytes",
    "read_version_bytes",
    "delete_prefix",
    "delete_store",
    "export",
]


def test_all_is_sorted_and_complete():
    exported = flyteplugins_memory.__all__
    assert exported == sorted(exported)
    public = {n for n, v in vars(flyteplugins_memory).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert public == set(exported)


def test_upstream_public_names_all_exist(tmp_path):
    for name in ("AccessDenied", "ConcurrencyError", "MemoryMeta", "MemoryStore", "MemoryStoreError"):
        assert hasattr(flyteplugins_memory, name)
    upstream_api = {n for n in dir(upstream.MemoryStore(key="k", root=tmp_path / "a")) if not n.startswith("_")}
    assert upstream_api <= set(dir(MemoryStore(key="k", root=tmp_path / "b")))


def test_constructor_and_keyed_signatures_match_upstream():
    for name in ("__init__", "create", "get_or_create", "remote_path_for_key", "write_text", "read_text"):
        ours = inspect.signature(getattr(MemoryStore, name))
        # upstream's wrapper shows a classmethod's `cls`; ours is bound to the class, as a classmethod is
        upstream_signature = inspect.signature(getattr(upstream.MemoryStore, name))
        theirs = [p for p in upstream_signature.parameters.values() if p.name != "cls"]
        assert list(ours.parameters)[: len(theirs)] == [p.name for p in theirs], name
        added = list(ours.parameters.values())[len(theirs) :]  # ours may add keyword-only options
        assert all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in added), (name, added)
        for param in theirs:
            if repr(param.default) != "<factory>":  # upstream's dataclass default_factory; ours is None
                assert ours.parameters[param.name].default == param.default, (name, param.name)


def test_every_io_method_is_sync_with_an_aio_twin(tmp_path):
    store = MemoryStore(key="k", root=tmp_path)
    for name in IO_METHODS:
        method = getattr(store, name)
        assert callable(method) and callable(method.aio), name
    for name in ("create", "get_or_create", "exists", "import_store"):
        assert callable(getattr(MemoryStore, name).aio), name


def test_class_level_exists_returns_a_bool_from_sync_code(tmp_path, raw_data_context):
    raw_data_context(str(tmp_path))
    result = MemoryStore.exists(key="nobody")
    assert result is False


def test_type_transformer_is_registered_through_the_entry_point():
    names = {ep.value for ep in entry_points(group="flyte.plugins.types")}
    assert "flyteplugins_memory:register_memory_store_type" in names
    assert isinstance(TypeEngine.get_transformer(MemoryStore), MemoryStoreTransformer)


def test_package_is_typed():
    assert (pathlib.Path(flyteplugins_memory.__file__).parent / "py.typed").is_file()


def test_content_that_is_not_valid_text_is_a_typed_error_and_writes_nothing(tmp_path):
    from flyteplugins_memory import InvalidContent

    store = MemoryStore("k", root=tmp_path / "root")
    for bad in ("lone \ud800 surrogate", b"bytes", 42):
        with pytest.raises(InvalidContent):
            store.write_text("a.txt", bad)  # type: ignore[arg-type]
    assert store.list_paths() == [] and not (tmp_path / "root" / "a.txt").exists()
    assert not store.has_unsaved_changes()


def test_the_conformance_kits_old_name_still_works_with_a_warning():
    import warnings

    from flyteplugins_memory import testing

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = testing.StoreConformance
    assert old is testing.BackendConformance
    assert any(issubclass(w.category, DeprecationWarning) and "BackendConformance" in str(w.message) for w in caught)
    with pytest.raises(AttributeError):
        testing.NoSuchThing  # noqa: B018


def test_the_storage_package_says_what_a_backend_can_do(tmp_path):
    from flyteplugins_memory import UnsupportedBackend, storage

    local = storage.capabilities_for(str(tmp_path))
    assert isinstance(local, storage.Capabilities) and local.atomic_create and local.symlinks
    assert storage.capabilities_for("s3://bucket/key").if_match  # no request: s3fs is known
    with pytest.raises(UnsupportedBackend):
        storage.capabilities_for("http://example.invalid/key")  # no request is made
    assert set(storage.__all__) <= set(dir(storage))


READER_MEMBERS = ("read_text", "read_bytes", "open_bytes", "read_json", "list_paths", "get_meta", "current_sha")


def test_a_handle_a_scope_and_a_past_commit_are_each_a_memory_reader(local_backend, key):
    """`MemoryReader` (its types are checked by tests/api/test_typing.py): the three views have its members with
    the same parameters, and code written against it reads each one, from storage."""
    import inspect

    from flyteplugins_memory import MemoryReader, ScopedStore, StoreAt

    assert set(READER_MEMBERS) == set(vars(MemoryReader)["__annotations__"])
    for name in READER_MEMBERS:
        signatures = {
            cls.__name__: inspect.signature(getattr(cls, name)) for cls in (MemoryStore, ScopedStore, StoreAt)
        }
        params = {cls: list(sig.parameters.values())[1:] for cls, sig in signatures.items()}  # without self
        assert len({str(p) for p in params.values()}) == 1, (name, params)

    def described(reader: MemoryReader) -> list[tuple[str, str, str]]:
        return [(p, reader.read_text(p), reader.current_sha(p)[:8]) for p in reader.list_paths()]

    store = MemoryStore.create(key=key)
    store.write_text("users/a/notes.md", "first", metadata={"topic": "x"})
    store.save()
    first = store.log()[0]
    store.write_text("users/a/notes.md", "second")
    store.save()
    reopened = MemoryStore.open(key=key)
    readers = [reopened, reopened.scope("users/a"), reopened.at(first)]
    assert all(isinstance(r, MemoryReader) for r in readers)
    seen = [described(r) for r in readers]
    assert [row[:2] for row in seen[0]] == [("users/a/notes.md", "second")]
    assert [row[:2] for row in seen[1]] == [("notes.md", "second")]
    assert [row[:2] for row in seen[2]] == [("users/a/notes.md", "first")]
    assert readers[2].get_meta("users/a/notes.md").metadata == {"topic": "x"}


def test_compact_and_compact_transcript_save_through_a_subclass_s_save(local_backend, key):
    """Found by review of the typed core: both save first, through ``save`` itself, so a subclass that
    overrides it (to log, to add a reason) sees those saves as before."""
    calls = []

    class Logged(MemoryStore):
        async def _logged_save(self, *, actor=None, reason=None):
            calls.append("save")
            return await MemoryStore.save.aio(self, actor=actor, reason=reason)

        save = flyteplugins_memory._base.syncify.syncify(_logged_save)

    store = Logged.create(key=key)
    store.extend([{"role": "user", "content": f"m{i}"} for i in range(4)])
    store.compact()
    store.compact_transcript(lambda folded: "summary", keep_last=1)
    assert calls == ["save", "save"]
    assert [m["content"] for m in MemoryStore.open(key=key).messages] == ["summary", "m3"]


def test_unsaved_paths_say_where_the_unsaved_changes_are(durable_backend, key):
    store = MemoryStore.get_or_create(key=key)
    assert store.unsaved_paths() == [] and not store.has_unsaved_changes()
    store.write_text("notes/a.md", "a")
    store.write_text("notes/b.md", "b")
    store.append({"role": "user", "content": "hi"})
    store.records("events/ada").append({"kind": "login"})
    assert store.unsaved_paths() == ["events/ada", "messages.json", "notes/a.md", "notes/b.md"]
    store.save()
    assert store.unsaved_paths() == [] and not store.has_unsaved_changes()
    assert "notes/a.md" in durable_backend.objects(key)
    store.delete("notes/a.md")
    store.set_metadata("notes/b.md", {"tag": "x"})
    assert store.unsaved_paths() == ["notes/a.md", "notes/b.md"]
    store.revert(["notes/a.md"])
    assert store.unsaved_paths() == ["notes/b.md"]
