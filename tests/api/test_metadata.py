"""File metadata (`write_text(..., metadata=)`, `set_metadata`, `get_meta().metadata`, `list_paths(where=)`):
kept in our journal only (never in upstream's sidecar), merged and conflicting like any write, surviving
saves, reopens, checkpoints, refresh and task I/O, and readable and writable by the previous release."""

from __future__ import annotations

import json

import pytest
from flyte.ai.agents import MemoryMeta as UpstreamMemoryMeta
from flyte.ai.agents import MemoryStore as UpstreamMemoryStore

from flyteplugins_memory import (
    ConcurrencyError,
    CorruptStore,
    InvalidArgument,
    InvalidMetadata,
    MemoryMeta,
    MemoryStore,
)
from flyteplugins_memory._rules.journal_objects import FileEntry
from flyteplugins_memory._rules.metadata import MAX_ENCODED_BYTES, MAX_KEY_LENGTH, MAX_KEYS, from_ext, matches
from released import ISSUE_9_RELEASE, released_source, run_released

SIDECAR = "meta/notes%2Fa.md.json"
TAGS = {"user": "alice", "turn": 3, "score": 0.5, "pinned": True}


def saved(key: str, paths: dict | None = None, **files: dict) -> MemoryStore:
    """A new store holding `paths` and `files` ({path: metadata}; in `files`, '__' stands for '/'), each file
    holding its own path as content."""
    store = MemoryStore.create(key=key)
    for name, metadata in {**(paths or {}), **files}.items():
        path = name.replace("__", "/")
        store.write_text(path, path, metadata=metadata)
    store.save()
    return store


def journal_metadata(backend, key: str, path: str) -> list:
    """Every metadata map the journal's objects hold for `path` (read from storage, not through a store)."""
    found = []
    for name, data in backend.journal(key).items():
        if name.endswith(".json") and data.startswith(b"{"):
            found += _entries_for(json.loads(data), path)
    return found


def _entries_for(doc, path: str) -> list:
    if isinstance(doc, dict):
        if path in doc and isinstance(doc[path], dict) and "sha256" in doc[path]:
            return [doc[path].get("ext", {}).get("metadata")]
        return [m for value in doc.values() for m in _entries_for(value, path)]
    return []


# -- where it lives --------------------------------------------------------------------------------------


def test_metadata_is_kept_in_the_journal_and_never_in_upstreams_sidecar(durable_backend, key):
    written = saved(key, {"notes/a.md": TAGS}).get_meta("notes/a.md")
    assert isinstance(written, UpstreamMemoryMeta) and written.metadata == TAGS

    fresh = MemoryStore.get_or_create(key=key).get_meta("notes/a.md")
    assert fresh is not None and fresh.metadata == TAGS and fresh == written
    assert journal_metadata(durable_backend, key, "notes/a.md") == [TAGS]  # the one record that wrote it
    expected = {"path": "notes/a.md", "sha256": fresh.sha256, "updated_at": fresh.updated_at}
    expected |= {"updated_by": "agent", "reason": "", "bytes": len("notes/a.md")}
    assert durable_backend.upstream_view(key)[SIDECAR] == json.dumps(expected, indent=2).encode()
    assert all(b"alice" not in data for data in durable_backend.upstream_view(key).values())


def test_upstream_reads_the_sidecar_as_before(local_backend, key, tmp_path):
    store = saved(key, {"notes/a.md": TAGS})
    theirs = UpstreamMemoryStore.get_or_create(key=key)
    meta = theirs.get_meta("notes/a.md")
    ours = store.get_meta("notes/a.md")
    assert type(meta) is UpstreamMemoryMeta and ours is not None
    assert (meta.path, meta.sha256, meta.bytes, meta.updated_by) == (ours.path, ours.sha256, ours.bytes, "agent")
    assert not (store.root / SIDECAR).read_text().count("alice")  # the working root's sidecar too


def test_meta_equality_and_hashing_ignore_metadata():
    a = MemoryMeta("p", "0" * 64, "t", "agent", "", 1, {"k": 1})
    b = MemoryMeta("p", "0" * 64, "t", "agent", "", 1)
    assert a == b and hash(a) == hash(b) and b.metadata == {}


