"""Statements of the docs that the snippets cannot check, checked against the code and the Makefile.

Each test reads one claim a reader relies on (the error tree is whole, a feature exists, a format version,
what ``make lint`` runs) and compares it with what the package or the build actually does.
"""

from __future__ import annotations

import inspect
import re
import shlex

import flyteplugins_memory
from flyteplugins_memory._rules.search_forms import VERSION as SEARCH_VERSION
from repo import REPO

DOCS = REPO / "docs"


def test_the_errors_page_names_every_public_error() -> None:
    page = (DOCS / "guide" / "errors.md").read_text(encoding="utf-8")
    public = [
        name
        for name in flyteplugins_memory.__all__
        if isinstance(getattr(flyteplugins_memory, name), type)
        and issubclass(getattr(flyteplugins_memory, name), BaseException)
    ]
    assert len(public) > 30
    assert [name for name in public if f"`{name}`" not in page] == []


def test_features_says_ttl_exists() -> None:
    """``ttl=`` on writes and ``set_retention`` are features; the comparison page must not call them planned."""
    page = (DOCS / "features.md").read_text(encoding="utf-8")
    store = flyteplugins_memory.MemoryStore
    assert "ttl" in inspect.signature(store.write_text).parameters and hasattr(store, "set_retention")
    assert "`ttl=`" in page and "set_retention" in page
    for stale in ("No TTL", "not offered yet", "is planned"):
        assert stale not in page, stale


def test_the_search_decision_names_the_index_version_the_code_writes() -> None:
    """Decision 0064 describes ``ext["search"]``; a version it states as current is the code's."""
    record = next((DOCS / "decisions").glob("0064-*.md")).read_text(encoding="utf-8")
    stated = re.findall(r'`ext\["search"\]` = `\{v: (\d+)', record)
    assert stated == [] or stated == [str(SEARCH_VERSION)], stated
    assert "_rules/search_forms.VERSION" in record


def test_the_readme_says_what_make_lint_runs() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    ruff_dirs = re.search(r"ruff check ([\w /]+)\n", recipe).group(1).split()
    assert "ruff format --check " + " ".join(ruff_dirs) in recipe
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if line.startswith("make lint"))
    assert "ruff check and ruff format --check on " + " ".join(f"{d}/" for d in ruff_dirs) in line
    assert "pyright on src/" in line and '"src"' in (REPO / "pyproject.toml").read_text(encoding="utf-8")


def readme_cli_session() -> list[list[str]]:
    """The ``flyte-memory`` commands of the README's "Look inside from a terminal" block, as argument lists."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Look inside from a terminal", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("  #", 1)[0])[1:] for line in block.splitlines() if line.startswith("flyte-memory ")]


def test_the_readme_cli_session_runs_on_a_store_like_the_demos(tmp_path, monkeypatch) -> None:
    """Every command of the README's session runs on a store shaped as ``make demo`` leaves it (the key
    ``agent-chat`` under the local defaults; here under a temporary ``--root``)."""
    from click.testing import CliRunner

    from flyteplugins_memory import MemoryStore
    from flyteplugins_memory.cli import memory

    monkeypatch.chdir(tmp_path)  # `report --html memory.html` writes here
    root = str(tmp_path / "raw")
    store = MemoryStore("agent-chat", remote_path=f"{root}/agents/memory-store/v0/local/default/development/agent-chat")
    store.append({"role": "user", "content": "Hi! My name is Ada."})
    store.write_text("notes/user.md", "# About the user\n- name: Ada\n", actor="agent-chat/remember_note")
    store.save(actor="agent-chat", reason="one chat turn")
    commands = readme_cli_session()
    assert [c[0] for c in commands] == ["keys", "ls", "messages", "cat", "log", "report"]
    for command in commands:
        # the local defaults named, as a fresh shell has them (a test before this one may have run flyte.init)
        where = ["--root", root, "--org", "local", "--project", "default", "--domain", "development"]
        result = CliRunner().invoke(memory, [*command, *where])
        assert result.exit_code == 0, (command, result.stdout, result.stderr, result.exception)
        if command[0] in ("keys", "ls", "cat"):
            assert (
                "agent-chat" if command[0] == "keys" else "Ada" if command[0] == "cat" else "notes"
            ) in result.stdout
    assert (tmp_path / "memory.html").is_file()


def heading_anchors(page) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces as dashes)."""
    headings = [line.lstrip("#").strip() for line in page.read_text(encoding="utf-8").splitlines() if line[:1] == "#"]
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_of_the_docs_leads_somewhere() -> None:
    """A link of README.md or docs/ to a file of the checkout, or a heading of one, names one that exists."""
    broken = []
    for page in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        prose = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
        for link in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"\w+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = page.parent / path if path else page
            if not target.exists() or (anchor and target.suffix == ".md" and anchor not in heading_anchors(target)):
                broken.append(f"{page.relative_to(REPO)}: {link}")
    assert broken == []
