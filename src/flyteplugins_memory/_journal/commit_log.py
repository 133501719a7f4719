"""`store.log()`: a store's commits, newest first, read from the journal at one record per commit.

Without a path: the newest record, then older ones (read `limit` at a time, concurrently). With a path:
its history is a chain: the newest state knows the commit that last wrote each live file, and each
commit's info links every path it changed to the commit that changed it before; so a live path costs one
read per commit shown too. A path that is not live now (deleted, or never written) has no such entry
point: the log walks back commit by commit until one changed it, then follows its chain.

The log ends where the journal's history does: at the first commit gc() collected, or at the store's
start; a store imported from upstream's layout starts with one ``import`` commit (its checkpoint 0).
Commits written by versions before commit info have empty fields and name no paths, so a path's chain
stops at them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._rules.commit_info import PURGED_KEY, attribution, deleted_paths
from .._rules.journal_objects import Checkpoint, CommitInfo, CommitRecord, FileEntry, Origin, parse
from .._rules.layout import checkpoint_name, log_name
from .._rules.markers import MARKER_MAX_BYTES, parse_marker
from .._rules.operations import Import
from .._rules.paths import is_reserved
from .._rules.state import State
from .journal_storage import JournalStorage
from .old_journal import old_view
from .opening import latest_state


@dataclass(frozen=True)
class Commit:
    """One commit of a store, as `MemoryStore.log` returns it.

    Attributes:
        seq: Its number in the store's log (0: the import of a store written without a journal).
        id: Its commit id (``""`` for the import).
        kind: ``"save"``, ``"create"`` or ``"import"``; ``""`` for a commit written by a version before
            commit info (then `time`, `actor` and `reason` are empty and `wrote`/`deleted` name nothing).
        time: When it committed, UTC ISO-8601 with milliseconds.
        actor: Who saved: ``save(actor=...)``, else the actors of its writes (sorted, comma-joined), else
            ``"agent"``.
        reason: Why: ``save(reason=...)``, else the reasons of its writes (sorted, ``"; "``-joined).
        wrote: Paths it wrote, sorted.
        deleted: Paths it deleted, sorted.
        appended: Messages it added to the transcript.
        rewrote: Whether it changed or removed committed messages (an edit in place, a redaction).
    """

    seq: int
    id: str
    kind: str
    time: str
    actor: str
    reason: str
    wrote: tuple[str, ...]
    deleted: tuple[str, ...]
    appended: int
    rewrote: bool

    @classmethod
    def of(cls, seq: int, commit_id: str, info: CommitInfo | None, wrote: list[str] | None = None) -> Commit:
        if info is None:
            return cls(seq, commit_id, "", "", "", "", tuple(sorted(wrote or ())), (), 0, False)
        written = tuple(sorted(wrote if wrote is not None else info.wrote))
        return cls(
            seq, commit_id, info.kind, info.time, info.actor, info.reason, written,
            tuple(sorted(info.deleted)), info.appended, info.rewrote,
        )  # fmt: skip


@dataclass(frozen=True)
class PathChange:
    """One commit that changed a path, what it left there (None: it deleted the path), and who made that
    change and why: the write's own actor and reason (a commit can hold writes of several actors; its
    `Commit.actor` summarises them all)."""

    commit: Commit
    entry: FileEntry | None
    actor: str = ""
    reason: str = ""


def _commit(record: CommitRecord) -> Commit:
    commits = record.delta.commits
    return Commit.of(record.seq, commits[-1] if commits else "", record.info)


def _import(checkpoint: Checkpoint) -> Commit:
    """The import commit: checkpoint 0 of a store imported from upstream's layout."""
    info = checkpoint.info or CommitInfo(kind=Import.kind, appended=len(checkpoint.messages))
    return Commit.of(0, "", info, wrote=list(checkpoint.files))


def _record(data: bytes | None, seq: int) -> CommitRecord | None:
    """The commit record in log slot `seq`, or None where the history ends (empty, or a marker)."""
    if data is None or (len(data) <= MARKER_MAX_BYTES and parse_marker(data) is not None):
        return None
    record = parse(CommitRecord, data, log_name(seq))
    return record if record.seq == seq else None


