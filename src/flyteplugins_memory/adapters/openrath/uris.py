"""Where OpenRath's names live in our store: the key of an opened store, and ``memory://`` URIs <-> the
store paths of entries, directories and session logs. Pure rules, no I/O.

The mapping is injective, so no two names ever share storage:

* a segment of letters, digits and ``_-.`` that does not start with ``.`` and does not end in ``.md``
  (any case) is itself; any other is ``~`` and the hex of its UTF-8 bytes. An encoded segment therefore
  never ends in ``.md``, so a directory ``x.md`` (``~782e6d64/``) can never be the file of an entry
  ``x`` (``x.md``): entries are the only names ending in ``.md``.
* the key of a store is ``<base>`` without a user and ``<base>@<user segment>`` with one (``~~`` and the
  user's sha256 when that would pass `KEY_MAX`); ``@`` is refused in the base, so two (base, user) pairs
  never share a key.
* ``memory://session/<id>/transcript`` is the commit log of session ``<id>``, never a file.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from .errors import fail

__all__ = [
    "KEY_MAX",
    "ROOT",
    "SCOPES",
    "SUFFIX",
    "TRANSCRIPT",
    "check_session_id",
    "decode_segment",
    "dir_of",
    "encode_segment",
    "is_transcript",
    "join",
    "legacy_path_of",
    "parse_uri",
    "path_of",
    "session_log",
    "store_key",
    "transcript_uri",
    "uri_of",
]

ROOT = "openrath"
SCOPES = ("agent", "resources", "session", "user")
SUFFIX = ".md"
TRANSCRIPT = "transcript"
USER_SEPARATOR = "@"
KEY_MAX = 255  # bytes of a key: it is one directory name, and local file systems allow 255
_PREFIXES = ("memory://", "viking://")
_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def _is_plain(segment: str, *, keep_md: bool = False) -> bool:
    # keep_md: names ending in ".md" stay plain where no entry file can be met (a log name), and in the
    # adapter's first rule (c120bbb), whose directory "x.md" was the file of the entry "x"
    return bool(_PLAIN.fullmatch(segment)) and (keep_md or not segment.lower().endswith(SUFFIX))


def encode_segment(segment: str, *, keep_md: bool = False) -> str:
    if _is_plain(segment, keep_md=keep_md):
        return segment
    return "~" + segment.encode("utf-8").hex()


def decode_segment(segment: str) -> str:
    if segment.startswith("~"):
        try:
            return bytes.fromhex(segment[1:]).decode("utf-8")
        except ValueError:
            return segment
    return segment


def _bad_segment(segment: str) -> bool:
    """Whether `segment` cannot be one segment of a URI (so it cannot round-trip through one)."""
    control = any(ord(c) < 0x20 or c == "\x7f" for c in segment)
    return segment in ("", ".", "..") or "/" in segment or control or not _is_text(segment)


def _is_text(segment: str) -> bool:
    """Whether `segment` is text UTF-8 can encode: a lone surrogate (``"\\ud800"``) is not, and its bytes
    (``surrogatepass``) would decode to no name at all, so its path would read back as another name."""
    try:
        segment.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_uri(uri: object) -> tuple[str, list[str]]:
    """``(scope, segments)`` of a memory URI; scope ``""`` for the root ``memory://``."""
    if not isinstance(uri, str):
        raise fail("invalid_uri", f"a memory URI must be a str, got {type(uri).__name__}")
    scheme = next((p for p in _PREFIXES if uri.startswith(p)), None)
    if scheme is None:
        if uri.rstrip("/") in ("memory:", "viking:"):
            return "", []
        raise fail("invalid_uri", f"URI must start with 'memory://': {uri!r}")
    tail = uri[len(scheme) :].removesuffix("/")
    if not tail:
        return "", []
    scope, *rest = tail.split("/")
    if scope not in SCOPES:
        raise fail("invalid_uri", f"unknown scope {scope!r} in {uri!r}; must be one of {list(SCOPES)}")
    if any(_bad_segment(s) for s in rest):
        raise fail("invalid_uri", f"empty, '.', '..', control-character or lone-surrogate segment in {uri!r}")
    return scope, rest


