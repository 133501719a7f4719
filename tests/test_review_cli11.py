"""Outside-user review of issue 11: the CLI verbs (`search`, `proposals`, `accept`, `discard`, `ls --where`)
and the features used together, as an agent and its operator would."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from flyteplugins_memory import MemoryStore, PathEscapesRoot, ProposalNotFound
from flyteplugins_memory.cli import memory


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


def test_a_scope_stages_lists_and_decides_its_own_proposals_only(tmp_path):
    uri = str(tmp_path / "store")
    store = MemoryStore("team", remote_path=uri)
    alice, bob = store.scope("users/alice"), store.scope("users/bob")
    mine = alice.propose("notes/tea.md", "likes green tea", actor="agent", reason="said so")
    theirs = bob.propose("notes/tea.md", "likes coffee", actor="agent", reason="said so")
    store.save()
    assert mine.path == "notes/tea.md" and [p.id for p in alice.proposals("draft")] == [mine.id]
    assert alice.proposal(mine.id).path == "notes/tea.md"
    with pytest.raises(ProposalNotFound):
        alice.accept(theirs.id)
    with pytest.raises(PathEscapesRoot):
        alice.propose("../bob/x.md", "x")
    assert alice.accept(mine.id).path == "notes/tea.md"
    fresh = MemoryStore.open(remote_path=uri)
    assert (tmp_path / "store" / "users/alice/notes/tea.md").read_text() == "likes green tea"
    assert [h.path for h in fresh.scope("users/alice").search("tea")] == ["notes/tea.md"]
    assert {p.path: p.status for p in fresh.proposals()} == {
        "users/alice/notes/tea.md": "accepted",
        "users/bob/notes/tea.md": "draft",
    }


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
