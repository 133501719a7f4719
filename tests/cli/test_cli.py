"""The ``flyte-memory`` CLI: every verb as a table and as ``--json``, its bad-input path (one ``error:``
line, a non-zero exit code, no traceback), what ``rm``/``purge``/``gc`` leave in storage, the console
script and ``flyte memory`` entry points, S3 through moto, and ``MemoryStore.list_keys``.

Most tests run the group in-process with click's `CliRunner` (stdout and stderr kept apart).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

import pytest
from click.testing import CliRunner

import flyteplugins_memory
from flyteplugins_memory import MemoryStore
from flyteplugins_memory.cli import memory
from flyteplugins_memory.cli._upkeep import parse_window

ORG, PROJECT, DOMAIN = "acme", "research", "development"
NOTES = "# User\nlikes green tea\n"


@pytest.fixture
def root(tmp_path: pathlib.Path) -> str:
    return str(tmp_path / "raw")


def store_uri(root: str, key: str) -> str:
    return f"{root}/agents/memory-store/v0/{ORG}/{PROJECT}/{DOMAIN}/{key}"


def make_store(root: str, key: str, *, keep_versions: bool = False) -> MemoryStore:
    """A saved store: two files, a transcript with a tool call and its result, two commits."""
    uri = store_uri(root, key)
    store = MemoryStore(key, remote_path=uri, keep_versions=keep_versions)
    store.write_text("notes/user.md", "draft", actor="planner", reason="first look")
    store.append({"role": "user", "content": "What tea do I like?"})
    store.save(actor="planner", reason="turn 1")
    store.write_text("notes/user.md", NOTES, actor="planner", reason="remember taste")
    store.write_json("findings/search.json", {"hits": 3}, actor="researcher")
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "tea"}'}}
    store.extend([{"role": "assistant", "content": None, "tool_calls": [call]}])
    store.append({"role": "tool", "tool_call_id": "c1", "content": "green"})
    store.save(actor="agent", reason="turn 2")
    return store


@pytest.fixture
def store(root: str) -> MemoryStore:
    return make_store(root, "agent-chat", keep_versions=True)


def where(root: str, key: str = "agent-chat") -> list[str]:
    return ["--key", key, "--org", ORG, "--project", PROJECT, "--domain", DOMAIN, "--root", root]


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(memory, list(args), input=input)


def ok(*args: str, input: str | None = None) -> str:
    result = run(*args, input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result.stdout


def as_json(*args: str) -> object:
    result = run(*args, "--json")
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert result.stderr == ""
    return json.loads(result.stdout)  # stdout is exactly one JSON document


def fails(code: int, *args: str, input: str | None = None) -> str:
    """Run a command that must fail: one ``error:`` line on stderr, nothing on stdout, no traceback."""
    result = run(*args, input=input)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip() and "[y/N]" not in line]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    return lines[0]


def stored_objects(root: str) -> dict[str, bytes]:
    """Every object under the storage root, read from disk (store prefixes and journals alike)."""
    base = pathlib.Path(root)
    return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()}


# -- reading verbs ------------------------------------------------------------------------------------------


def test_ls_draws_the_tree_with_sizes_actors_and_times(store: MemoryStore, root: str):
    out = ok("ls", *where(root))
    assert store.remote_path in out
    lines = out.splitlines()
    notes = next(i for i, line in enumerate(lines) if "notes/" in line)
    assert "user.md" in lines[notes + 1] and "planner" in lines[notes + 1] and "remember taste" in lines[notes + 1]
    assert f"{len(NOTES)} B" in lines[notes + 1] and "UTC" in lines[notes + 1]
    assert "2 files" in out and "3 messages" in out
    assert "search.json" in ok("ls", "findings", *where(root)) and "user.md" not in ok("ls", "findings", *where(root))


def test_ls_json_lists_every_file_with_its_metadata(store: MemoryStore, root: str):
    listed = as_json("ls", *where(root))
    assert isinstance(listed, dict) and listed["uri"] == store.remote_path and listed["messages"] == 3
    files = {f["path"]: f for f in listed["files"]}
    assert sorted(files) == ["findings/search.json", "notes/user.md"]
    assert files["notes/user.md"]["sha256"] == store.current_sha("notes/user.md")
    assert files["notes/user.md"]["bytes"] == len(NOTES) and files["notes/user.md"]["updated_by"] == "planner"


def test_cat_prints_the_content_and_json_adds_the_hash(store: MemoryStore, root: str):
    assert ok("cat", "notes/user.md", *where(root)) == NOTES
    shown = as_json("cat", "notes/user.md", *where(root))
    assert shown == {"path": "notes/user.md", "sha256": store.current_sha("notes/user.md"), "content": NOTES}


def test_meta_shows_the_sidecar_and_the_versions_kept(store: MemoryStore, root: str):
    out = ok("meta", "notes/user.md", *where(root))
    assert store.current_sha("notes/user.md") in out and "remember taste" in out
    fields = as_json("meta", "notes/user.md", *where(root))
    assert isinstance(fields, dict)
    assert fields["updated_by"] == "planner" and fields["bytes"] == len(NOTES) and fields["versions"] == 2


def test_messages_shows_roles_tool_calls_and_results(store: MemoryStore, root: str):
    out = ok("messages", *where(root))
    assert "What tea do I like?" in out and 'search({"q": "tea"})' in out and "result of c1" in out
    assert "What tea" not in ok("messages", "--tail", "2", *where(root))
    assert as_json("messages", "--tail", "1", *where(root)) == [store.messages[-1]]
    assert as_json("messages", *where(root)) == store.messages


def test_log_lists_commits_newest_first_and_filters_by_path(store: MemoryStore, root: str):
    out = ok("log", *where(root))
    assert out.index("turn 2") < out.index("turn 1") and "+ findings/search.json" in out
    commits = as_json("log", "--limit", "1", *where(root))
    assert isinstance(commits, list) and len(commits) == 1
    assert commits[0]["reason"] == "turn 2" and commits[0]["appended"] == 2
    only = as_json("log", "--path", "findings/search.json", *where(root))
    assert isinstance(only, list) and [c["reason"] for c in only] == ["turn 2"]


def test_audit_lists_the_events_oldest_first(store: MemoryStore, root: str):
    out = ok("audit", *where(root))
    assert out.index("first look") < out.index("remember taste")
    events = as_json("audit", "--tail", "2", *where(root))
    assert isinstance(events, list) and [e["path"] for e in events] == ["notes/user.md", "findings/search.json"]
    assert events[0]["actor"] == "planner" and events[0]["op"] == "update"


def test_stored_markup_is_printed_as_text(root: str):
    store = make_store(root, "markup")
    store.write_text("x.md", "[/] [bold]not markup", actor="[red]who")
    store.save()
    assert "[red]who" in ok("ls", *where(root, "markup"))


def test_report_writes_the_page_of_the_store(store: MemoryStore, root: str, tmp_path: pathlib.Path):
    before = stored_objects(root)
    page = tmp_path / "out" / "memory.html"
    page.parent.mkdir()  # the folder must exist (tests/cli/test_cli_messages.py: a missing one fails)
    assert "wrote" in ok("report", "--html", str(page), *where(root))
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") or html.lower().startswith("<!doctype html>")
    for shown in ("notes/user.md", "findings/search.json", "What tea do I like?", "search", "turn 2", "researcher"):
        assert shown in html, shown
    assert stored_objects(root) == before  # reading for a report changes nothing in storage
    assert [p.name for p in page.parent.iterdir()] == ["memory.html"]  # no temporary file left behind


def test_the_report_file_gets_the_usual_permissions(store: MemoryStore, root: str, tmp_path: pathlib.Path):
    page = tmp_path / "page.html"
    ok("report", "--html", str(page), *where(root))
    assert page.stat().st_mode & 0o777 == 0o666 & ~_umask()  # like any file the user writes, not mkstemp's 0600


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def test_report_json_and_an_existing_file(store: MemoryStore, root: str, tmp_path: pathlib.Path):
    page = tmp_path / "memory.html"
    page.write_text("keep me")
    assert "add --force" in fails(2, "report", "--html", str(page), *where(root))
    assert page.read_text() == "keep me"
    out = as_json("report", "--html", str(page), "--force", *where(root))
    assert isinstance(out, dict) and out["html"] == str(page) and out["store"] == store.remote_path
    assert out["bytes"] == len(page.read_bytes()) and "notes/user.md" in page.read_text()


# -- bad input --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "verb",
    [["ls"], ["cat", "a.md"], ["meta", "a.md"], ["messages"], ["log"], ["audit"], ["report", "--html", "x.html"]],
)
def test_reading_an_unknown_key_fails_and_creates_nothing(store: MemoryStore, root: str, verb: list[str]):
    before = stored_objects(root)
    line = fails(1, *verb, *where(root, "nobody"))
    assert "no memory store at" in line and line.endswith("/nobody")
    assert stored_objects(root) == before
    assert not any("nobody" in p for p in before)


@pytest.mark.parametrize("verb", [["rm", "a.md", "--yes"], ["purge", "a.md", "--yes"], ["gc"]])
def test_changing_an_unknown_key_fails_and_creates_nothing(root: str, verb: list[str]):
    assert "no memory store at" in fails(1, *verb, *where(root, "nobody"))
    assert not pathlib.Path(root).exists()


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["cat", "missing.md"], 1, "no file 'missing.md'"),
        (["meta", "notes"], 1, "no file 'notes'"),
        (["cat", "../escape"], 2, "traversal"),
        (["cat", "/etc/passwd"], 2, "must be relative"),
        (["ls", "../up"], 2, "traversal"),
        (["log", "--path", "../x"], 2, "traversal"),
        (["messages", "--tail", "0"], 2, "--tail"),
        (["log", "--limit", "zero"], 2, "--limit"),
        (["rm", "missing.md", "--yes"], 1, "no file 'missing.md'"),
        (["purge", "messages.json", "--yes"], 2, "messages.json"),
        (["gc", "--window", "soon"], 2, "--window"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(store: MemoryStore, root: str, args, code, says):
    assert says.lower() in fails(code, *args, *where(root)).lower()


def test_naming_mistakes_are_usage_errors(root: str):
    assert "--key" in fails(2, "ls")
    assert "--uri names the store by itself" in fails(2, "ls", "--uri", root, "--key", "k")
    assert "single path segment" in fails(2, "ls", "--key", "a/b", "--root", root)
    assert "no such option '--key'" in fails(2, "keys", "--key", "k").lower()
    assert "no such option" in fails(2, "ls", "--colour").lower()
    assert "no such command" in fails(2, "report-all").lower()


def test_a_corrupt_store_is_one_line(root: str):
    uri = store_uri(root, "broken")
    pathlib.Path(uri).mkdir(parents=True)
    pathlib.Path(uri, "messages.json").write_text("{not json")  # an upstream-layout store, torn
    assert fails(1, "ls", "--uri", uri).startswith("error: ")


ESCAPES = "\x1b[31mred\x1b]0;title\x07\x9b2J\u202ereversed"


def test_stored_escape_sequences_are_shown_never_run(root: str):
    """An agent's strings reach a terminal as text: no colour, window title or screen clear runs."""
    store = MemoryStore("escapes", remote_path=store_uri(root, "escapes"))
    store.write_text("n.md", ESCAPES, actor=ESCAPES, reason=ESCAPES)
    store.append({"role": "user", "content": ESCAPES, "tool_call_id": ESCAPES})
    store.save(actor=ESCAPES, reason=ESCAPES)
    for verb in (["ls"], ["messages"], ["log"], ["audit"], ["meta", "n.md"]):
        out = ok(*verb, *where(root, "escapes"))
        assert not any(c in out for c in "\x1b\x07\x9b\u202e"), verb
        assert "\\x1b[31mred" in out, verb  # shown as its characters
    assert json.loads(ok("cat", "n.md", "--json", *where(root, "escapes")))["content"] == ESCAPES
    assert ok("cat", "n.md", *where(root, "escapes")) == ESCAPES  # into a pipe: byte-exact


