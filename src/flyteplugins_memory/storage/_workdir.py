"""The local working directory of a store handle: blocking file I/O, confined to the root.

Every function here blocks; the store runs them through ``asyncio.to_thread``. Paths are resolved with
symlinks followed and must stay under the root, so neither a caller nor hostile remote content can make
the store read or write outside it. Writes go to a temp file beside the target and are renamed into
place, so a reader never sees a half-written file.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
import uuid
from collections.abc import Iterator
from typing import BinaryIO

from ..errors import PathEscapesRoot

_TEMP_MARKER = ".~fpm-"


class WorkDir:
    """A directory that holds a store's hydrated files, sidecars and pending snapshots."""

    def __init__(self, root: pathlib.Path):
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self._real_root = root.resolve()
        self._real = str(self._real_root)

    def resolve(self, rel: str) -> pathlib.Path:
        """Absolute path of a normalized relative path; raises `PathEscapesRoot` if it leaves the root."""
        return pathlib.Path(self._resolved(rel))

    def _resolved(self, rel: str) -> str:
        """`resolve` as a string. The root is already real, so a plain relative path whose components are
        no symlinks resolves to itself: checked with one ``lstat`` per component (a bulk write mirrors
        thousands of files, and ``Path.resolve`` costs several times that); anything else resolves fully."""
        parts = rel.split("/")
        if rel and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts):
            path = self._real
            for part in parts:
                path = os.path.join(path, part)
                try:
                    if stat.S_ISLNK(os.lstat(path).st_mode):
                        break
                except (FileNotFoundError, NotADirectoryError):  # nothing below a missing name is a link
                    return os.path.join(self._real, *parts)
            else:
                return path
        candidate = (self.root / rel).resolve()
        if candidate != self._real_root and self._real_root not in candidate.parents:
            raise PathEscapesRoot(f"Path {rel!r} resolves outside the memory root")
        return str(candidate)

    def read(self, rel: str) -> bytes | None:
        """Contents of `rel`, or None if it does not exist."""
        try:
            with open(self._resolved(rel), "rb") as handle:
                return handle.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def exists(self, rel: str) -> bool:
        return os.path.isfile(self._resolved(rel))

    def write(self, rel: str, data: bytes) -> None:
        """Atomically replace `rel` with `data` (temp file in the same directory, then rename)."""
        replace_atomically(self._resolved(rel), data)  # resolved first: no directory made through a symlink

    def append(self, rel: str, data: bytes) -> None:
        """Append `data` to `rel` (one ``write`` call, so a line is never interleaved)."""
        fd = _open_making_dirs(self._resolved(rel), _APPEND_FLAGS)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def remove(self, rel: str) -> None:
        """Remove `rel` and the directories it leaves empty (up to the root)."""
        target = self.resolve(rel)
        target.unlink(missing_ok=True)
        remove_empty_parents(str(target), str(self._real_root))

    def scan(self) -> Iterator[tuple[str, int]]:
        """Every regular file under the root as ``(relative posix name, size)``; symlinks are skipped."""
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            base = pathlib.Path(dirpath)
            dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
            for name in filenames:
                full = base / name
                if name.startswith(_TEMP_MARKER) or full.is_symlink():
                    continue
                yield full.relative_to(self.root).as_posix(), full.stat().st_size


#: Raw descriptors, not `open()`: a buffered file object costs more syscalls (fstat, isatty, lseek) and
#: more Python than the small write itself, and the working root's writer makes thousands of them.
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def replace_atomically(target: str, data: bytes) -> None:
    """Replace file `target` with `data` through a temp file beside it and a rename. The temp name has a
    fixed length: appending to the target's own name would overflow the 255-byte limit of a name that fits."""
    temp = os.path.join(os.path.dirname(target), f"{_TEMP_MARKER}{uuid.uuid4().hex}")
    try:
        fd = _open_making_dirs(temp, _NEW_FLAGS)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _open_making_dirs(path: str, flags: int) -> int:
    """A descriptor of `path` opened with `flags`, its directory made first if missing (tried after the
    open: it usually exists, and checking first would cost a syscall on every call)."""
    try:
        return os.open(path, flags, 0o666)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, flags, 0o666)


def _write_all(fd: int, data: bytes) -> None:
    # one call writes everything for a regular file; the loop covers a short write (a signal, a full disk)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def new_file(path: str) -> BinaryIO:
    """A new file at `path`, its directory made first if missing (tried after the open: it usually exists)."""
    try:
        return open(path, "xb")
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "xb")


def remove_empty_parents(path: str, root: str) -> None:
    """Remove the directories above `path` that are empty, up to (not including) `root`, so that a file
    can later take one of their names."""
    parent = os.path.dirname(path)
    while parent.startswith(root + os.sep):
        try:
            os.rmdir(parent)
        except OSError:  # not empty, or already gone: stop
            return
        parent = os.path.dirname(parent)


def remove_empty_tree(path: str) -> None:
    """Remove `path` and the empty directories under it, bottom up (files are never touched): local disk
    keeps the directories of a store whose objects are gone, which `list_keys` would list as a store."""
    for directory, _, _ in os.walk(path, topdown=False):
        with contextlib.suppress(OSError):  # not empty after all (a racing projection): it stays, harmless
            os.rmdir(directory)