class _Reader:
    """Reads the log slots and checkpoint 0 of one journal (this one, or the old one of a store that has
    not moved yet)."""

    def __init__(self, journal: JournalStorage):
        self.journal = journal

    async def records(self, seqs: list[int]) -> list[CommitRecord | None]:
        found = await self.journal.read_many([log_name(s) for s in seqs])
        return [_record(found.get(log_name(s)), s) for s in seqs]

    async def record(self, seq: int) -> CommitRecord | None:
        return _record(await self.journal.read(log_name(seq)), seq)

    async def imported(self) -> Checkpoint | None:
        data = await self.journal.read(checkpoint_name(0))
        return None if data is None else parse(Checkpoint, data, checkpoint_name(0))


async def read_log(remote: JournalStorage | None, known: State, limit: int, path: str | None) -> list[Commit]:
    """The newest `limit` commits (those that changed `path`, if given), newest first."""
    if path is None:
        newest = await _newest_state(remote, known)
        if limit <= 0 or newest.seq == 0 or remote is None:
            return [_import(newest.checkpoint)] if newest.origin is Origin.IMPORT and limit > 0 else []
        return await _newest(_reader(remote, newest), newest.seq, limit)
    return [change.commit for change in await read_path_changes(remote, known, limit, path)]


async def read_path_changes(remote: JournalStorage | None, known: State, limit: int, path: str) -> list[PathChange]:
    """The newest `limit` commits that changed `path`, newest first, each with the entry it left there
    (read from its own record: no extra request)."""
    if is_reserved(path):
        return []  # never a file: no commit writes it as one
    newest = await _newest_state(remote, known)
    if limit <= 0 or newest.seq == 0 or remote is None:  # nothing committed (an import not saved yet)
        imported = newest.origin is Origin.IMPORT and path in newest.checkpoint.files
        return [_imported_change(newest.checkpoint, path)] if imported and limit > 0 else []
    reader = _reader(remote, newest)
    start = await _last_change(reader, newest, path)
    return [] if start is None else await _chain(reader, start, path, limit)


async def read_path_change(remote: JournalStorage | None, known: State, seq: int, path: str) -> PathChange | None:
    """Commit `seq` and what it left at `path`, if it changed `path` and the journal still holds it."""
    if remote is None or seq < 0 or is_reserved(path):
        return None
    found = await _commit_at(_reader(remote, known), seq, path)
    return None if found is None else found[0]


async def _newest_state(remote: JournalStorage | None, known: State) -> State:
    return known if remote is None else await latest_state(remote, known) or known


def _reader(remote: JournalStorage, newest: State) -> _Reader:
    return _Reader(old_view(remote) if newest.origin is Origin.OLD_JOURNAL else remote)


def _imported_change(checkpoint: Checkpoint, path: str) -> PathChange:
    entry = checkpoint.files.get(path)
    return PathChange(_import(checkpoint), entry, *attribution(checkpoint.info, path, entry))


async def last_change(remote: JournalStorage | None, known: State, path: str) -> int | None:
    """The commit that last changed `path` (wrote it, or deleted it) in the retained history, if any."""
    newest = await _newest_state(remote, known)
    if remote is None or newest.seq == 0 or is_reserved(path):
        return None
    found = await _last_change(_reader(remote, newest), newest, path)
    return found or None


async def _newest(reader: _Reader, seq: int, limit: int) -> list[Commit]:
    """Commits `seq`, `seq - 1`, ... until `limit` or the history ends."""
    out: list[Commit] = []
    oldest: CommitRecord | None = None
    while seq > 0 and len(out) < limit:
        batch = list(range(seq, max(0, seq - (limit - len(out))), -1))
        for record in await reader.records(batch):
            if record is None:
                return out
            out.append(_commit(record))
            oldest = record
        seq = batch[-1] - 1
    if len(out) < limit and oldest is not None and oldest.checkpoint == 0 and oldest.checkpoint_stored:
        checkpoint = await reader.imported()
        out += [_import(checkpoint)] if checkpoint is not None else []
    return out


#: Records read at once while looking back for the last commit that changed a path that is not live.
SCAN_BATCH = 16


async def _last_change(reader: _Reader, newest: State, path: str) -> int | None:
    """The commit that last changed `path`: known from the state for a live file; otherwise found by
    reading back (`_scan_back`)."""
    await newest.files.need([path])
    record = newest.files.get(path)
    if record is not None:
        return record.last_commit()
    return await _scan_back(reader, newest.seq, path)


