"""Pure: the data map. Every kind of object a store keeps in storage, what user data each can carry, and
how each cross-cutting operation (purge, ttl expiry, retention and gc, read-only prefixes, scopes, store
deletion, export) reaches it.

A feature that stores a new kind of object registers it here, or `classify_object` refuses to name it and
the test that lists every object after a scenario of every feature fails (tests/rules/test_data_map.py). gc and
purge sort a journal listing through `journal_kind` (`_journal.retention.Inventory.of`), so a journal object they
do not know of is one this map does not know of. docs/data-map.md is rendered from this module
(`render_markdown`); a test keeps the two equal.

Two levels: `OBJECTS`, the stored objects themselves, matched by name in one of two areas (the store prefix,
upstream's layout, and the journal beside it); and `PLACES`, the places inside structured objects where
content-derived data sits (a commit record's file entries, its appended messages, the proposals map...).
Content-derived data (text, labels, snippets) never sits where purge cannot remove it: every place that
carries content or labels names how purge reaches it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

__all__ = [
    "OBJECTS",
    "PLACES",
    "Area",
    "Carries",
    "ObjectKind",
    "Place",
    "UnknownStoredObject",
    "classify_object",
    "journal_kind",
    "render_markdown",
]


class Area(enum.Enum):
    """Where an object lives: under the store prefix (upstream's layout), in the journal beside it
    (``{root}/agents/memory-store/.journal/v0/...``, or ``meta/.journal/`` inside the prefix for the old
    layout and for stores at a bucket's root), or wherever a caller put it (export archives)."""

    STORE = "store"
    JOURNAL = "journal"
    ELSEWHERE = "elsewhere"


class Carries(enum.Flag):
    """What user data an object (or a place in one) can hold."""

    NOTHING = 0
    #: file bytes, or text derived from them (search words and snippets)
    CONTENT = enum.auto()
    #: metadata labels (``metadata={...}`` on writes, proposals' metadata)
    LABELS = enum.auto()
    #: transcript messages and session/record-log records
    MESSAGES = enum.auto()
    #: user path names
    PATHS = enum.auto()
    #: who and why: actor and reason strings
    ATTRIBUTION = enum.auto()


class UnknownStoredObject(AssertionError):
    """An object name no kind of the map matches: a feature stores data it did not register (a bug)."""


@dataclass(frozen=True)
class ObjectKind:
    """One kind of stored object and how every cross-cutting operation reaches it."""

    name: str
    area: Area
    #: the object's name as the docs write it (relative to the store prefix or to the journal)
    pattern: str
    carries: Carries
    #: which user paths its data concerns
    concerns: str
    purge: str
    expiry: str
    gc: str
    read_only: str
    scopes: str
    delete_store: str
    export: str
    #: the `_journal.retention.Inventory` table that lists it (journal kinds that gc and purge walk), or ""
    inventory: str = ""
    #: the full-match regex of its name (relative to its area)
    regex: str = ""

    def matches(self, name: str) -> bool:
        return bool(self.regex) and re.fullmatch(self.regex, name) is not None


_SEQ = r"[0-9]{20}"
_SHA = r"[0-9a-f]{64}"
_ENC = r"[^/]+"  # one percent-encoded path (`_rules.layout.encode_path`)
_DELETES = "removed (everything under the prefix and the journal; the deletion record stays)"

#: Every kind of stored object, journal kinds first. Order matters where patterns overlap: the first
#: kind that matches a name is its kind (a record-log segment is also a file name).
OBJECTS: tuple[ObjectKind, ...] = (
    ObjectKind(
        "commit_record",
        Area.JOURNAL,
        "log/<seq:020>.json",
        Carries.CONTENT | Carries.LABELS | Carries.MESSAGES | Carries.PATHS | Carries.ATTRIBUTION,
        "every path changed since its checkpoint, the transcript appended since it, the proposals map (the same "
        "slot may instead hold gc's tombstone, a deletion record, or the claim naming the key's next generation)",
        purge="rewritten in place: the path's entries lose labels and ttl, its proposals their text, purged "
        "messages their text (who wrote what stays; see the places below)",
        expiry="gc's expiry commit deletes the entry; gc rewrites kept records without the labels of entries "
        "whose ttl ran out (their expiry kept)",
        gc="emptied into a tombstone once no kept state is that commit, deleted an hour later",
        read_only="n/a (no user path); saves into a read-only prefix are refused before the commit point",
        scopes="n/a: scopes are views of a handle",
        delete_store="the slot after the newest commit takes the deletion record; the rest is "
        + _DELETES
        + "; a later create claims the slot after it for the key's next generation, whose journal lives apart "
        "(.journal/.journal/g<n>/...) and starts empty",
        export="archived up to the pinned commit (journal/), without the labels of entries whose ttl ran out "
        "(redacted as gc does, their expiry kept)",
        inventory="records",
        regex=rf"log/{_SEQ}\.json",
    ),
    ObjectKind(
        "checkpoint",
        Area.JOURNAL,
        "checkpoints/<seq:020>.json",
        Carries.LABELS | Carries.MESSAGES | Carries.PATHS | Carries.ATTRIBUTION,
        "every path of the state (inline index) and its whole transcript and proposals",
        purge="rewritten in place like a commit record; its parts are cut again",
        expiry="the next checkpoint after gc's expiry commit leaves the path out",
        gc="deleted once no kept record is built on it",
        read_only="n/a",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived up to the pinned commit, redacted like a commit record",
        inventory="checkpoints",
        regex=rf"checkpoints/{_SEQ}\.json",
    ),
    ObjectKind(
        "index_part",
        Area.JOURNAL,
        "parts/<sha[:2]>/<sha256>.json",
        Carries.LABELS | Carries.PATHS | Carries.ATTRIBUTION,
        "a sorted run of paths of a partitioned checkpoint",
        purge="the part holding the path is cut again with its entry redacted, and the checkpoint names the new part",
        expiry="the next checkpoint's parts leave the path out",
        gc="deleted once no kept checkpoint references it and it is older than the window",
        read_only="n/a",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived as read (immutable); one holding labels of an expired entry is archived cut again without "
        "them, as the redacted checkpoint names it",
        inventory="parts",
        regex=rf"parts/[0-9a-f]{{2}}/{_SHA}\.json",
    ),
    ObjectKind(
        "audit_segment",
        Area.JOURNAL,
        "audit/<seq:020>.jsonl",
        Carries.PATHS | Carries.ATTRIBUTION,
        "the paths of the audit events folded into checkpoint seq",
        purge="kept: the audit names the path, who purged it and why (op 'purge'); no content or label",
        expiry="kept (the audit of the expiry, op 'expired')",
        gc="deleted with the checkpoint that lists it",
        read_only="n/a",
        scopes="audit_tail of a scope filters by path",
        delete_store=_DELETES,
        export="archived",
        inventory="segments",
        regex=rf"audit/{_SEQ}\.jsonl",
    ),
    ObjectKind(
        "blob",
        Area.JOURNAL,
        "blobs/<sha[:2]>/<sha256>",
        Carries.CONTENT,
        "any path that held that content (content-addressed)",
        purge="deleted unless a live path holds the same bytes (a purge marker is written first)",
        expiry="deleted by the first gc after the ttl ran out, whatever the window, unless an entry whose ttl "
        "has not run out holds the content",
        gc="deleted once no kept state holds it and it is older than the window",
        read_only="n/a (immutable)",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived as read",
        inventory="blobs",
        regex=rf"blobs/[0-9a-f]{{2}}/{_SHA}",
    ),
    ObjectKind(
        "purge_marker",
        Area.JOURNAL,
        "purged/<sha[:2]>/<sha256>.json",
        Carries.PATHS | Carries.ATTRIBUTION,
        "a purged content's hash, or an index part a purge cut again: the path purged, who, when, why (no content)",
        purge="written before the purge deletes content, and for each index part it cuts again (a reader still "
        "naming the old part gets ContentPurged)",
        expiry="n/a",
        gc="deleted once no kept state names the content and it is older than the window",
        read_only="n/a",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived",
        inventory="markers",
        regex=rf"purged/[0-9a-f]{{2}}/{_SHA}\.json",
    ),
    ObjectKind(
        "search_segment",
        Area.JOURNAL,
        "search/<sha[:2]>/<sha256>.json",
        Carries.CONTENT | Carries.LABELS | Carries.PATHS,
        "the docs of the files (and messages) a save indexed: words, a snippet, labels",
        purge="every segment holding a doc of the purged path, or of content no live path holds, is deleted; "
        "the purge's commit merges the index into one segment without them (0175)",
        expiry="segments naming expired content are deleted by gc with the content's blobs",
        gc="deleted once no kept state names it and it is older than the window",
        read_only="n/a",
        scopes="search of a scope filters by prefix",
        delete_store=_DELETES,
        export="archived as read",
        inventory="search",
        regex=rf"search/[0-9a-f]{{2}}/{_SHA}\.json",
    ),
    ObjectKind(
        "settings",
        Area.JOURNAL,
        "config.json",
        Carries.NOTHING,
        "none (the gc window)",
        purge="n/a",
        expiry="n/a",
        gc="kept",
        read_only="n/a",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived",
        regex=r"config\.json",
    ),
    ObjectKind(
        "pending_expiry",
        Area.JOURNAL,
        "expiring/<token>.json",
        Carries.PATHS,
        "the paths one gc is deleting as expired, with their hashes",
        purge="n/a (no content)",
        expiry="written before gc's expiry commit, removed when upstream's copies are gone",
        gc="finished and removed by the next gc",
        read_only="n/a",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived",
        regex=r"expiring/[0-9a-f]{32}\.json",
    ),
    ObjectKind(
        "head",
        Area.JOURNAL,
        "head.json",
        Carries.NOTHING,
        "none (a hint: the newest commit and checkpoint, and sha256s of what an open reads with them)",
        purge="n/a",
        expiry="n/a",
        gc="pointed at the newest state before gc deletes",
        read_only="n/a",
        scopes="n/a",
        delete_store="replaced by the deletion record",
        export="archived, naming the pinned commit",
        regex=r"head\.json",
    ),
    ObjectKind(
        "messages",
        Area.STORE,
        "messages.json",
        Carries.MESSAGES,
        "the transcript (upstream's layout)",
        purge="rewritten by the commit of a message purge",
        expiry="n/a (messages have no ttl)",
        gc="n/a: the newest transcript",
        read_only="n/a: the transcript is not a path",
        scopes="not part of a scope (scope.session(name) is)",
        delete_store=_DELETES,
        export="archived as the pinned state projects it",
        regex=r"messages\.json",
    ),
    ObjectKind(
        "audit_log",
        Area.STORE,
        "audit/log.jsonl",
        Carries.PATHS | Carries.ATTRIBUTION,
        "every audited path (upstream's layout)",
        purge="kept: it names the path and the purge (op 'purge'), no content or label",
        expiry="kept",
        gc="rewritten from the journal's audit with checkpoints",
        read_only="n/a",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived",
        regex=r"audit/log\.jsonl",
    ),
    ObjectKind(
        "sidecar",
        Area.STORE,
        "meta/<quote(path)>.json",
        Carries.PATHS | Carries.ATTRIBUTION,
        "one path: its sha256, size, time, actor and reason (labels live in the journal only)",
        purge="deleted with the path",
        expiry="deleted by gc after its expiry commit",
        gc="n/a: the newest state's",
        read_only="follows its path",
        scopes="follows its path",
        delete_store=_DELETES,
        export="archived when the pinned state holds its path",
        regex=rf"meta/{_ENC}\.json",
    ),
    ObjectKind(
        "version_snapshot",
        Area.STORE,
        "versions/<quote(path)>/<time>_<sha256>[_<token>].txt",
        Carries.CONTENT | Carries.PATHS,
        "one path's past content (keep_versions=True)",
        purge="every snapshot with the purged content is deleted, of any path",
        expiry="a ttl write takes none; snapshots of expired content (older releases') are deleted by gc",
        gc="kept while a retention rule keeps it",
        read_only="follows its path",
        scopes="follows its path",
        delete_store=_DELETES,
        export="archived",
        regex=rf"versions/{_ENC}/[^/]+",
    ),
    ObjectKind(
        "old_journal",
        Area.STORE,
        "meta/.journal/...",
        Carries.CONTENT | Carries.LABELS | Carries.MESSAGES | Carries.PATHS | Carries.ATTRIBUTION,
        "the journal of the old layout (and, after a move, its fences and tombstones)",
        purge="read for the path's hashes; its blobs and records are reached like the journal's",
        expiry="as the journal's",
        gc="gc finishes a move: only fences and young tombstones stay",
        read_only="n/a",
        scopes="n/a",
        delete_store=_DELETES,
        export="archived as listed",
        regex=r"meta/\.journal/.+",
    ),
    ObjectKind(
        "record_segment",
        Area.STORE,
        "<log>/<ns:020>-<hex:12>.jsonl",
        Carries.MESSAGES | Carries.PATHS,
        "one record log (store.records, store.session, transcript archives of compact_transcript)",
        purge="a file like any other (purge of the segment); a record purge rewrites it; a segment "
        "compact_transcript wrote (ext transcript_archive) is rewritten by a transcript message purge holding "
        "an equal record, and a purge of an archived record redacts the equal records and transcript messages "
        "too; a session's segments are its own (a transcript purge leaves them alone, and the reverse)",
        expiry="n/a (segments are written without ttl)",
        gc="n/a: a file of the newest state (its blob and versions as a file's)",
        read_only="appends into a read-only prefix are refused",
        scopes="records(name) of a scope is under its prefix",
        delete_store=_DELETES,
        export="archived as a file",
        regex=r"(?:[^/]+/)+[0-9]{20}-[0-9a-f]{12}\.jsonl",
    ),
    ObjectKind(
        "file",
        Area.STORE,
        "<path>",
        Carries.CONTENT | Carries.PATHS,
        "one path's current content (upstream's layout)",
        purge="deleted",
        expiry="hidden at once, deleted by gc's expiry commit",
        gc="n/a: the newest state's",
        read_only="writes under a read-only prefix are refused (trusted handles too)",
        scopes="a scope reads and writes only under its prefix",
        delete_store=_DELETES,
        export="archived when the pinned state holds it",
        regex=r"(?!meta/|versions/|\.journal/)[^/].*",
    ),
    ObjectKind(
        "export_archive",
        Area.ELSEWHERE,
        "<dest>.tar.gz",
        Carries.CONTENT | Carries.LABELS | Carries.MESSAGES | Carries.PATHS | Carries.ATTRIBUTION,
        "the whole store at one commit",
        purge="not reached: an archive is the caller's copy; an export after a purge holds none of it",
        expiry="never holds it: export leaves out every object that holds expired content, and redacts the "
        "labels of expired entries from records, checkpoints and parts, gc or not",
        gc="not reached",
        read_only="settings travel inside it",
        scopes="n/a (a whole store)",
        delete_store="not reached (the caller's copy)",
        export="written by export(); import_store refuses a journal member no kind of this map names",
    ),
)


@dataclass(frozen=True)
class Place:
    """A place inside a structured object where content-derived data sits, and how purge reaches it."""

    name: str
    objects: tuple[str, ...]
    carries: Carries
    purge: str
    expiry: str


PLACES: tuple[Place, ...] = (
    Place(
        "file entry (delta.files / files / part files)",
        ("commit_record", "checkpoint", "index_part", "old_journal"),
        Carries.LABELS | Carries.PATHS | Carries.ATTRIBUTION,
        purge="the entry's extensions (labels, ttl, record count) become {purged: true} in every stored record, "
        "checkpoint and part, its actor and reason stay (history, log and audit agree on who wrote it); its "
        "sha256 names purged content (ContentPurged on read)",
        expiry="the entry leaves the state with gc's expiry commit; gc rewrites every stored record, checkpoint "
        "and part without the labels of entries whose ttl ran out (sha256, size and expires_at stay)",
    ),
    Place(
        "appended messages (delta.append) and the checkpoint transcript (messages)",
        ("commit_record", "checkpoint", "messages", "old_journal"),
        Carries.MESSAGES,
        purge="a message purge replaces every message of the same content (matched by content, not index) in "
        "every stored record and checkpoint, the handle's transcript, upstream's messages.json and the "
        "transcript's compaction archives; its audit event names the message by the sha256 of its encoding, "
        "so concurrent rewrite passes apply it too",
        expiry="n/a",
    ),
    Place(
        "proposals map (ext.proposals)",
        ("commit_record", "checkpoint", "old_journal"),
        Carries.CONTENT | Carries.LABELS | Carries.PATHS | Carries.ATTRIBUTION,
        purge="a proposal of the purged path loses its content and labels in every stored record and checkpoint",
        expiry="n/a (proposals have no ttl)",
    ),
    Place(
        "audit events (delta.audit, audit segments, audit/log.jsonl)",
        ("commit_record", "audit_segment", "audit_log"),
        Carries.PATHS | Carries.ATTRIBUTION,
        purge="kept, with op 'purge' for the purge itself: who purged what and why is what an auditor needs",
        expiry="kept (op 'expired')",
    ),
    Place(
        "commit info (info: actor, reason, wrote, deleted)",
        ("commit_record", "checkpoint"),
        Carries.PATHS | Carries.ATTRIBUTION,
        purge="kept: names paths and who committed, no content",
        expiry="kept",
    ),
    Place(
        "search docs (words, snippet, labels)",
        ("search_segment",),
        Carries.CONTENT | Carries.LABELS,
        purge="the segment is deleted; the purge's commit names one merged segment without the path's docs",
        expiry="the segment is deleted by gc",
    ),
)

_BY_AREA: dict[Area, tuple[ObjectKind, ...]] = {
    area: tuple(k for k in OBJECTS if k.area is area and k.regex) for area in Area
}


def classify_object(area: Area, name: str) -> ObjectKind:
    """The kind of the object `name` (relative to its area: the store prefix, or the journal without its
    ``meta/.journal/`` prefix), or `UnknownStoredObject`."""
    for kind in _BY_AREA[area]:
        if kind.matches(name):
            return kind
    raise UnknownStoredObject(f"No kind of the data map matches the {area.value} object {name!r}")


def journal_kind(name: str) -> ObjectKind | None:
    """The kind of a journal object by its name relative to the journal, or None for one this map does not
    know (a listing may hold objects of a newer version: readers leave them alone)."""
    try:
        return classify_object(Area.JOURNAL, name)
    except UnknownStoredObject:
        return None


_COLUMNS = ("purge", "expiry", "gc", "read_only", "scopes", "delete_store", "export")


def _carries(flags: Carries) -> str:
    names = [f.name.lower() for f in Carries if f.name and f.value and f in flags]
    return ", ".join(names) or "nothing"


def render_markdown() -> str:
    """The data map as docs/data-map.md shows it."""
    lines = [
        "# The data map: where data lives, and how every operation reaches it",
        "",
        "Rendered from `src/flyteplugins_memory/_rules/data_map.py` (a test keeps this page equal to it). Journal",
        'names are relative to the journal (docs/journal.md, "Objects"), store names to the store prefix.',
        "",
        "## Stored objects",
        "",
        "| kind | where | name | carries |",
        "| --- | --- | --- | --- |",
        *(f"| `{k.name}` | {k.area.value} | `{k.pattern}` | {_carries(k.carries)} |" for k in OBJECTS),
        "",
    ]
    for kind in OBJECTS:
        lines += [f"### `{kind.name}`: `{kind.pattern}` ({kind.area.value})", ""]
        lines.append(f"- carries: {_carries(kind.carries)}; concerns: {kind.concerns}")
        lines += [f"- {column.replace('_', ' ')}: {getattr(kind, column)}" for column in _COLUMNS]
        lines.append("")
    lines += ["## Places inside objects that hold content-derived data", ""]
    lines += ["| place | in | carries | purge | expiry |", "| --- | --- | --- | --- | --- |"]
    for place in PLACES:
        objects = ", ".join(f"`{o}`" for o in place.objects)
        lines.append(f"| {place.name} | {objects} | {_carries(place.carries)} | {place.purge} | {place.expiry} |")
    return "\n".join(lines) + "\n"
