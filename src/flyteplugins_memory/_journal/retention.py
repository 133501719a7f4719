"""Pure: which journal objects the committed states inside a retention window need, and which can go.

The states kept are every state committed inside the window, the one that was newest when the window
began (handles opened since may still stand on it) and, always, the newest. They need their commit
records, the checkpoints those records are relative to, the audit segments and index parts those
checkpoints list, and the blobs of every file they hold. Everything else older than the window goes,
orphan blobs and parts of saves that died included; what is younger stays (an in-flight save's are young).

Content whose every entry in the kept states was written with a ttl that has run out is needed by none
of them (no read path shows an expired entry), whatever the window: its blobs go now, however young
(`Needs.expired`), so expired content leaves storage at the first gc() after it expired.

A collected commit record whose slot is younger than `SLOT_GRACE` is emptied into a tombstone rather
than deleted: a handle opened within that time may still try to commit into the slot after it, and a
taken slot is what makes that attempt fail and rebase (handles older than that re-read the head before
committing; see `_journal.commit`). Tombstones are deleted once older than the grace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from .._rules.data_map import journal_kind
from .._rules.journal_objects import EMPTY_CHECKPOINT, Checkpoint, CommitRecord, FileEntry
from .._rules.layout import (
    JOURNAL_DIR,
    audit_segment_name,
    blob_name,
    checkpoint_name,
    log_name,
    part_name,
    search_segment_name,
)
from .._rules.markers import TOMBSTONE_MAX_BYTES, purge_marker_name
from .._rules.metadata import EXT_KEY as METADATA
from .._rules.search_index import referenced_segments
from .._rules.state import State
from .._rules.ttl import is_expired
from ..storage._fsspec import Listed

#: A collected slot younger than this stays taken (as a tombstone); see the module docstring.
SLOT_GRACE = 3600.0
#: A handle whose base was last known newest longer ago than this re-reads the head before committing.
#: Half of `SLOT_GRACE`, leaving room for clock skew between the handle's host, gc's and the server.
STALE_BASE_AFTER = SLOT_GRACE / 2
#: Inventory tables keyed by sequence number (the others by sha256).
_NUMBERED = frozenset({"records", "checkpoints", "segments"})


@dataclass(frozen=True)
class Inventory:
    """A journal's listing, sorted by kind: sequence numbers or hashes mapped to their listing entries."""

    records: dict[int, Listed] = field(default_factory=dict)
    checkpoints: dict[int, Listed] = field(default_factory=dict)
    segments: dict[int, Listed] = field(default_factory=dict)
    blobs: dict[str, Listed] = field(default_factory=dict)
    markers: dict[str, Listed] = field(default_factory=dict)
    parts: dict[str, Listed] = field(default_factory=dict)
    #: segments of the search index (`_rules.search_index`), by sha256
    search: dict[str, Listed] = field(default_factory=dict)

    @classmethod
    def of(cls, listing: Mapping[str, Listed]) -> Inventory:
        """Sort a journal listing by the data map's kinds (`_rules.data_map`); objects of kinds gc and purge do
        not walk (settings, the head, pending expiries), and names the map does not know, are left out."""
        inventory = cls()
        for name, found in listing.items():
            relative = name.removeprefix(JOURNAL_DIR + "/")
            kind = journal_kind(relative)
            if kind is None or not kind.inventory:
                continue
            stem = relative.rsplit("/", 1)[-1].split(".", 1)[0]
            table: dict = getattr(inventory, kind.inventory)
            table[int(stem) if kind.inventory in _NUMBERED else stem] = found
        return inventory

    def live_records(self, upto: int) -> list[int]:
        """Sequence numbers of commit records (not tombstones) up to `upto`, oldest first."""
        return sorted(s for s, f in self.records.items() if s <= upto and f.size >= TOMBSTONE_MAX_BYTES)


def kept_commits(inventory: Inventory, newest: int, cutoff: float) -> list[int]:
    """The commits whose states the window keeps: those committed at or after `cutoff`, the newest one
    before it, and the newest of all."""
    live = inventory.live_records(newest)
    before = [s for s in live if inventory.records[s].modified < cutoff]
    start = before[-1] if before else (live[0] if live else newest)
    kept = [s for s in live if s >= start]
    return kept if newest in kept or newest == 0 else [*kept, newest]


def needed_checkpoints(newest: State, records: Iterable[CommitRecord]) -> set[int]:
    """Checkpoints the kept states are built on (stored ones only)."""
    needed = {r.checkpoint for r in records if r.checkpoint_stored}
    if newest.checkpoint != EMPTY_CHECKPOINT:
        needed.add(newest.checkpoint.seq)
    return needed


@dataclass(frozen=True)
class Needs:
    """What the kept states need."""

    records: frozenset[int]
    checkpoints: frozenset[int]
    segments: frozenset[int]
    shas: frozenset[str]
    #: the parts of the kept checkpoints' file indexes (by sha256)
    parts: frozenset[str] = frozenset()
    #: the search segments the kept states' ``ext`` names (by sha256)
    search: frozenset[str] = frozenset()
    #: content only expired entries hold: (path, sha256) of each such entry (its blob goes, however young)
    expired: frozenset[tuple[str, str]] = frozenset()
    #: paths of expired entries that still carry labels (gc rewrites the records holding them, `_journal.redact`)
    labelled: frozenset[str] = frozenset()

    @property
    def expired_shas(self) -> frozenset[str]:
        return frozenset(sha for _, sha in self.expired)


