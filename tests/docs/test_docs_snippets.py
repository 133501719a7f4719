"""The docs run: every ```python block of README.md and of every page under docs/, so they cannot drift from
the code.

Each page's blocks run in order in one namespace (a later block uses what an earlier one opened), in a
temporary working directory, with Flyte's raw-data path bound to a temporary local-disk root. A block that
cannot run offline (a Flyte cluster, cloud credentials) carries ``<!-- not run: <why> -->`` on the line
before its fence; the test counts those and fails if more than a handful are left out. A one-line
expression whose comment opens with a Python literal (``memory.list_paths("cases")  # ['cases/1042.json']``)
is checked against it, so the values the docs show are the values the code returns.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import pathlib
import re

import pytest

from flyteplugins_memory import MemoryStore
from repo import REPO

ROOT = REPO
#: every page a reader meets: the README and all of docs/ (the guide, the journal, the decisions...)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: how many blocks the docs may leave out in all; more means the docs stopped being checked
MAX_NOT_RUN = 5
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
#: any fenced block, with its language tag (empty for none)
ANY_FENCE = re.compile(r"^```(\S*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
#: the first line of a block that is Python whatever its tag says
PYTHON_START = re.compile(r"^(import \w|from [\w.]+ import |>>> )")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->\s*$")


def blocks(page: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """The page's python blocks: (line of the fence, code, why it is not run or None)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        why = NOT_RUN.search(before)
        found.append((line, match.group(1), why.group(1) if why else None))
    return found


#: the pages with Python blocks: each runs as one test
PAGES = [page for page in DOCS if blocks(page)]


def expected_value(comment: str) -> tuple[bool, object]:
    """The value a trailing comment promises, if it opens with a Python literal (`# ['a.md']`, `# 3: ...`)."""
    for text in (comment, comment.split(": ", 1)[0]):
        try:
            return True, ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return False, None


def run_block(code: str, where: str, first_line: int, namespace: dict) -> int:
    """Run one block statement by statement; a one-line expression whose trailing comment is a literal is
    checked against it. A block with a top-level ``await`` (an async framework's API) runs whole on a fresh
    loop. Returns how many values were checked."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    whole = compile(code, where, "exec", flags=flags)
    if whole.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(whole, namespace))
        return 0
    lines = code.splitlines()
    tree = ast.parse(code)
    checked = 0
    for statement in tree.body:
        line = first_line + statement.lineno
        source = lines[statement.lineno - 1]
        comment = source.split("  # ", 1)[1] if "  # " in source else ""
        found, expected = expected_value(comment) if comment else (False, None)
        if isinstance(statement, ast.Expr) and statement.lineno == statement.end_lineno and found:
            value = eval(compile(ast.Expression(statement.value), where, "eval"), namespace)
            assert value == expected, (
                f"{where}:{line}: {ast.unparse(statement)} is {value!r}, the docs say {expected!r}"
            )
            checked += 1
            continue
        exec(compile(ast.Module([statement], type_ignores=[]), where, "exec"), namespace)
    return checked


def test_every_page_has_blocks_and_few_are_left_out() -> None:
    assert len(PAGES) > 10, "docs/guide/ holds the guide pages"
    assert ROOT / "README.md" in PAGES and ROOT / "docs" / "features.md" in DOCS
    assert any(page.parent.name == "decisions" for page in DOCS), "every page under docs/ is scanned"
    every = [block for page in PAGES for block in blocks(page)]
    left_out = [block for block in every if block[2] is not None]
    assert len(every) > 40
    assert len(left_out) <= MAX_NOT_RUN, f"{len(left_out)} blocks marked not run: {[b[2] for b in left_out]}"


def test_python_is_tagged_python_so_it_runs() -> None:
    """A block of Python fenced without the ``python`` tag (or as ``py``) would escape the run above."""
    untagged = [
        f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for page in DOCS
        for text in [page.read_text(encoding="utf-8")]
        for match in ANY_FENCE.finditer(text)
        if match.group(1) != "python" and PYTHON_START.match(match.group(2).lstrip("\n"))
    ]
    assert not untagged, f"Python blocks not fenced as ```python: {untagged}"


def test_a_block_left_out_says_why() -> None:
    for page in DOCS:
        for line, _code, why in blocks(page):
            assert why is None or len(why.split()) >= 3, f"{page.relative_to(ROOT)}:{line}: say why it cannot run"


@pytest.fixture
def docs_world(tmp_path, monkeypatch, local_backend):
    """A temp working dir and local-disk storage root; the process-wide settings the docs touch restored."""
    from flyteplugins_memory import set_retry_policy
    from flyteplugins_memory._base.retry import get_retry_policy

    monkeypatch.chdir(tmp_path)
    policy = get_retry_policy()
    yield tmp_path
    set_retry_policy(policy)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_page_runs(page: pathlib.Path, docs_world) -> None:
    namespace: dict = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    checked = 0
    for line, code, why in blocks(page):
        if why is not None:
            compile(code, f"{page.name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # still valid Python
            continue
        try:
            checked += run_block(code, str(page.relative_to(ROOT)), line, namespace)
        except Exception as err:
            raise AssertionError(f"{page.relative_to(ROOT)}, block at line {line} failed: {err!r}") from err
    for value in namespace.values():  # the stores the page opened are the temp root's, not the machine's
        if isinstance(value, MemoryStore) and value.remote_path:
            assert value.remote_path.startswith(str(docs_world)), value.remote_path
    print(f"{page.relative_to(ROOT)}: {checked} values checked against the docs")