def test_odd_tool_calls_are_shown_not_a_traceback(root: str):
    """`append` accepts any JSON-able message; a foreign transcript's tool_calls need not be OpenAI's shape."""
    store = MemoryStore("odd-calls", remote_path=store_uri(root, "odd-calls"))
    store.append({"role": "assistant", "tool_calls": [{"function": "search"}, 5]})
    store.append({"role": "assistant", "tool_calls": "lookup"})
    store.save()
    out = ok("messages", *where(root, "odd-calls"))
    assert '→ {"function": "search"}' in out and "→ 5" in out and '→ "lookup"' in out
    assert "→ ?()" not in out  # a string is not iterated character by character


def test_a_huge_message_is_clipped_in_the_table_and_whole_in_json(root: str):
    store = MemoryStore("huge", remote_path=store_uri(root, "huge"))
    store.append({"role": "user", "content": "word " * 400_000})  # 2 MB: rich would fold it for minutes
    store.save()
    out = ok("messages", *where(root, "huge"))
    assert "characters;--jsonshowsall" in "".join(out.replace("│", "").split()) and len(out) < 20_000
    assert json.loads(ok("messages", "--json", *where(root, "huge")))[0]["content"] == "word " * 400_000


def upstream_store(root: str, key: str, files: dict[str, bytes], sidecars: dict[str, dict] | None = None) -> str:
    """A store laid out as upstream writes it (no journal): messages.json, files, meta/ sidecars."""
    uri = pathlib.Path(store_uri(root, key))
    uri.mkdir(parents=True)
    (uri / "messages.json").write_text("[]")
    for path, data in files.items():
        (uri / path).write_bytes(data)
    for path, meta in (sidecars or {}).items():
        (uri / "meta").mkdir(exist_ok=True)
        (uri / "meta" / f"{path}.json").write_text(json.dumps(meta))
    return str(uri)