# -- what a write does -----------------------------------------------------------------------------------


def test_a_write_replaces_metadata_and_set_metadata_keeps_content(durable_backend, key):
    store = saved(key, a=TAGS, b={"user": "bob"})
    store.write_json("a", {"x": 1})  # no metadata: cleared, as a put replaces the whole item
    updated = store.set_metadata("b", {"user": "carol"}, actor="reviewer", reason="relabel")
    assert updated is not None and updated.metadata == {"user": "carol"} and updated.updated_by == "reviewer"
    assert store.set_metadata("missing", {"k": 1}) is None
    store.save()

    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.get_meta("a").metadata == {} and fresh.read_text("b") == "b"
    assert fresh.get_meta("b").metadata == {"user": "carol"}
    assert [(e["path"], e["actor"]) for e in fresh.audit_tail(2)] == [("a", "agent"), ("b", "reviewer")]
    assert journal_metadata(durable_backend, key, "a")[-1] is None


def test_binary_files_take_metadata_and_a_relabel_keeps_their_bytes(durable_backend, key):
    png = b"\x89PNG\r\n\x1a\n\x00\xff"
    store = MemoryStore.create(key=key)
    store.write_bytes("img/chart.png", png, metadata={"kind": "chart"})
    store.save()
    store.set_metadata("img/chart.png", {"kind": "chart", "reviewed": True})
    store.save()
    fresh = MemoryStore.open(key=key)
    assert fresh.read_bytes("img/chart.png") == png  # the relabel wrote the same bytes back, not text
    assert fresh.get_meta("img/chart.png").metadata == {"kind": "chart", "reviewed": True}
    assert fresh.list_paths(where={"reviewed": True}) == ["img/chart.png"]
    assert journal_metadata(durable_backend, key, "img/chart.png")[-1] == {"kind": "chart", "reviewed": True}


def test_set_metadata_checks_expected_sha(local_backend, key):
    store = saved(key, a={"k": 1})
    with pytest.raises(ConcurrencyError):
        store.set_metadata("a", {"k": 2}, expected_sha="0" * 64)
    assert store.set_metadata("a", {"k": 2}, expected_sha=store.current_sha("a")).metadata == {"k": 2}


BAD = [
    ["k", 1],
    {"k": None},
    {"k": [1]},
    {"k": {"nested": 1}},
    {"k": float("nan")},
    {"k": float("inf")},
    {"": 1},
    {1: "int key"},
    {"k": "\ud800"},
    {"k" * (MAX_KEY_LENGTH + 1): 1},
    {f"k{i}": i for i in range(MAX_KEYS + 1)},
    {"k": "x" * MAX_ENCODED_BYTES},
]


@pytest.mark.parametrize("bad", BAD, ids=range(len(BAD)))
def test_bad_metadata_is_refused_before_anything_changes(local_backend, key, bad):
    store = saved(key, a={"k": 1})
    calls = [
        lambda: store.write_text("b", "b", metadata=bad),
        lambda: store.write_json("b", {"b": 1}, metadata=bad),
        lambda: store.set_metadata("a", bad),
        lambda: store.list_paths(where=bad),
    ]
    for call in calls:
        with pytest.raises(InvalidMetadata) as caught:
            call()
        assert isinstance(caught.value, InvalidArgument | ValueError)
    assert not store.has_unsaved_changes() and store.list_paths() == ["a"]
    assert store.get_meta("a").metadata == {"k": 1} and len(store.audit_tail(0)) == 1


# -- filters -----------------------------------------------------------------------------------------------


def test_where_filters_exactly_with_types(durable_backend, key):
    saved(
        key,
        u__one=TAGS,
        u__int=TAGS | {"pinned": 1, "score": 1},
        u__str=TAGS | {"turn": "3"},
        other=TAGS,
        bare={},
    )
    store = MemoryStore.get_or_create(key=key)
    assert store.list_paths(where={"user": "alice"}) == ["other", "u/int", "u/one", "u/str"]
    assert store.list_paths("u", where={"pinned": True}) == ["u/one", "u/str"]  # 1 is not True
    assert store.list_paths(where={"pinned": 1}) == ["u/int"]  # True is not 1
    assert store.list_paths(where={"score": 1.0}) == ["u/int"]  # numbers by value
    assert store.list_paths(where={"turn": 3}) == ["other", "u/int", "u/one"]  # "3" is not 3
    assert store.list_paths(where={"turn": 3, "user": "bob"}) == []  # every pair must hold
    assert store.list_paths(where={"absent": 0}) == []
    assert store.list_paths(where={}) == store.list_paths() == ["bare", "other", "u/int", "u/one", "u/str"]


