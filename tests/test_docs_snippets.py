"""The docs run: every ```python block of README.md and docs/guide/*.md, so they cannot drift from the code.

Each page's blocks run in order in one namespace (a later block uses what an earlier one opened), in a
temporary working directory, with Flyte's raw-data path bound to a temporary local-disk root. A block that
cannot run offline (a Flyte cluster, cloud credentials) carries ``<!-- not run: <why> -->`` on the line
before its fence; the test counts those and fails if more than a handful are left out.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import pathlib
import re
import types

import pytest

from flyteplugins_memory import MemoryStore

ROOT = pathlib.Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
#: how many blocks the docs may leave out in all; more means the docs stopped being checked
MAX_NOT_RUN = 5
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
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


def run_block(code: types.CodeType, namespace: dict) -> None:
    """Run one block; one with a top-level ``await`` (an async framework's API) runs on a fresh loop."""
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))
    else:
        exec(code, namespace)


def test_every_page_has_blocks_and_few_are_left_out() -> None:
    assert len(PAGES) > 10, "docs/guide/ holds the guide pages"
    every = [block for page in PAGES for block in blocks(page)]
    left_out = [block for block in every if block[2] is not None]
    assert len(every) > 40
    assert len(left_out) <= MAX_NOT_RUN, f"{len(left_out)} blocks marked not run: {[b[2] for b in left_out]}"


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
    for line, code, why in blocks(page):
        if why is not None:
            compile(code, f"{page.name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # still valid Python
            continue
        try:
            run_block(compile(code, f"{page.name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
        except Exception as err:
            raise AssertionError(f"{page.relative_to(ROOT)}, block at line {line} failed: {err!r}") from err
    for value in namespace.values():  # the stores the page opened are the temp root's, not the machine's
        if isinstance(value, MemoryStore) and value.remote_path:
            assert value.remote_path.startswith(str(docs_world)), value.remote_path
