"""Names of the objects under a store prefix (schema v0, byte-for-byte upstream's layout).

    messages.json                                 transcript (JSON array of message dicts)
    <path>                                        path-addressed files
    meta/<quote(path, safe="")>.json              sidecar: path, sha256, updated_at, updated_by, reason, bytes
    audit/log.jsonl                               audit trail, one JSON object per line
    versions/<quote(path, safe="")>/<ts>_<sha>.txt  version snapshots

plus our own journal under ``meta/.journal/`` (see `docs/journal.md`). A sidecar name never contains a second
``/``, so no journal object can collide with a sidecar, and upstream's listing skips ``meta/`` entirely.

`classify` sorts a listed object name into one of these kinds, refusing names that a hostile store could
use to escape the local root.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..errors import InvalidPath, UnsafeStoreContent
from .paths import MESSAGES_PATH, is_reserved, normalize_path

AUDIT_LOG_PATH = "audit/log.jsonl"
META_DIR = "meta"
VERSIONS_DIR = "versions"
_SIDECAR_SUFFIX = ".json"
JOURNAL_DIR = f"{META_DIR}/.journal"
HEAD_NAME = f"{JOURNAL_DIR}/head.json"


def log_name(seq: int) -> str:
    """Commit record `seq`; creating it is the commit point of a save."""
    return f"{JOURNAL_DIR}/log/{seq:020d}.json"


def checkpoint_name(seq: int) -> str:
    return f"{JOURNAL_DIR}/checkpoints/{seq:020d}.json"


def audit_segment_name(seq: int) -> str:
    """Audit events folded into checkpoint `seq` (those after the previous checkpoint)."""
    return f"{JOURNAL_DIR}/audit/{seq:020d}.jsonl"


def blob_name(sha256: str) -> str:
    """Immutable, content-addressed copy of a file's bytes."""
    return f"{JOURNAL_DIR}/blobs/{sha256[:2]}/{sha256}"


def part_name(sha256: str) -> str:
    """Immutable, content-addressed part of a checkpoint's file index (see `_rules.index`)."""
    return f"{JOURNAL_DIR}/parts/{sha256[:2]}/{sha256}.json"


def search_segment_name(sha256: str) -> str:
    """Immutable, content-addressed segment of the search index (see `_rules.search_index`)."""
    return f"{JOURNAL_DIR}/search/{sha256[:2]}/{sha256}.json"


#: Characters `quote` never escapes: a path made of them and ``/`` encodes by replacing each ``/``.
_UNQUOTED = re.compile(r"[A-Za-z0-9_.~/-]*")


def encode_path(rel: str) -> str:
    """Reversibly encode a relative path into one file name (``a/b`` -> ``a%2Fb``), as upstream does."""
    if _UNQUOTED.fullmatch(rel):  # the usual path, without `quote`'s per-byte work (every write names two)
        return rel.replace("/", "%2F")
    return quote(rel, safe="")


def sidecar_name(rel: str) -> str:
    """Object name of the metadata sidecar of `rel`."""
    return f"{META_DIR}/{encode_path(rel)}{_SIDECAR_SUFFIX}"


def versions_dir_name(rel: str) -> str:
    """Directory holding the version snapshots of `rel`."""
    return f"{VERSIONS_DIR}/{encode_path(rel)}"


def version_name(rel: str, timestamp: str, sha256: str) -> str:
    """Object name of one version snapshot."""
    return f"{versions_dir_name(rel)}/{timestamp.replace(':', '-')}_{sha256}.txt"


class Kind(enum.Enum):
    """What an object under the store prefix is."""

    MESSAGES = "messages"
    AUDIT_LOG = "audit_log"
    SIDECAR = "sidecar"
    VERSION = "version"
    JOURNAL = "journal"
    OTHER_RESERVED = "other_reserved"
    FILE = "file"


@dataclass(frozen=True)
class StoredObject:
    """A classified object name; `path` is the user path it belongs to (for files, sidecars, versions)."""

    kind: Kind
    name: str
    path: str = ""


def classify(name: str) -> StoredObject:
    """Classify an object name relative to the store prefix, or raise `UnsafeStoreContent`."""
    try:
        rel = normalize_path(name)
    except InvalidPath as exc:
        raise UnsafeStoreContent(f"Stored object name {name!r} is not a safe relative path: {exc}") from exc
    if rel != name:
        raise UnsafeStoreContent(f"Stored object name {name!r} is not in canonical form ({rel!r})")
    if rel == MESSAGES_PATH:
        return StoredObject(Kind.MESSAGES, rel)
    if rel == AUDIT_LOG_PATH:
        return StoredObject(Kind.AUDIT_LOG, rel)
    if not is_reserved(rel):
        return StoredObject(Kind.FILE, rel, rel)
    top, _, rest = rel.partition("/")
    if rel.startswith(JOURNAL_DIR + "/"):
        return StoredObject(Kind.JOURNAL, rel)
    if top == META_DIR and "/" not in rest and rest.endswith(_SIDECAR_SUFFIX):
        return StoredObject(Kind.SIDECAR, rel, _decoded_path(rest[: -len(_SIDECAR_SUFFIX)], rel))
    if top == VERSIONS_DIR and rest.count("/") == 1:
        return StoredObject(Kind.VERSION, rel, _decoded_path(rest.split("/", 1)[0], rel))
    return StoredObject(Kind.OTHER_RESERVED, rel)


def _decoded_path(encoded: str, name: str) -> str:
    """Decode the user path embedded in a sidecar or version name; it must itself be a safe path."""
    try:
        return normalize_path(unquote(encoded))
    except InvalidPath as exc:
        raise UnsafeStoreContent(f"Stored object {name!r} names an unsafe path: {exc}") from exc
