"""Pure rules for keys and memory-relative paths: what is valid, reserved or read-only.

Every path, whether it comes from a caller or from a listing of remote storage, goes through
`normalize_path`; every write additionally through `check_writable`. No I/O happens here.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InvalidKey, InvalidPath, ReadOnlyPath, ReservedPath

MESSAGES_PATH = "messages.json"
#: Top-level directories the store manages itself (upstream's ``_INTERNAL_DIRS``).
RESERVED_DIRS: frozenset[str] = frozenset({"audit", "meta", "versions"})

_CONTROL_CHARS = frozenset(chr(c) for c in range(0x20)) | {"\x7f"}


def _has_control_char(value: str) -> bool:
    return any(ch in _CONTROL_CHARS for ch in value)


def is_unicode(value: str) -> bool:
    """Whether `value` can be stored as UTF-8 (object names, sidecars and the journal are UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def normalize_path(path: str) -> str:
    """Return `path` as a canonical POSIX relative path, or raise `InvalidPath`.

    Empty and ``.`` segments collapse (``"a//./b"`` is ``"a/b"``), as upstream does; absolute paths,
    ``..`` segments, control characters (NUL included) and paths that collapse to nothing are refused.
    """
    if not isinstance(path, str):
        raise InvalidPath(f"Path must be a str, got {type(path).__name__}")
    if _has_control_char(path):
        raise InvalidPath(f"Path must not contain control characters (NUL included), got {path!r}")
    if not is_unicode(path):
        raise InvalidPath(f"Path must be valid Unicode (no lone surrogates), got {path!r}")
    if path.startswith("/"):
        raise InvalidPath(f"Path must be relative, got {path!r}")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidPath(f"Path traversal is not allowed, got {path!r}")
    if not parts:
        raise InvalidPath(f"Empty path is not allowed, got {path!r}")
    return "/".join(parts)


def normalize_prefix(prefix: str) -> str:
    """Like `normalize_path`, but the empty prefix (the whole store) is allowed."""
    return "" if prefix in ("", ".") else normalize_path(prefix)


def is_reserved(rel: str) -> bool:
    """Whether a normalized path is the transcript (or below it) or lies in a reserved top-level directory."""
    top = rel.split("/", 1)[0]
    return top == MESSAGES_PATH or top in RESERVED_DIRS


def check_writable(rel: str, read_only_prefixes: Iterable[str]) -> None:
    """Raise `ReservedPath` or `ReadOnlyPath` if a normalized path may not be written or deleted."""
    if rel == MESSAGES_PATH:
        raise ReservedPath("messages.json is managed by MemoryStore; mutate via append() / extend().")
    if is_reserved(rel):
        raise ReservedPath(f"Writes to {rel!r} are not allowed (reserved prefix)")
    for prefix in read_only_prefixes:
        if rel.startswith(prefix):
            raise ReadOnlyPath(f"Writes to {rel!r} are not allowed (read-only prefix {prefix!r})")


def parent_dirs(rel: str) -> list[str]:
    """Every directory above a normalized path, outermost first (``a/b/c`` -> ``a``, ``a/b``)."""
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def directories_of(paths: Iterable[str]) -> set[str]:
    """Every directory that holds one of `paths`."""
    return {d for p in paths for d in parent_dirs(p)}


def file_dir_clashes(paths: Iterable[str]) -> list[str]:
    """Paths that are files and also directories of other paths (``x`` beside ``x/y``): no filesystem,
    and so no upstream reader, can hold both."""
    files = set(paths)
    return sorted(files & directories_of(files))


def validate_segment(value: str, *, name: str = "key") -> str:
    """Return `value` if it is a single safe path segment (a key, org, project or domain)."""
    if not isinstance(value, str) or not value:
        raise InvalidKey(f"{name} must be a non-empty str, got {value!r}")
    if value in (".", "..") or "/" in value or "\\" in value or _has_control_char(value) or not is_unicode(value):
        raise InvalidKey(f"{name} must be a single path segment without control characters, got {value!r}")
    return value