def test_ls_and_meta_of_an_upstream_store_holding_a_binary_file(root: str):
    upstream_store(root, "binary", {"b.bin": b"\xff\xfe\x00", "t.txt": b"text"})
    listed = as_json("ls", *where(root, "binary"))
    assert {f["path"]: f["bytes"] for f in listed["files"]} == {"b.bin": None, "t.txt": 4}
    assert "b.bin" in ok("ls", *where(root, "binary"))
    assert as_json("meta", "b.bin", *where(root, "binary"))["bytes"] is None
    assert "not valid UTF-8" in fails(1, "cat", "b.bin", *where(root, "binary"))


def test_an_upstream_sidecar_with_a_malformed_hash_is_one_line(root: str):
    meta = {"path": "f.txt", "sha256": "<script>", "updated_at": "", "updated_by": "x", "reason": "", "bytes": 5}
    upstream_store(root, "bad-hash", {"f.txt": b"hello"}, {"f.txt": meta})
    assert "malformed sha256" in fails(1, "ls", *where(root, "bad-hash"))
    with pytest.raises(flyteplugins_memory.CorruptStore):
        MemoryStore.open(remote_path=store_uri(root, "bad-hash")).get_meta("f.txt")


@pytest.mark.parametrize("path", ["messages.json", "audit/log.jsonl", "meta/x.json"])
def test_rm_of_a_reserved_path_is_a_usage_error_and_asks_nothing(store: MemoryStore, root: str, path: str):
    before = stored_objects(root)
    fails(2, "rm", path, *where(root), input="y\n")
    assert "[y/N]" not in run("rm", path, *where(root), input="y\n").stderr  # nothing asked
    assert stored_objects(root) == before