async def _scan_back(reader: _Reader, seq: int, path: str) -> int | None:
    """The newest commit at or before `seq` that names `path`, read back `SCAN_BATCH` at a time (0: none
    did since the store's start, which may be an import; None: none in the retained history did)."""
    while seq > 0:
        batch = list(range(seq, max(0, seq - SCAN_BATCH), -1))
        for found in await reader.records(batch):
            if found is None:
                return None
            if _names(found.info, path):
                if not _only_purged(found.info, path):
                    return found.seq
                # a purge of a path deleted before it: one of its versions, unless the path never was one
                earlier = await _scan_back(reader, found.seq - 1, path)
                return found.seq if earlier != 0 else 0
        seq = batch[-1] - 1
    return 0


def _names(info: CommitInfo | None, path: str) -> bool:
    return info is not None and (path in info.wrote or path in info.deleted or _purged(info, path))


def _only_purged(info: CommitInfo | None, path: str) -> bool:
    return info is not None and path not in info.wrote and path not in info.deleted and _purged(info, path)


def _purged(info: CommitInfo, path: str) -> bool:
    """Whether `info` is of a purge of `path` deleted before it (`_rules.commit_info.PURGED_KEY`)."""
    found = info.ext.get(PURGED_KEY)
    return isinstance(found, list) and path in found


async def _chain(reader: _Reader, seq: int | None, path: str, limit: int) -> list[PathChange]:
    """The commits that changed `path`, from commit `seq` back along its links. A delete whose previous
    change is a delete too repeated it (a concurrent save deleted the path first): it changed nothing
    there, so it is passed over, not shown; one more read past `limit` tells whether the last one did."""
    out: list[PathChange] = []
    while seq is not None and (len(out) < limit or _deletes(out[-1], path)):
        found = await _commit_at(reader, seq, path)
        if found is None:
            break
        change, info = found
        if out and _deletes(out[-1], path) and _deletes(change, path):
            out.pop()  # the newer delete repeated this one
        elif len(out) >= limit:
            break
        out.append(change)
        if len(out) >= limit and not _deletes(change, path):
            break  # enough: no read for the link past the last one shown
        seq = await _previous(reader, change.commit.seq, info, path)
    return out


def _deletes(change: PathChange, path: str) -> bool:
    return path in change.commit.deleted


async def _commit_at(reader: _Reader, seq: int, path: str) -> tuple[PathChange, CommitInfo | None] | None:
    """Commit `seq` (with what it left at `path`) and its info if it changed `path`; None where the chain
    ends (collected by gc(), written before commit info, or the store's start). The import has no links."""
    if seq == 0:
        checkpoint = await reader.imported()
        imported = checkpoint is not None and path in checkpoint.files
        return (_imported_change(checkpoint, path), None) if checkpoint is not None and imported else None
    record = await reader.record(seq)
    if record is None or not _names(record.info, path):
        return None
    entry = record.delta.files.get(path)
    return PathChange(_commit(record), entry, *attribution(record.info, path, entry)), record.info


async def _previous(reader: _Reader, seq: int, info: CommitInfo | None, path: str) -> int | None:
    """The commit that changed `path` before commit `seq` (whose info is `info`): its link; for a change
    linked to nothing (a purge of a path deleted before it, or a commit of an older version), the delete
    the state it landed on names in its map of deleted paths (`_rules.commit_info.DELETED_EXT`: one read, of
    that state's record). Without such a map, a delete or purge reads back to the change before it (a
    deleted path was a file before, so its history goes on: the delete repeated a concurrent one that was
    not the state it landed on), and so does a write on a state that says the path was deleted."""
    if info is None:
        return None
    link = info.previous(path)
    if link is not None:
        return link
    landed = await reader.record(seq - 1) if seq > 1 else None
    known = deleted_paths(landed.ext, before=seq).get(path) if landed is not None else None
    if known is not None:
        return known
    gone = path in info.deleted or _purged(info, path)
    if gone or await _deleted_since_checkpoint(reader, landed, path):
        return await _scan_back(reader, seq - 1, path)
    return None


async def _deleted_since_checkpoint(reader: _Reader, record: CommitRecord | None, path: str) -> bool:
    """Whether the state of `record` says `path` was deleted since its checkpoint (its cumulative record
    maps the path to None), or the state its checkpoint holds says so of the checkpoint before (a delete
    folded into that checkpoint between the delete and the write): a write linked to nothing on top of it
    came after that delete, whichever base its handle had, so the path's history goes on past the write.
    For records written before the map of deleted paths; at most one more read, at the end of a chain."""
    if record is None:
        return False
    if path in record.delta.files:
        return record.delta.files[path] is None
    folded = record.checkpoint
    if not 0 < folded < record.seq or not record.checkpoint_stored:
        return False
    before = await reader.record(folded)
    return before is not None and path in before.delta.files and before.delta.files[path] is None
