"""A path's versions: `store.history(path)`, what a version id names, and what a version holds.

The history is read from two places. The journal, within its retention window: the commits that changed
the path, newest first, at one commit record per version (`_journal.commit_log.read_path_changes` follows the
path's chain of links), each record's entry giving the version's sha256 and size. Beyond the window,
``versions/`` snapshots (written with ``keep_versions``, by ours or upstream): one listing of the path's
snapshot directory, and only when the journal shows fewer than `limit` versions. A snapshot's name
carries its time and sha256, the listing its size; who wrote it and why are in the audit trail only.

Version ids: ``c<seq>`` for the version commit `seq` made (the journal's own number, as `store.log()`
shows it); the snapshot's object name (``versions/<quoted path>/<ts>_<sha>[_<token>].txt``, as
`list_versions` shows it) for a snapshot. Neither form can be taken for the other, both stay valid as long
as what they name is stored, and a snapshot name is checked to belong to the path asked about.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .._rules.inventory import take_inventory
from .._rules.journal_objects import FileEntry
from .._rules.layout import classify, versions_dir_name
from .._rules.metadata import EXT_KEY, Scalar, from_ext
from .._rules.state import State
from .._rules.ttl import is_expired
from ..errors import (
    ContentPurged,
    CorruptStore,
    InvalidArgument,
    StateCollected,
    VersionExpired,
    VersionNotFound,
)
from . import gc as _gc
from . import versions as _versions
from .commit_log import Commit, PathChange, read_path_change, read_path_changes
from .contents import fetch_contents
from .journal_storage import JournalStorage
from .opening import latest_state

#: A journal version id: ``c`` and the commit's seq (no sign, no leading zeros: one id per version).
_JOURNAL_ID = re.compile(r"c(0|[1-9][0-9]{0,17})")
#: The sha256 field of a tombstone snapshot (ours write one per delete with ``keep_versions``).
_TOMBSTONE = "deleted"


@dataclass(frozen=True)
class HistoryEntry:
    """One version of a path, as `MemoryStore.history` lists it.

    Attributes:
        version_id: Names the version for `read_version`, `restore` and `diff`: ``c<seq>`` for a commit
            of the journal, the snapshot's name (``versions/...``) for a ``versions/`` snapshot.
        sha256: Its content's sha256 (``""`` for a deletion).
        time: When it was committed (a journal version: UTC ISO-8601 with milliseconds) or written (a
            snapshot: to the second).
        actor: Who wrote (or deleted) it: the write's own actor, as `get_meta` and the audit name it,
            also when one save committed writes of several actors (``""`` for a snapshot: its name does
            not say; see `audit_tail`).
        reason: Why it was written: the write's own reason (``""`` for a snapshot).
        size: Its content's size in bytes (0 for a deletion).
        deleted: Whether this version is the path's deletion.
        commit: The commit that made it (a journal version), else None.
        expired: Whether it was written with a ttl that has run out: listed (it happened) but its content
            is readable no more (`VersionExpired`).
    """

    version_id: str
    sha256: str
    time: str
    actor: str
    reason: str
    size: int
    deleted: bool
    commit: int | None = None
    expired: bool = False


@dataclass(frozen=True)
class Version:
    """What a version holds: its bytes (None for a deletion), the file metadata written with it, and its
    entry's other extensions (a ttl's ``expires_at``: a restore keeps it, so restored content still goes
    when it was due to)."""

    data: bytes | None
    metadata: Mapping[str, Scalar] = field(default_factory=dict)
    ext: Mapping[str, object] = field(default_factory=dict)


def journal_id(seq: int) -> str:
    """The version id of the version commit `seq` made."""
    return f"c{seq}"


def parse_version_id(path: str, version_id: object) -> int | str:
    """The commit seq (a journal id) or snapshot name (a ``versions/`` id) `version_id` names for `path`;
    `InvalidArgument` if it is not a str, `VersionNotFound` if it names no version of `path`."""
    if not isinstance(version_id, str):
        raise InvalidArgument(f"version_id must be a str, got {type(version_id).__name__}")
    if (match := _JOURNAL_ID.fullmatch(version_id)) is not None:
        return int(match.group(1))
    if version_id.startswith(versions_dir_name(path) + "/") and _versions.names_a_version(version_id):
        return version_id
    raise VersionNotFound(f"{version_id!r} is not a version id of {path!r} (use one that history() lists)")


async def read_history(remote: JournalStorage | None, known: State, path: str, limit: int) -> list[HistoryEntry]:
    """`path`'s newest `limit` versions, newest first: the journal's, then older ``versions/`` snapshots."""
    changes = await read_path_changes(remote, known, limit, path)
    if not changes and limit > 0:  # gc() collected the commit that wrote the live file: it is still a version
        changes = [live] if (live := await _live_change(remote, known, path)) is not None else []
    entries = [_from_change(change, path) for change in changes]
    if len(entries) < limit and remote is not None:
        entries += (await _older_snapshots(remote, path, changes))[: limit - len(entries)]
    return entries


async def _live_change(remote: JournalStorage | None, known: State, path: str) -> PathChange | None:
    """The live file at `path` as the version its (collected) commit made, from the newest state's entry:
    who and why from its sidecar fields, when from its ``updated_at``."""
    newest = known if remote is None else await latest_state(remote, known) or known
    await newest.files.need([path])
    entry = newest.files.get(path)
    seq = None if entry is None else entry.last_commit()
    if entry is None or seq is None:
        return None
    commit = Commit(seq, "", "", entry.updated_at, entry.updated_by, entry.reason, (path,), (), 0, False)
    return PathChange(commit, entry, entry.updated_by, entry.reason)


def _from_change(change: PathChange, path: str) -> HistoryEntry:
    commit, entry = change.commit, change.entry
    deleted = entry is None or path in commit.deleted
    sha, size = ("", 0) if deleted or entry is None else (entry.sha256, entry.bytes)
    who = (change.actor, change.reason) if change.actor or change.reason else (commit.actor, commit.reason)
    expired = not deleted and is_expired(entry, _gc.clock())
    return HistoryEntry(journal_id(commit.seq), sha, commit.time, *who, size, deleted, commit.seq, expired)


async def _older_snapshots(remote: JournalStorage, path: str, changes: list[PathChange]) -> list[HistoryEntry]:
    """The path's saved snapshots that are not journal versions, no newer than the oldest journal version,
    newest first (one listing). A journal version's own snapshot is that version again: one written with
    it has its sha256 and its second (the sidecar's ``updated_at``); a delete's tombstone is the newest
    one at or before the delete's commit."""
    listing = await remote.list(under=versions_dir_name(path))
    names = take_inventory(listing).versions.get(path, [])
    snapshots = [_from_snapshot(name, listing.get(name, 0)) for name in sorted(names, key=_versions.version_order)]
    snapshots.reverse()
    if not changes:
        return snapshots
    cut = _write_time(changes[-1])
    older = [s for s in snapshots if _when(s.time) <= cut]
    for change in changes:
        older = _without_own_snapshot(older, change)
    return older


def _without_own_snapshot(snapshots: list[HistoryEntry], change: PathChange) -> list[HistoryEntry]:
    """`snapshots` (newest first) without the one `change` wrote with its version, if listed."""
    when, sha = _write_time(change), _sha_of(change)
    same = (i for i, s in enumerate(snapshots) if (s.sha256 or _TOMBSTONE) == sha and _when(s.time) <= when)
    if change.entry is not None:  # a write's snapshot has exactly its second
        same = (i for i in same if _when(snapshots[i].time) == when)
    found = next(same, None)
    return snapshots if found is None else snapshots[:found] + snapshots[found + 1 :]


def _from_snapshot(name: str, size: int) -> HistoryEntry:
    stem = name.rsplit("/", 1)[-1].removesuffix(".txt")
    ts, _, rest = stem.partition("_")
    deleted = rest.startswith(_TOMBSTONE)
    sha = "" if deleted else rest.split("_", 1)[0]
    return HistoryEntry(name, sha, _snapshot_time(ts), "", "", 0 if deleted else size, deleted)


def _snapshot_time(ts: str) -> str:
    """ISO-8601 of a snapshot name's time (its colons were written as dashes)."""
    day, _, clock = ts.partition("T")
    return f"{day}T{clock.replace('-', ':')}" if clock else ts


def _write_time(change: PathChange) -> datetime:
    """When the version was written (its sidecar time, which its snapshot carries), else committed."""
    entry = change.entry
    return _when(entry.updated_at if entry is not None and entry.updated_at else change.commit.time)


def _sha_of(change: PathChange) -> str:
    return _TOMBSTONE if change.entry is None else change.entry.sha256


def _when(text: str) -> datetime:
    """A time to compare by, to the second (snapshots carry no finer); unreadable ones sort oldest."""
    try:
        when = datetime.fromisoformat(text).replace(microsecond=0)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def version_content(
    remote: JournalStorage | None, pending: Mapping[str, bytes], known: State, path: str, version_id: object
) -> Version:
    """What version `version_id` of `path` holds; `VersionNotFound` if it is unknown or no longer stored."""
    named = parse_version_id(path, version_id)
    if isinstance(named, str):
        await refuse_expired_snapshot(known, named)
        data = await _versions.read_version_bytes(remote, pending, named)
        return Version(None if _from_snapshot(named, 0).deleted else data)
    change = await read_path_change(remote, known, named, path)
    if change is None and (live := await _live_change(remote, known, path)) is not None and live.commit.seq == named:
        change = live
    if change is None:
        raise VersionNotFound(
            f"No version {version_id!r} of {path!r}: commit {named} did not change it, does not exist, "
            "or was collected by gc()"
        )
    if change.entry is None:
        return Version(None)
    entry = change.entry
    if is_expired(entry, _gc.clock()):
        raise VersionExpired(f"Version {version_id} of {path!r} was written with a ttl that has run out")
    kept = {k: v for k, v in entry.ext.items() if k != EXT_KEY}
    return Version(await _blob(remote, known, path, entry, str(version_id)), from_ext(entry.ext, path), kept)


async def refuse_expired_snapshot(known: State, name: str) -> None:
    """`VersionExpired` if the ``versions/`` snapshot `name` holds the content of its path's entry in
    `known` and that entry's ttl has run out (a snapshot an earlier release took of a ttl write: this one
    takes none; gc removes them with the expired file). Other names pass (the read decides)."""
    if not _versions.names_a_version(name):
        return
    path, sha = classify(name).path, _from_snapshot(name, 0).sha256
    await known.files.need([path])
    entry = known.files.get(path)
    if sha and entry is not None and entry.sha256 == sha and is_expired(entry, _gc.clock()):
        raise VersionExpired(f"Version snapshot {name!r} holds content whose ttl has run out")


async def _blob(remote: JournalStorage | None, known: State, path: str, entry: FileEntry, version_id: str) -> bytes:
    """The version's content from its blob, verified by its sha256."""
    try:
        return (await fetch_contents(remote, {path: entry}, known))[path]
    except ContentPurged as exc:
        raise VersionNotFound(f"Content of version {version_id} of {path!r} was purged: {exc}") from exc
    except (StateCollected, CorruptStore) as exc:
        raise VersionNotFound(
            f"Content of version {version_id} of {path!r} is no longer stored: collected by gc()"
        ) from exc