@pytest.mark.parametrize("path", ["messages.json", "../x"])
def test_purge_checks_the_path_before_asking(store: MemoryStore, root: str, path: str):
    before = stored_objects(root)
    fails(2, "purge", path, *where(root), input="y\n")
    assert "[y/N]" not in run("purge", path, *where(root), input="y\n").stderr  # nothing asked
    assert stored_objects(root) == before


def test_an_overflowing_window_is_a_usage_error(store: MemoryStore, root: str):
    assert "--window" in fails(2, "gc", "--window", "99999999999999999999d", *where(root))


# -- changing verbs: what lands in storage ------------------------------------------------------------------


def test_rm_asks_and_a_no_changes_nothing(store: MemoryStore, root: str):
    before = stored_objects(root)
    result = run("rm", "notes/user.md", *where(root), input="n\n")
    assert result.exit_code == 1 and "aborted, nothing changed" in result.stderr
    assert "Delete notes/user.md" in result.stderr  # the question goes to stderr, stdout stays clean
    assert stored_objects(root) == before


def test_rm_deletes_saves_and_records_the_actor(store: MemoryStore, root: str):
    out = ok("rm", "notes/user.md", *where(root), input="y\n")
    assert "deleted notes/user.md" in out
    assert not pathlib.Path(store.remote_path or "", "notes", "user.md").exists()  # upstream's layout too
    reopened = MemoryStore.open(remote_path=store.remote_path)
    assert reopened.list_paths() == ["findings/search.json"]
    newest = reopened.log(1)[0]
    assert (
        newest.actor == "flyte-memory" and newest.deleted == ("notes/user.md",) and newest.reason == "rm notes/user.md"
    )
    done = as_json("rm", "findings/search.json", "--yes", "--actor", "ops", "--reason", "cleanup", *where(root))
    assert done == {"deleted": "findings/search.json", "commit": newest.seq + 1}
    assert MemoryStore.open(remote_path=store.remote_path).log(1)[0].actor == "ops"