def test_where_sees_unsaved_writes_and_deletes(local_backend, key):
    store = saved(key, a={"k": 1}, b={"k": 1})
    store.delete("a")
    store.write_text("c", "c", metadata={"k": 1})
    store.write_text("b", "b2")
    assert store.list_paths(where={"k": 1}) == ["c"]


def test_matching_rules():
    assert matches({"a": 1.0}, {"a": 1}) and not matches({"a": True}, {"a": 1})
    assert not matches({"a": 0}, {"a": False}) and not matches({"a": "1"}, {"a": 1})


def test_malformed_stored_metadata_is_a_corrupt_store():
    entry = FileEntry(sha256="0" * 64, bytes=1, ext={"metadata": {"k": [1]}})
    with pytest.raises(CorruptStore):
        entry.meta("p")
    with pytest.raises(CorruptStore):
        from_ext({"metadata": "not a map"}, "p")
    assert from_ext({"other": 1}, "p") == {}


# -- survival: checkpoints, concurrent saves, refresh, task I/O ----------------------------------------------


def test_metadata_survives_compaction_and_untouched_saves(durable_backend, key):
    store = saved(key, a=TAGS)
    store.compact()
    store.write_text("b", "b")
    store.save()
    assert MemoryStore.get_or_create(key=key).list_paths(where={"user": "alice"}) == ["a"]


def test_concurrent_saves_of_different_files_keep_both_and_of_one_file_conflict(durable_backend, key):
    saved(key, base={})
    one, two = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    one.write_text("one", "1", metadata={"by": "one"})
    two.write_text("two", "2", metadata={"by": "two"})
    one.save()
    two.save()
    fresh = MemoryStore.get_or_create(key=key)
    assert [fresh.get_meta(p).metadata for p in ("one", "two")] == [{"by": "one"}, {"by": "two"}]

    one.refresh()
    two.refresh()
    one.set_metadata("base", {"v": 1})
    two.set_metadata("base", {"v": 2})
    one.save()
    with pytest.raises(ConcurrencyError):
        two.save()
    assert two.refresh() == ["base"] and two.get_meta("base").metadata == {"v": 1}


def test_refresh_brings_other_handles_metadata(local_backend, key):
    mine = saved(key, a={})
    other = MemoryStore.get_or_create(key=key)
    other.set_metadata("a", {"seen": True})
    other.save()
    assert mine.list_paths(where={"seen": True}) == []
    mine.refresh()
    assert mine.list_paths(where={"seen": True}) == ["a"]


def test_a_store_passed_between_tasks_keeps_metadata(durable_backend, key):
    store = saved(key, a=TAGS)
    received = MemoryStore._deserialize(store._serialize())
    assert received.get_meta("a").metadata == TAGS and received.list_paths(where={"pinned": True}) == ["a"]


# -- the deployed previous release ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    return released_source(ISSUE_9_RELEASE, tmp_path_factory.mktemp("previous"))


@pytest.mark.slow
def test_the_previous_release_opens_and_saves_a_store_with_metadata(durable_backend, key, previous, request):
    saved(key, kept={"k": "kept"}, rewritten={"k": "gone"})
    endpoint = request.getfixturevalue("moto_endpoint") if durable_backend.name == "s3" else None
    config = {"key": key, "raw": durable_backend.raw_data_path, "endpoint": endpoint}
    seen = run_released(previous, "read", config)
    assert seen["error"] == "" and seen["result"] == {"kept": "kept", "rewritten": "rewritten"}
    run_released(previous, "write", config | {"writes": {"rewritten": "new", "added": "added"}})

    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.get_meta("kept").metadata == {"k": "kept"}  # carried: the file is unchanged
    assert fresh.get_meta("rewritten").metadata == {}  # a write replaces metadata, in that release too
    assert fresh.list_paths(where={"k": "kept"}) == ["kept"] and fresh.read_text("rewritten") == "new"


