"""Pure: the export archive's format, its manifest, and the rules every member name must pass.

An export is one ``.tar.gz`` holding the store's objects exactly as they are stored, so that the imported
store is the same store (same commits, same journal, same upstream layout), only somewhere else:

    store/<name>        an object under the store prefix (upstream's layout, and the fences of an old
                        journal inside it), by its name relative to the prefix
    journal/<name>      an object of the journal outside the prefix (``log/``, ``checkpoints/``, ``blobs/``,
                        ``head.json``, ...), by its name relative to the journal
    manifest.json       last: format version, key, counts, and each member's sha256 and size

The manifest comes last so that an export streams (each object is hashed as it is written); an import
spools and checks every member before it writes anything, so it needs the manifest only at the end.
Member names are untrusted on import: `member_target` refuses every name that is not one of the above.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidPath, UnsafeArchive, UnsafeStoreContent
from .data_map import journal_kind
from .layout import JOURNAL_DIR, Kind, classify

#: The manifest format this version writes and reads; an archive of another one is refused.
ARCHIVE_FORMAT = 1
ARCHIVE_KIND = "flyteplugins-memory-export"
MANIFEST_NAME = "manifest.json"
STORE_MEMBER = "store/"
JOURNAL_MEMBER = "journal/"
#: Defaults of `import_store`'s limits: one member, and every member together (decompressed).
DEFAULT_MAX_MEMBER_BYTES = 1 << 30
DEFAULT_MAX_TOTAL_BYTES = 8 << 30
#: The manifest is read into memory: it is refused beyond this (about 100 bytes per member).
MAX_MANIFEST_BYTES = 64 << 20


@dataclass(frozen=True)
class Target:
    """Where an archive member goes: under the store prefix (`in_journal` False) or in the journal, by
    name relative to it."""

    in_journal: bool
    name: str


def store_member(name: str) -> str:
    return STORE_MEMBER + name


def journal_member(name: str) -> str:
    """The member of journal object `name` (a logical ``meta/.journal/...`` name)."""
    return JOURNAL_MEMBER + name[len(JOURNAL_DIR) + 1 :]


def logical_name(target: Target) -> str:
    """The name `FsspecStorage` takes for `target` (journal objects by their logical name)."""
    return f"{JOURNAL_DIR}/{target.name}" if target.in_journal else target.name


def member_target(member: str) -> Target:
    """Where member `member` goes, or `UnsafeArchive` if its name is absolute, climbs with ``..``, is not in
    canonical form, or is not under ``store/`` or ``journal/``."""
    if member.startswith("/") or "\\" in member:
        raise UnsafeArchive(f"Archive member {member!r} has an absolute path", reason="absolute_path")
    if ".." in member.split("/"):
        raise UnsafeArchive(f"Archive member {member!r} climbs out with '..'", reason="parent_path")
    for prefix, in_journal in ((STORE_MEMBER, False), (JOURNAL_MEMBER, True)):
        if member.startswith(prefix):
            return Target(in_journal, _checked(member, member[len(prefix) :], in_journal))
    raise UnsafeArchive(f"Archive member {member!r} is neither store/ nor journal/ content", reason="unknown_member")


def _checked(member: str, name: str, in_journal: bool) -> str:
    """`name`, if it is a canonical object name the store itself would accept at that place."""
    try:
        if in_journal:
            classify(f"{JOURNAL_DIR}/{name}")
        else:
            classify(name)
    except (UnsafeStoreContent, InvalidPath) as exc:
        raise UnsafeArchive(f"Archive member {member!r} names an unsafe object: {exc}", reason="unsafe_path") from exc
    if in_journal and journal_kind(name) is None:
        # an object no kind of the data map names would sit where purge, gc and deletion never look
        raise UnsafeArchive(f"Archive member {member!r} is no kind of journal object", reason="unknown_member")
    return name


@dataclass(frozen=True)
class Manifest:
    """What an archive holds: its format, the store's key and where it came from, counts by kind, and
    each member's ``{"sha256": ..., "size": ...}``."""

    key: str
    source: str
    exported_at: str
    writer: str
    members: dict[str, dict[str, Any]]
    counts: dict[str, int]

    def encode(self) -> bytes:
        body = {"format": ARCHIVE_FORMAT, "kind": ARCHIVE_KIND, **self.__dict__, "ext": {}}
        return json.dumps(body, sort_keys=True, indent=1).encode()


def parse_manifest(data: bytes) -> Manifest:
    """The manifest in `data`, or `UnsafeArchive` if it is not one of the format this version reads."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnsafeArchive(f"The archive's manifest is not JSON: {exc}", reason="bad_manifest") from exc
    if not isinstance(body, dict) or body.get("kind") != ARCHIVE_KIND:
        raise UnsafeArchive("The archive's manifest is not a flyteplugins-memory export", reason="bad_manifest")
    if body.get("format") != ARCHIVE_FORMAT:
        found = body.get("format")
        raise UnsafeArchive(
            f"The archive has manifest format {found!r}; this version reads format {ARCHIVE_FORMAT}",
            reason="unknown_format",
        )
    return _manifest_of(body)


def _manifest_of(body: dict[str, Any]) -> Manifest:
    members = body.get("members")
    if not isinstance(members, dict) or not all(_is_entry(e) for e in members.values()):
        raise UnsafeArchive("The archive's manifest lists its members malformed", reason="bad_manifest")
    text = {f: body.get(f) if isinstance(body.get(f), str) else "" for f in ("key", "source", "exported_at", "writer")}
    counts = body.get("counts") if isinstance(body.get("counts"), dict) else {}
    return Manifest(members=members, counts=dict(counts or {}), **text)  # type: ignore[arg-type]


def _is_entry(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    sha, size = entry.get("sha256"), entry.get("size")
    return isinstance(sha, str) and len(sha) == 64 and isinstance(size, int) and size >= 0


def count_kinds(names: list[str]) -> dict[str, int]:
    """How many objects of each kind a list of member names holds (files, sidecars, versions, ...)."""
    counts: dict[str, int] = {}
    for member in names:
        target = member_target(member)
        kind = classify(target.name).kind if not target.in_journal else None
        label = "journal" if kind is None else "old_journal" if kind is Kind.JOURNAL else kind.value
        counts[label] = counts.get(label, 0) + 1
    return counts
