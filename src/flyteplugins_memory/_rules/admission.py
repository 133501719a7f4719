"""The one gate every caller path passes before the store acts on it.

`MemoryStore` admits each path through `PathAdmission.admit`, naming what it is about to do. A view that
confines a store (a scope, a read-only handle) swaps this object for one with its own rules; no method of
the store checks paths any other way. Remote paths (listed objects, journal entries) pass the same
`normalize_path` rules where they are parsed (`_rules.journal_objects`, `_rules.inventory`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from .limits import check_path_fits
from .paths import check_writable, normalize_path, normalize_prefix


class Access(enum.Enum):
    """What the store is about to do with a path."""

    #: read a file's content, metadata, sha or versions, or test that it exists
    READ = "read"
    #: list the files under a directory (``""`` is the whole store)
    LIST = "list"
    #: write a file: also refused in read-only prefixes, and where its stored names would not fit
    WRITE = "write"
    #: delete (or purge) a file: refused in read-only prefixes
    DELETE = "delete"


class PathAdmission:
    """The path rules of one handle: canonical relative paths, reserved and read-only prefixes, and the
    name-length limits of where the store lives. Reads the handle's settings at each call, because
    upstream exposes them as plain attributes a caller may change (``store.read_only_prefixes = ...``)."""

    def __init__(self, read_only_prefixes: Callable[[], tuple[str, ...]], location: Callable[[], str | None]):
        self._read_only_prefixes = read_only_prefixes
        self._location = location

    def admit(self, path: str, access: Access, *, trusted: bool = False) -> str:
        """The canonical form of `path` if `access` to it is allowed; raises the typed error otherwise
        (`InvalidPath`, `PathEscapesRoot`, `ReservedPath`, `ReadOnlyPath`). `trusted` lifts the read-only
        prefixes (a trusted handle accepting a proposal into one, or a proposal staged for such a handle)."""
        if access is Access.LIST:
            return normalize_prefix(path)
        rel = normalize_path(path)
        if access in (Access.WRITE, Access.DELETE):
            check_writable(rel, () if trusted else self._read_only_prefixes())
        if access is Access.WRITE:
            check_path_fits(rel, self._location())
        return rel
