"""Pure: the path rules of a scope (``store.scope(prefix)``), stricter than a store's own.

A store keeps upstream's rules (`_rules.paths.normalize_path`) so that it stays a drop-in; a scope confines a
caller (often an agent acting for one user) to a prefix, so it also refuses whatever some layer could
read as another path. A scope path, and the prefix itself, must be:

    - a str in NFKC form: fullwidth dots and solidus (``U+FF0E``, ``U+FF0F``), ``U+2024`` (one dot
      leader), ligatures and compatibility forms normalize to other characters, and so do decomposed
      (NFD) accents, which NFC/NFKC-normalizing filesystems and tools would rewrite
    - free of control, format and separator characters (Unicode categories Cc, Cf, Cs, Co, Zl, Zp:
      NUL, bidi overrides, zero-width joiners, line separators)
    - free of backslashes (a separator on Windows and in some object-store tools)
    - free of percent-encodings of a dot, a separator, a percent sign or a control character (``%2e``,
      ``%2f``, ``%5c``, ``%25``, ``%00``-``%1f``, ``%7f``) and of overlong UTF-8 forms (``%c0``, ``%c1``,
      ``%e0%80``-``%e0%9f``, ``%f0%80``-``%f0%8f``) and of ``%uXXXX`` escapes (IIS-style, ``%u002e``), in
      either case: a layer that decodes once would see ``..`` or ``/``
    - relative, without ``..`` segments (empty and ``.`` segments collapse, as in a store)

Anything else that escapes (``..``, absolute, backslash, lookalikes, encodings) raises `PathEscapesRoot`;
a path that is malformed (empty, control characters, not a str) `InvalidPath`, its base class.
"""

from __future__ import annotations

import re
import unicodedata

from ..errors import InvalidPath, PathEscapesRoot, ReservedPath
from .paths import is_reserved, normalize_path

_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
_ENCODED = re.compile(
    r"%(?:2[ef]|5c|25|[01][0-9a-f]|7f|c[01]|e0%[89][0-9a-f]|f0%8[0-9a-f]|u[0-9a-f]{4})", re.IGNORECASE
)


def _refuse_escapes(path: str) -> None:
    if unicodedata.normalize("NFKC", path) != path:
        raise PathEscapesRoot(f"A scope path must be in Unicode NFKC form (no lookalikes of '.' or '/'), got {path!r}")
    if any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in path):
        raise InvalidPath(f"A scope path must not contain control, format or separator characters, got {path!r}")
    if "\\" in path:
        raise PathEscapesRoot(f"A scope path must not contain backslashes, got {path!r}")
    if _ENCODED.search(path):
        raise PathEscapesRoot(f"A scope path must not percent-encode dots, separators or '%', got {path!r}")
    if path.startswith("/") or ".." in path.split("/"):
        raise PathEscapesRoot(f"A scope path must stay inside its scope (relative, no '..'), got {path!r}")


def scope_path(path: object) -> str:
    """The canonical form of a path given to a scope (relative to its prefix), or the typed error."""
    if not isinstance(path, str):
        raise InvalidPath(f"Path must be a str, got {type(path).__name__}")
    _refuse_escapes(path)
    return normalize_path(path)


def scope_dir(prefix: object) -> str:
    """Like `scope_path`, but ``""`` (the whole scope) is allowed: a directory to list or prefetch."""
    if prefix in ("", "."):
        return ""
    return scope_path(prefix)


def scope_prefix(prefix: object) -> str:
    """The canonical prefix of a new scope: a scope path that names no bookkeeping (`ReservedPath`)."""
    rel = scope_path(prefix)
    if is_reserved(rel):
        raise ReservedPath(f"A scope cannot be a reserved prefix (messages.json, audit/, meta/, versions/): {rel!r}")
    return rel


def joined(prefix: str, rel: str) -> str:
    """The store path of scope path `rel` (``""``: the prefix itself)."""
    return f"{prefix}/{rel}" if rel else prefix


def is_inside(prefix: str, path: str) -> bool:
    """Whether store path `path` lies in the scope of `prefix`."""
    return path.startswith(prefix + "/")


def relative(prefix: str, path: str) -> str:
    """Store path `path` (inside the scope) as the scope names it."""
    return path[len(prefix) + 1 :]