def test_purge_removes_every_stored_copy(store: MemoryStore, root: str):
    fails(1, "purge", "notes/user.md", *where(root), input="n\n")
    assert any(b"green tea" in data for data in stored_objects(root).values())
    result = as_json("purge", "notes/user.md", "--yes", *where(root))
    assert isinstance(result, dict) and result["path"] == "notes/user.md" and result["objects"] > 0
    assert not any(b"green tea" in data or data == b"draft" for data in stored_objects(root).values())
    assert MemoryStore.open(remote_path=store.remote_path).list_paths() == ["findings/search.json"]


def test_purge_table(store: MemoryStore, root: str):
    out = ok("purge", "findings/search.json", *where(root), input="y\n")
    assert "purged findings/search.json" in out and "objects removed" in out


def test_gc_removes_overwritten_content_and_keeps_the_newest(root: str):
    store = make_store(root, "agent-chat")  # no version snapshots: those are live data, kept by gc
    assert any(data == b"draft" for data in stored_objects(root).values())
    result = as_json("gc", "--window", "0", "--yes", *where(root))
    assert isinstance(result, dict) and result["objects"] > 0
    objects = stored_objects(root)
    assert not any(data == b"draft" for data in objects.values())  # the overwritten first version
    assert MemoryStore.open(remote_path=store.remote_path).read_text("notes/user.md") == NOTES
    assert "removed" in ok("gc", *where(root))


def test_parse_window():
    assert parse_window("0").total_seconds() == 0
    assert parse_window("90m").total_seconds() == 5400 and parse_window("7d").days == 7
    assert parse_window("1.5h").total_seconds() == 5400


# -- keys and the namespace -----------------------------------------------------------------------------------


def test_keys_lists_the_stores_of_a_namespace(root: str):
    for key in ("beta", "alpha", "alpine"):
        make_store(root, key)
    make_store(root, "elsewhere").save()
    namespace = ["--org", ORG, "--project", PROJECT, "--domain", DOMAIN, "--root", root]
    assert as_json("keys", *namespace) == ["alpha", "alpine", "beta", "elsewhere"]
    assert as_json("keys", "al", *namespace) == ["alpha", "alpine"]
    out = ok("keys", *namespace)
    assert "alpine" in out and "4 stores" in out
    assert as_json("keys", "--org", "other", "--root", root) == []


def test_list_keys_counts_upstream_written_stores_and_lists_once(root: str, monkeypatch):
    from flyte.ai.agents import MemoryStore as UpstreamStore
    from fsspec.implementations.local import LocalFileSystem

    make_store(root, "ours")
    uri = store_uri(root, "theirs")
    theirs = UpstreamStore("theirs", remote_path=uri)  # upstream's own store: no journal
    theirs.append({"role": "user", "content": "hi"})
    theirs.save()
    calls: list[str] = []
    inside: list[bool] = []
    for name in ("ls", "find", "glob", "walk", "info", "exists"):
        original = getattr(LocalFileSystem, name)
        monkeypatch.setattr(LocalFileSystem, name, _counting(calls, inside, name, original))
    assert MemoryStore.list_keys(org=ORG, project=PROJECT, domain=DOMAIN, root=root) == ["ours", "theirs"]
    assert calls == ["ls"]