def needs(
    newest: State,
    kept: Iterable[int],
    records: Mapping[int, CommitRecord],
    checkpoints: Mapping[int, Checkpoint],
    parts: Mapping[str, Mapping[str, FileEntry]],
    now: float | None = None,
) -> Needs:
    """What the kept states need, from their records, the checkpoints those are built on (`checkpoints`
    holds the newest state's), and those checkpoints' parts (`parts`, by sha256: all of them). With `now`,
    entries whose ttl ran out by then need nothing: their content is `Needs.expired` unless a live entry
    holds it too."""
    entries: list[tuple[str, FileEntry]] = [(p, r) for p, r in newest.files.changes.items() if r is not None]
    for record in records.values():
        entries += [(p, r) for p, r in record.delta.files.items() if r is not None]
    segments: set[int] = set(newest.checkpoint.audit_segments)
    part_shas: set[str] = set()
    for checkpoint in checkpoints.values():
        entries += list(checkpoint.files.items())
        part_shas |= {ref.sha256 for ref in checkpoint.parts}
        segments |= set(checkpoint.audit_segments)
    for sha in part_shas:
        entries += list(parts[sha].items())
    dead = {(p, r.sha256) for p, r in entries if now is not None and is_expired(r, now)}
    shas = {r.sha256 for _, r in entries if now is None or not is_expired(r, now)}
    expired = frozenset((p, sha) for p, sha in dead if sha not in shas)
    labelled = frozenset(p for p, r in entries if now is not None and METADATA in r.ext and is_expired(r, now))
    needed = needed_checkpoints(newest, records.values())
    exts = [newest.ext, *(r.ext for r in records.values()), *(c.ext for c in checkpoints.values())]
    search = frozenset(sha for ext in exts for sha in referenced_segments(ext))
    found = (frozenset(segments), frozenset(shas), frozenset(part_shas), search, expired, labelled)
    return Needs(frozenset(kept), frozenset(needed), *found)


def with_dropped(need: Needs, dropped: Iterable[CommitRecord], now: float) -> Needs:
    """`need`, its expired content widened by the entries of the records gc() drops now whose ttl ran out and
    whose content no kept state holds. A deletion after the expiry (a write over the path, a delete) leaves no
    kept entry to say the content expired, yet a search segment or a snapshot may still hold its text."""
    dead = {(p, r.sha256) for record in dropped for p, r in record.delta.files.items() if r and is_expired(r, now)}
    extra = frozenset((p, sha) for p, sha in dead if sha not in need.shas)
    return replace(need, expired=need.expired | extra) if extra else need


@dataclass(frozen=True)
class Removal:
    """What goes: names to delete, log slots to empty into tombstones, and the commits no longer readable."""

    delete: dict[str, int] = field(default_factory=dict)
    tombstone: dict[int, int] = field(default_factory=dict)
    commits: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.delete and not self.tombstone


def removal(inventory: Inventory, newest: int, need: Needs, cutoff: float, slot_cutoff: float) -> Removal:
    """Everything the kept states do not need that is older than `cutoff` (log slots: see `SLOT_GRACE`).
    Nothing at or after the newest commit is touched: it is either needed or newer than what we know."""
    delete: dict[str, int] = {}
    tombstone: dict[int, int] = {}
    oldest_kept = min(need.records, default=newest)
    for seq, found in inventory.records.items():
        if seq >= oldest_kept or seq in need.records:
            continue
        is_tombstone = found.size < TOMBSTONE_MAX_BYTES
        if found.modified < slot_cutoff:
            delete[log_name(seq)] = found.size
        elif not is_tombstone:
            tombstone[seq] = found.size
    for seq, found in inventory.checkpoints.items():
        if seq < newest and seq not in need.checkpoints and found.modified < cutoff:
            delete[checkpoint_name(seq)] = found.size
    for seq, found in inventory.segments.items():
        if seq < newest and seq not in need.segments and found.modified < cutoff:
            delete[audit_segment_name(seq)] = found.size
    expired = need.expired_shas
    for sha, found in inventory.blobs.items():
        if sha not in need.shas and (found.modified < cutoff or sha in expired):
            delete[blob_name(sha)] = found.size
    for sha, found in inventory.markers.items():
        if sha not in need.shas and found.modified < cutoff:
            delete[purge_marker_name(sha)] = found.size
    for sha, found in inventory.parts.items():
        if sha not in need.parts and found.modified < cutoff:
            delete[part_name(sha)] = found.size
    for sha, found in inventory.search.items():
        if sha not in need.search and found.modified < cutoff:
            delete[search_segment_name(sha)] = found.size
    gone = sorted(
        s
        for s, f in inventory.records.items()
        if (log_name(s) in delete or s in tombstone) and f.size >= TOMBSTONE_MAX_BYTES
    )
    return Removal(delete, tombstone, tuple(gone))


def kept_names(inventory: Inventory, need: Needs) -> list[str]:
    """The names of every object the kept states need that the inventory holds (to copy a journal)."""
    names = [log_name(s) for s in sorted(need.records) if s in inventory.records]
    names += [checkpoint_name(s) for s in sorted(need.checkpoints) if s in inventory.checkpoints]
    names += [audit_segment_name(s) for s in sorted(need.segments) if s in inventory.segments]
    names += [part_name(sha) for sha in sorted(need.parts) if sha in inventory.parts]
    names += [search_segment_name(sha) for sha in sorted(need.search) if sha in inventory.search]
    names += [blob_name(sha) for sha in sorted(need.shas) if sha in inventory.blobs]
    return names
