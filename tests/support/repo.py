"""Where things are in the checkout, for tests in any folder and for the child processes they start.

Tests live one folder deep (``tests/<package>/test_*.py``) and support modules here, so paths are taken
from this file rather than from each test's own ``__file__``.
"""

from __future__ import annotations

import pathlib

__all__ = ["REPO", "SUPPORT", "TESTS"]

#: this folder: put it first on a child process's ``sys.path`` so it imports ``workers``, ``helpers``, ...
SUPPORT = pathlib.Path(__file__).resolve().parent
#: the suite's root (``conftest.py``)
TESTS = SUPPORT.parent
#: the checkout (``pyproject.toml``, ``src/``, ``docs/``, ``benchmarks/``, ``workflows/``)
REPO = TESTS.parent
