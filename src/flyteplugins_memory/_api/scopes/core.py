"""`ScopeCore`: what every part of a scope stands on: the handle it is a view of, its prefix, and the
gate every scope path passes (`_rules.scope_paths`, then no symlink out of the prefix in the local working
copy) before it becomes a store path."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..._rules.scope_paths import joined, relative, scope_dir, scope_path, scope_prefix
from ...errors import PathEscapesRoot

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["ScopeCore"]


class ScopeCore:
    """A view of `store` confined to `prefix`."""

    def __init__(self, store: MemoryStore, prefix: str):
        self._store = store
        self._prefix = scope_prefix(prefix)

    @property
    def prefix(self) -> str:
        """The store path this scope is confined to."""
        return self._prefix

    @property
    def store(self) -> MemoryStore:
        """The handle this scope is a view of (its working copy holds the scope's changes)."""
        return self._store

    async def _full(self, path: object, *, directory: bool = False) -> str:
        """The store path of scope path `path`, after the scope's rules and the symlink check."""
        rel = scope_dir(path) if directory else scope_path(path)
        full = joined(self._prefix, rel)
        await asyncio.to_thread(self._refuse_symlink_escape, full)
        return full

    def _refuse_symlink_escape(self, full: str) -> None:
        """In the local working copy, `full` must resolve inside the prefix (a symlink there that points
        to another scope, or out of the root, is an escape). Blocking: run in a thread."""
        workdir = self._store._checkout.working_copy.workdir
        resolved = workdir.resolve(full)  # PathEscapesRoot if it leaves the root
        if not resolved.is_relative_to(workdir.resolve("") / self._prefix):
            raise PathEscapesRoot(f"{relative(self._prefix, full) or '.'!r} leads out of scope {self._prefix!r}")