def _counting(calls: list[str], inside: list[bool], name: str, original):
    """Counts the calls made to the filesystem from outside it (its own inner calls, such as ``ls``
    asking ``info`` of each entry, are part of the one call)."""

    def counted(self, *args, **kwargs):
        if not inside:
            calls.append(name)
        inside.append(True)
        try:
            return original(self, *args, **kwargs)
        finally:
            inside.pop()

    return counted


async def test_list_keys_aio_and_argument_checks(root: str):
    make_store(root, "k1")
    assert await MemoryStore.list_keys.aio("k", org=ORG, project=PROJECT, domain=DOMAIN, root=root) == ["k1"]
    with pytest.raises(flyteplugins_memory.InvalidArgument):
        await MemoryStore.list_keys.aio(3)  # type: ignore[arg-type]
    with pytest.raises(flyteplugins_memory.InvalidKey):
        MemoryStore.list_keys(org="a/b", root=root)


def test_open_never_creates(root: str):
    with pytest.raises(flyteplugins_memory.StoreNotFound):
        MemoryStore.open(key="none", org=ORG, project=PROJECT, domain=DOMAIN, root=root)
    with pytest.raises(flyteplugins_memory.InvalidArgument):
        MemoryStore.open()
    assert not pathlib.Path(root).exists()


@pytest.mark.parametrize(
    "call",
    [
        lambda: MemoryStore.open(remote_path=5),  # type: ignore[arg-type]
        lambda: MemoryStore.open(key="k", root=5),  # type: ignore[arg-type]
        lambda: MemoryStore.list_keys(root=5),  # type: ignore[arg-type]
    ],
    ids=["open-remote_path", "open-root", "list_keys-root"],
)
def test_open_and_list_keys_refuse_a_root_or_path_that_is_not_a_string(call):
    with pytest.raises(flyteplugins_memory.InvalidArgument):
        call()


@pytest.fixture
def fresh_flyte_config():
    """flyte caches the config file it found first in this process: forget it before and after."""
    from flyte.config._reader import get_config_file

    get_config_file.cache_clear()
    yield
    get_config_file.cache_clear()


def test_the_flyte_config_names_the_namespace(root: str, tmp_path: pathlib.Path, monkeypatch, fresh_flyte_config):
    make_store(root, "configured")
    config = tmp_path / "config.yaml"
    config.write_text(f"task:\n  org: {ORG}\n  project: {PROJECT}\n  domain: {DOMAIN}\n")
    monkeypatch.setenv("FLYTECTL_CONFIG", str(config))
    assert "notes/" in ok("ls", "--key", "configured", "--root", root)
    assert as_json("keys", "--root", root) == ["configured"]
    assert "no memory store" in fails(1, "ls", "--key", "configured", "--root", root, "--project", "p2")


# -- S3 (moto) -------------------------------------------------------------------------------------------------