def dir_of(scope: str, segments: Sequence[str], *, keep_md: bool = False) -> str:
    """The store directory of a URI taken as a directory."""
    names = [encode_segment(s, keep_md=keep_md) for s in segments]
    return "/".join([ROOT, *([scope] if scope else []), *names])


def path_of(uri: str) -> str:
    """The store file of an entry URI (``invalid_uri`` for the root or a bare scope)."""
    scope, segments = parse_uri(uri)
    if not segments:
        raise fail("invalid_uri", f"{uri!r} names a scope, not an entry")
    return dir_of(scope, segments[:-1]) + "/" + encode_segment(segments[-1]) + SUFFIX


def legacy_path_of(uri: str) -> str | None:
    """Where the first release's rule put the entry `uri`, if that differs from `path_of` (a name
    ending in ``.md``); read as a fallback so stores written by it keep their entries."""
    scope, segments = parse_uri(uri)
    old = dir_of(scope, segments[:-1], keep_md=True) + "/" + encode_segment(segments[-1], keep_md=True) + SUFFIX
    return None if old == path_of(uri) else old


def uri_of(path: str) -> str | None:
    """The entry URI of a store file, None for a file that is no entry (either rule's files decode)."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != ROOT or parts[1] not in SCOPES or not parts[-1].endswith(SUFFIX):
        return None
    names = [decode_segment(p) for p in parts[2:-1]] + [decode_segment(parts[-1][: -len(SUFFIX)])]
    return "memory://" + parts[1] + "/" + "/".join(names)


def join(base: str, name: str) -> str:
    return base + name if base.endswith("://") else base.rstrip("/") + "/" + name


# -- sessions ---------------------------------------------------------------------------------------------


def check_session_id(session_id: object) -> str:
    """`session_id` if it is one URI segment, so the transcript URI a commit returns reads back."""
    if not isinstance(session_id, str) or _bad_segment(session_id):
        raise fail(
            "invalid_uri",
            f"a session_id must be one non-empty segment without '/', control characters or lone "
            f"surrogates and not '.' or '..', got {session_id!r}",
        )
    return session_id


def transcript_uri(session_id: str) -> str:
    """The URI that reads session `session_id`'s committed messages (a commit's archive is `archive`'s)."""
    return f"memory://session/{session_id}/{TRANSCRIPT}"


def is_transcript(scope: str, segments: Sequence[str]) -> bool:
    """Whether a parsed URI is a session's transcript, which only `MemoryOpCommit` writes."""
    return scope == "session" and len(segments) == 2 and segments[1] == TRANSCRIPT


def session_log(session_id: str) -> str:
    """The name of the record log (``store.session(...)``) that holds the commits of a session."""
    return "openrath-" + encode_segment(session_id, keep_md=True)  # the first release's names, kept


# -- stores -----------------------------------------------------------------------------------------------


def store_key(base: str, user_id: str | None) -> str:
    """The key of an OpenRath store: `base` alone, or ``base@<user>`` so users never share a key. A user
    whose segment would make the key longer than `KEY_MAX` bytes is ``~~`` and the sha256 hex of its
    UTF-8 instead (no segment starts with ``~~``, so the forms never meet; shorter keys are unchanged)."""
    if USER_SEPARATOR in base:
        raise ValueError(f"'{USER_SEPARATOR}' separates the user in a key; not allowed in key/namespace {base!r}")
    if user_id and not _is_text(user_id):
        raise ValueError(f"user_id must be text UTF-8 can encode (no lone surrogates), got {user_id!r}")
    key = f"{base}{USER_SEPARATOR}{encode_segment(user_id)}" if user_id else base
    if user_id and len(key.encode("utf-8")) > KEY_MAX:
        key = f"{base}{USER_SEPARATOR}~~{hashlib.sha256(user_id.encode('utf-8')).hexdigest()}"
    if len(key.encode("utf-8")) > KEY_MAX:
        raise ValueError(
            f"the key {key[:40]!r}... is {len(key.encode('utf-8'))} bytes, over the {KEY_MAX}-byte limit of a "
            f"key (one directory name); shorten key/namespace {base[:40]!r}..."
        )
    return key