# -- the CLI -------------------------------------------------------------------------------------------------


def cli(*args: str):
    from click.testing import CliRunner

    from flyteplugins_memory.cli import memory

    return CliRunner().invoke(memory, list(args))


def test_cli_ls_where_and_meta_show_metadata(tmp_path):
    uri = str(tmp_path / "store")
    store = MemoryStore("cli", remote_path=uri)
    store.write_text("a.md", "a", metadata={"user": "alice", "n": 1, "pinned": True, "label": "3"})
    store.write_text("b.md", "b", metadata={"user": "bob", "n": 2})
    store.write_text("c.md", "c")
    store.save()

    def listed(*where: str) -> list[str]:
        result = cli("ls", "--uri", uri, "--json", *where)
        assert result.exit_code == 0, result.stderr
        return [f["path"] for f in json.loads(result.stdout)["files"]]

    assert listed("--where", "user=alice") == ["a.md"] and listed("--where", "n=2") == ["b.md"]
    assert listed("--where", "pinned=true", "--where", "n=1") == ["a.md"] and listed("--where", "pinned=1") == []
    assert listed("--where", 'label="3"') == ["a.md"] and listed("--where", "label=3") == []
    files = json.loads(cli("ls", "--uri", uri, "--json").stdout)["files"]
    assert [f["metadata"] for f in files][1:] == [{"user": "bob", "n": 2}, {}]
    table = cli("ls", "--uri", uri).stdout
    assert 'user="alice"' in table and "metadata" in table
    shown = cli("meta", "a.md", "--uri", uri).stdout
    assert "metadata.user" in shown and '"alice"' in shown
    assert json.loads(cli("meta", "a.md", "--uri", uri, "--json").stdout)["metadata"]["n"] == 1

    for bad in (["--where", "novalue"], ["--where", "=1"], ["--where", "k=NaN"], ["--where", "a=1", "--where", "a=2"]):
        result = cli("ls", "--uri", uri, *bad)
        assert result.exit_code == 2 and result.stderr.startswith("error: ") and result.stdout == ""


def test_an_int_too_long_for_json_is_invalid_metadata_not_a_value_error(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    huge = 10**5000  # more digits than Python converts to text: json.dumps raises a bare ValueError
    with pytest.raises(InvalidMetadata, match="metadata"):
        store.write_text("a.md", "a", metadata={"n": huge})
    with pytest.raises(InvalidMetadata, match="where"):
        store.list_paths(where={"n": huge})
    big = 10**300  # fits: kept exactly
    store.write_text("a.md", "a", metadata={"n": big})
    store.save()
    assert MemoryStore.open(key=key).list_paths(where={"n": big}) == ["a.md"]


def test_metadata_of_str_int_and_float_subclasses_is_stored_and_matched_as_the_builtin(local_backend, key):
    import enum

    class Kind(enum.StrEnum):
        IMG = "img"

    class Level(enum.IntEnum):
        HIGH = 3

    class Score(float):
        pass

    store = MemoryStore.get_or_create(key=key)
    meta = store.write_text("a.md", "a", metadata={"kind": Kind.IMG, "level": Level.HIGH, "score": Score(0.5)})
    assert [type(v) for v in meta.metadata.values()] == [str, int, float]
    assert store.set_metadata("a.md", {Kind.IMG: 1}).metadata == {"img": 1}  # keys too
    assert type(next(iter(store.get_meta("a.md").metadata))) is str
    store.set_metadata("a.md", {"kind": Kind.IMG, "level": Level.HIGH, "score": Score(0.5)})
    # the handle that wrote it matches as a fresh one does (a str filter finds a StrEnum value, and back)
    assert store.list_paths(where={"kind": "img", "level": 3}) == ["a.md"]
    assert store.list_paths(where={"kind": Kind.IMG}) == ["a.md"]
    store.save()
    fresh = MemoryStore.open(key=key)
    assert fresh.get_meta("a.md").metadata == {"kind": "img", "level": 3, "score": 0.5}
    assert fresh.list_paths(where={"kind": Kind.IMG, "level": Level.HIGH}) == ["a.md"]