def test_ls_cat_messages_and_keys_on_s3(s3_backend, key: str, monkeypatch):
    import s3fs

    store = MemoryStore.get_or_create(key=key)
    store.write_text("notes/user.md", NOTES, actor="planner")
    store.append({"role": "user", "content": "hello from s3"})
    store.save()
    uri = s3_backend.store_uri(key)
    assert "user.md" in ok("ls", "--uri", uri) and "planner" in ok("ls", "--uri", uri)
    assert ok("cat", "notes/user.md", "--uri", uri) == NOTES
    assert as_json("messages", "--uri", uri) == [{"role": "user", "content": "hello from s3"}]
    assert "no memory store at" in fails(1, "ls", "--uri", uri + "-not")
    bucket_root = "s3://" + s3_backend.raw_data_path.split("/")[2]
    MemoryStore.get_or_create(key=key + "-b").save()
    requests: list[str] = []
    original = s3fs.S3FileSystem._call_s3

    async def counted(self, method, *args, **kwargs):
        requests.append(method)
        return await original(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
    namespace = ["--org", ORG, "--project", PROJECT, "--domain", DOMAIN, "--root", bucket_root]
    assert as_json("keys", *namespace) == [key, key + "-b"]
    assert requests == ["list_objects_v2"]


# -- entry points -----------------------------------------------------------------------------------------------


def _source_env() -> dict[str, str]:
    """The environment for a subprocess that imports this very copy of the package."""
    src = str(pathlib.Path(flyteplugins_memory.__file__).parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def _subprocess(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, env=_source_env(), check=False)


def test_the_console_script(store: MemoryStore, root: str):
    scripts = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "flyte-memory"]
    assert [ep.value for ep in scripts] == ["flyteplugins_memory.cli:main"]
    script = str(pathlib.Path(sys.executable).parent / "flyte-memory")
    done = _subprocess(script, "cat", "notes/user.md", *where(root))
    assert (done.returncode, done.stdout) == (0, NOTES)
    missing = _subprocess(script, "ls", *where(root, "nope"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: no memory store at") and missing.stdout == ""
    assert len(missing.stderr.strip().splitlines()) == 1
    piped = _subprocess(script, "gc", "--json", *where(root))  # a pipe, no TTY: no progress bar, JSON only
    assert piped.returncode == 0 and piped.stderr == ""
    assert set(json.loads(piped.stdout)) == {"objects", "bytes", "commits", "versions", "expired", "dry_run"}


def test_flyte_memory_through_flytes_own_cli(store: MemoryStore, root: str):
    from flyte.cli.main import main as flyte_main

    plugins = importlib.metadata.entry_points(group="flyte.plugins.cli.commands")
    assert [ep.value for ep in plugins if ep.name == "memory"] == ["flyteplugins_memory.cli:memory"]
    result = CliRunner().invoke(flyte_main, ["memory", "messages", "--json", *where(root)])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert json.loads(result.stdout) == store.messages
    bad = CliRunner().invoke(flyte_main, ["memory", "ls", *where(root, "nobody")])
    assert bad.exit_code == 1 and bad.stderr.strip().startswith("error: no memory store at")


# -- search ----------------------------------------------------------------------------------------------------


def test_search_prints_ranked_hits_and_json(store: MemoryStore, root: str):
    store.write_text("notes/tea.md", "oolong tea, and more tea \x1b[31mred\x1b[0m", metadata={"kind": "taste"})
    store.write_text("notes/coffee.md", "coffee, no tea")
    store.save()
    out = ok("search", "tea", *where(root))
    lines = out.splitlines()
    assert lines.index(next(line for line in lines if "tea.md" in line)) < lines.index(
        next(line for line in lines if "coffee.md" in line)
    )
    assert "\x1b" not in out and "\\x1b" in out and "hits" in out  # terminal-safe snippets
    found = as_json("search", "tea", "--where", 'kind="taste"', *where(root))
    assert [h["path"] for h in found["hits"]] == ["notes/tea.md"]
    assert found["hits"][0]["meta"]["metadata"] == {"kind": "taste"} and found["hits"][0]["score"] > 0
    assert [h["path"] for h in as_json("search", "tea", "--prefix", "notes", "--limit", "1", *where(root))["hits"]] == [
        "notes/tea.md"
    ]
    assert as_json("search", "what", *where(root))["hits"] == []
    assert [h["path"] for h in as_json("search", "what", "--transcript", *where(root))["hits"]] == ["messages.json#0"]
    assert "limit" in fails(2, "search", "tea", "--limit", "0", *where(root))


# -- a deleted store, and a path a store never held ------------------------------------------------------------

#: every verb that opens the store it names, with the arguments it needs
OPENING_VERBS = [
    ["ls"],
    ["cat", "notes/user.md"],
    ["meta", "notes/user.md"],
    ["messages"],
    ["log"],
    ["audit"],
    ["history", "notes/user.md"],
    ["diff", "notes/user.md", "c1"],
    ["restore", "notes/user.md", "c1"],
    ["search", "tea"],
    ["proposals"],
    ["accept", "p1"],
    ["discard", "p1"],
    ["rm", "notes/user.md", "--yes"],
    ["purge", "notes/user.md", "--yes"],
    ["gc"],
    ["report", "--html", "x.html"],
    ["export", "x.tar.gz"],
]


@pytest.mark.parametrize("verb", OPENING_VERBS, ids=lambda verb: verb[0])
def test_a_deleted_store_is_one_unspliced_line_naming_who_deleted_it(
    store: MemoryStore, root: str, verb: list[str], raw_data_context
):
    raw_data_context(root)
    deleted = MemoryStore.delete_store(
        key="agent-chat", org=ORG, project=PROJECT, domain=DOMAIN, actor="dpo", reason="user asked to be forgotten"
    )
    assert deleted
    before = stored_objects(root)
    line = fails(1, *verb, *where(root))
    assert "was deleted by 'dpo'" in line and "user asked to be forgotten" in line, line
    assert "no memory store at MemoryStore" not in line and line.count("MemoryStore at") == 1, line
    assert line.startswith(f"error: MemoryStore at {store_uri(root, 'agent-chat')} was deleted"), line
    assert stored_objects(root) == before  # the refusal wrote nothing


def test_an_unknown_key_still_reads_no_memory_store(root: str):
    for verb in (["ls"], ["history", "a.md"]):
        line = fails(1, *verb, *where(root, "nobody"))
        assert line.startswith(f"error: no memory store at {store_uri(root, 'nobody')}")
        assert line.endswith(f"(the storage root {root} does not exist)")  # tests/cli/test_cli_messages.py


def test_history_of_a_path_the_store_never_had_fails_like_cat_and_meta(store: MemoryStore, root: str):
    before = stored_objects(root)
    for verb in (["history"], ["history", "--json"], ["cat"], ["meta"]):
        line = fails(1, *verb, "never/was.md", *where(root))
        assert "no file 'never/was.md'" in line, line
    assert "no history" in fails(1, "history", "never/was.md", *where(root))
    assert stored_objects(root) == before
    store.delete("notes/user.md")
    store.save()  # a deleted file keeps its history: that is not an error
    shown = as_json("history", "notes/user.md", *where(root))
    assert shown[0]["deleted"] is True and len(shown) >= 2


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(memory, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_proposals_accept_and_search_by_uri_on_s3(s3_backend, key: str):
    store = MemoryStore.get_or_create(key=key, trusted=True)
    store.write_text("x.md", "x")
    store.save()
    store.set_read_only_prefixes(["memory/"])
    agent = MemoryStore.open(key=key)
    draft = agent.propose("memory/tea.md", "likes green tea", actor="agent", reason="said so")
    agent.save()
    uri = s3_backend.store_uri(key)
    code, out, _ = cli("proposals", "--uri", uri, "--json")
    assert code == 0 and [p["id"] for p in json.loads(out)["proposals"]] == [draft.id]
    code, _, err = cli("accept", draft.id, "--uri", uri)
    assert code == 2 and "read-only" in err
    assert cli("accept", draft.id, "--uri", uri, "--trusted")[0] == 0
    code, out, _ = cli("search", "green", "--uri", uri, "--json")
    assert [h["path"] for h in json.loads(out)["hits"]] == ["memory/tea.md"]
    assert s3_backend.fs.cat_file(f"{uri}/memory/tea.md") == b"likes green tea"


def test_where_typing_exit_codes_and_stored_markup_as_the_readme_says(tmp_path):
    uri = str(tmp_path / "store")
    store = MemoryStore("team", remote_path=uri)
    store.write_text("int.md", "tea", metadata={"n": 1})
    store.write_text("str.md", "tea", metadata={"n": "1"})
    store.write_text("bool.md", "tea", metadata={"n": True})
    staged = store.propose("p.md", "[bold]tea[/] \x1b[2J", actor="\x1b]0;pwn\x07", reason="[red]r")
    store.save()
    for value, path in (("1", "int.md"), ('"1"', "str.md"), ("true", "bool.md")):
        code, out, _ = cli("ls", "--uri", uri, "--where", f"n={value}", "--json")
        assert code == 0 and [f["path"] for f in json.loads(out)["files"]] == [path]
    code, out, _ = cli("proposals", "--uri", uri)
    assert code == 0 and "[bold]tea[/] \\x1b[2J" in out and "\\x1b]0;pwn\\x07" in out and "\x1b" not in out
    assert cli("accept", "nope", "--uri", uri)[0] == 1
    assert cli("search", "tea", "--uri", uri, "--limit", "0")[0] == 2
    assert cli("ls", "--uri", uri, "--where", "n")[0] == 2
    assert cli("accept", staged.id, "--uri", uri, "--json")[0] == 0
    code, out, err = cli("accept", staged.id, "--uri", uri, "--json")
    assert (code, out) == (1, "") and err.startswith("error: ")
    assert (tmp_path / "store" / "p.md").read_text() == "[bold]tea[/] \x1b[2J"
