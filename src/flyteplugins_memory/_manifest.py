"""The in-memory index of a store's live files: what `list_paths`, `exists` and `get_meta` answer from.

It is built once when a store is opened and kept current by every write, so those calls never walk a
directory or touch storage.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ._records import MemoryMeta


@dataclass(frozen=True)
class FileEntry:
    """One live file: its content hash and size, its sidecar if it has one, and why not if it is corrupt."""

    path: str
    sha256: str
    bytes: int
    meta: MemoryMeta | None
    meta_error: str = ""


class Manifest:
    """A mapping of normalized path to `FileEntry`."""

    def __init__(self, entries: dict[str, FileEntry] | None = None):
        self._entries: dict[str, FileEntry] = dict(entries or {})

    def __contains__(self, path: object) -> bool:
        return path in self._entries

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, path: str) -> FileEntry | None:
        return self._entries.get(path)

    def put(self, entry: FileEntry) -> None:
        self._entries[entry.path] = entry

    def remove(self, path: str) -> None:
        self._entries.pop(path, None)

    def sha(self, path: str) -> str:
        """The current sha256 of `path`, or ``""`` if there is no such file (upstream's convention)."""
        entry = self._entries.get(path)
        return entry.sha256 if entry else ""

    def paths(self, prefix: str = "") -> list[str]:
        """Sorted paths under directory `prefix` (all paths for ``""``)."""
        if not prefix:
            return sorted(self._entries)
        below = prefix + "/"
        return sorted(p for p in self._entries if p.startswith(below))

    def has_file_or_dir(self, path: str) -> bool:
        """Whether `path` is a file, or a directory that holds at least one file."""
        if path in self._entries:
            return True
        below = path + "/"
        return any(p.startswith(below) for p in self._entries)
