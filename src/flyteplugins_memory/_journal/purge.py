"""purge(path): remove every stored copy of a path's past and present content and labels, now (redaction).

First a purge commit (`purge_change`, committed on its own by `Checkout.purge_commit`, kind ``purge``): the
path deleted, its proposals redacted (a draft discarded), and an audit event of op ``purge`` naming the
path, the content it held, who and why (whatever the handle's ``audit`` setting). Every purge commits,
even of a path deleted long ago: a stale handle's next save then finds its slot taken and rebases onto
the newest record, read from storage, so nothing it still holds in memory is committed again.

Then this module finds every content hash the path ever held that storage still knows of (every commit
record and checkpoint still stored, in this journal and in an old one a moved store left behind, and the
path's version snapshots), and removes, for each hash that no live path holds now: its journal blobs and
every version snapshot with that content (of any path). It rewrites in place every stored record and
checkpoint that holds the path's labels or its proposals' text (`_journal.redact`), cutting again the index parts
that held its entry; it removes every search index segment that names a content the path held, unless the
segment holds no row of the path and no doc of a content that leaves storage (then what matched is another
live path's doc of the same bytes: `_Sparing`). The purge's commit merged every segment of the index into
one without the path's docs (`_rules.operations.merges_whole_index`), so the newest state names no segment
the purge removes and a fresh handle's search reads no file again; a state older than the purge may name
one: it reads as "index data missing" and search indexes those files again (docs/decisions/0175). It
removes upstream's file and sidecar at the path. A purge marker per removed hash (and per replaced part) is
written first, so a handle that still names the content gets `ContentPurged`, not `CorruptStore`. Bytes that another
live path holds stay: they are that path's content.

Cost: it reads every commit record and checkpoint still stored, O(stored history); run gc() first to
bound that. Orphan blobs of saves that died before their commit point name no path; gc() removes them
once they are older than its window (``gc(window=timedelta(0))`` right after a purge removes them now).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._rules.codecs import utc_timestamp, write_event
from .._rules.commit_info import deleted_paths
from .._rules.index import CheckpointFiles
from .._rules.journal_objects import Checkpoint, CommitRecord, FileEntry
from .._rules.layout import (
    JOURNAL_DIR,
    VERSIONS_DIR,
    blob_name,
    search_segment_name,
    sidecar_name,
    versions_dir_name,
)
from .._rules.markers import Purged, encode_marker, purge_marker_name
from .._rules.offload import parse_off_loop
from .._rules.proposals import EXT_MAP as PROPOSALS
from .._rules.purge_count import counted
from .._rules.search_forms import decode_segment
from .._rules.state import State
from .._rules.writes import ChangeOptions
from . import gc as _gc
from .commit_log import last_change
from .journal_storage import JournalStorage
from .old_journal import old_view
from .redact import (
    Redaction,
    journal_objects,
    read_all,
    redact_proposal,
    retire_parts,
    rewrite_journal,
    rewriting,
)
from .retention import Inventory

if TYPE_CHECKING:
    from .._handle.working_copy import WorkingCopy

#: The audit op of a purge (upstream's fields, op ``purge``: an auditor tells a redaction from a delete).
PURGE_OP = "purge"


@dataclass(frozen=True)
class PurgeResult:
    """What one purge removed: objects and their bytes (records and checkpoints rewritten count too), the
    content hashes now gone from storage, the hashes kept because another live path holds them, and the
    purge's own commit (every purge commits: see the module docstring). `path` is the purged path; for
    ``purge_message`` ``"messages.json"``, for ``RecordLog.purge`` the segment that held the record."""

    path: str
    objects: int
    bytes: int
    shas: tuple[str, ...]
    kept_shas: tuple[str, ...]
    commit: int | None


async def purge_change(
    view: WorkingCopy, rel: str, actor: str, reason: str, remote: JournalStorage | None = None
) -> bool:
    """The change a purge commits, made on a clean working copy: `rel` deleted (no version tombstone, no
    delete event), its proposals redacted (a draft discarded: its text must go), and one audit event of op
    ``purge``. Returns whether `rel` was a live file.

    A path that is no file of the base is one of the path's versions only if the store held it: the base's
    map of deleted paths names its delete, or the retained history of `remote` does (read back; a purge
    reads all of it anyway). That delete is kept as the change's link, which makes the commit list the path
    as purged (`_rules.commit_info.purged_deleted`); a purge of a path never held is in the audit only."""
    await view.need([rel])
    current = view.entry(rel)
    options = ChangeOptions(actor, reason, None, False, False)
    deleted = await view.delete(rel, options)
    if not deleted:  # a file whose ttl ran out reads as missing, but its entry is there until gc deletes it
        await view.expire(rel, options, _gc.clock())
    if current is None and (held := await _held_before(view, rel, remote)) is not None:
        view.changes.links[rel] = held
    now = utc_timestamp()
    old_sha = current.sha256 if current is not None and deleted else ""
    event = write_event(
        op=PURGE_OP, path=rel, old_sha=old_sha, new_sha="", actor=actor, reason=reason, ts=now, version_file=""
    )
    view.changes.audit.append(event)
    counted(view)  # handles that hold a checkpoint this purge rewrites read it again (`_rules.purge_count`)
    found = view.base.ext.get(PROPOSALS)
    for proposal_id, raw in (found if isinstance(found, dict) else {}).items():
        if not isinstance(raw, dict) or raw.get("path") != rel:
            continue
        redacted: dict[str, Any] = redact_proposal(raw)
        if raw.get("status") == "draft":
            decision = {"decided_at": now, "decided_by": actor, "decision_reason": reason or "purged"}
            redacted = {**redacted, "status": "discarded", **decision}
        if redacted != raw:
            view.changes.entries[(PROPOSALS, proposal_id)] = redacted
    return deleted


async def _held_before(view: WorkingCopy, rel: str, remote: JournalStorage | None) -> int | None:
    """The commit that deleted `rel` (no file of the view's base), if the store held it: from the base's map
    of deleted paths, else read back through the retained history; None if no retained commit changed it."""
    known = deleted_paths(view.base.ext).get(rel)
    return known if known is not None else await last_change(remote, view.base, rel)


async def purge_stored(
    remote: JournalStorage, rel: str, newest: State, *, actor: str, reason: str, commit: int | None
) -> PurgeResult:
    """Remove every stored copy of `rel`'s content that no live path of `newest` holds, and its labels
    and proposals' text from every stored record and checkpoint (`_journal.redact`). Runs after the purge commit."""
    async with rewriting(remote):
        return await _purge_stored(remote, rel, newest, actor=actor, reason=reason, commit=commit)


async def _purge_stored(
    remote: JournalStorage, rel: str, newest: State, *, actor: str, reason: str, commit: int | None
) -> PurgeResult:
    newest.check_can_write("purge", remote.uri)
    journals = [remote, old_view(remote)] if remote.journal_moved else [remote]
    held: set[str] = set()
    inventories: list[Inventory] = []
    read: list[list[tuple[str, bytes]]] = []
    for journal in journals:
        hashes, inventory, stored = await _hashes_in_journal(journal, rel)
        held |= hashes
        inventories.append(inventory)
        read.append(stored)
    versions = await remote.list(under=VERSIONS_DIR)
    own_versions = {n for n in versions if n.startswith(versions_dir_name(rel) + "/")}
    held |= {sha for n in own_versions if (sha := _version_sha(n))}
    await newest.files.need_all()  # O(files), like the rest of a purge
    live = {r.sha256 for p, r in newest.files.items() if p != rel}
    doomed = {n: versions[n] for n in own_versions}
    if rel not in newest.files:
        doomed.update(await _sizes(remote, [rel, sidecar_name(rel)]))
    core = _Purge(remote, journals, inventories, rel, actor, reason, read, _Sparing(rel))
    objects, size, gone = await core.run(held, live, Redaction(path=rel, actor=actor, reason=reason), versions, doomed)
    return PurgeResult(rel, objects, size, tuple(gone), tuple(sorted(held & live)), commit)


async def purge_contents(
    remote: JournalStorage,
    newest: State,
    shas: set[str],
    redaction: Redaction,
    *,
    path: str,
    actor: str,
    reason: str,
    commit: int | None,
) -> PurgeResult:
    """A message-level purge's removal (`_api.upkeep.message_purge`), after its commit: every stored copy of the
    contents `shas` that no live path of `newest` holds (blobs, version snapshots, search segments), and
    what `redaction` names in every stored record and checkpoint. `path` is what the markers name."""
    newest.check_can_write("purge", remote.uri)
    journals = [remote, old_view(remote)] if remote.journal_moved else [remote]
    async with rewriting(remote):
        inventories = [Inventory.of(await journal.stat(JOURNAL_DIR)) for journal in journals]
        await newest.files.need_all()
        live = {r.sha256 for r in newest.files.values()}
        versions = await remote.list(under=VERSIONS_DIR) if shas else {}
        core = _Purge(remote, journals, inventories, path, actor, reason)
        objects, size, gone = await core.run(shas, live, redaction, versions, {})
    return PurgeResult(path, objects, size, tuple(gone), tuple(sorted(shas & live)), commit)


@dataclass
class _Purge:
    """What every purge does once it knows the contents to remove: markers first, then the rewrite of
    records and checkpoints, then the deletes (snapshots, blobs, search segments)."""

    remote: JournalStorage
    journals: list[JournalStorage]
    inventories: list[Inventory]
    path: str
    actor: str
    reason: str
    #: each journal's records and checkpoints as already read (None: read them again)
    read: list[list[tuple[str, bytes]]] | None = None
    #: which segments stay although they name a content of the path (None: none)
    sparing: _Sparing | None = None

    async def run(
        self, held: set[str], live: set[str], redaction: Redaction, versions: dict[str, int], doomed: dict[str, int]
    ) -> tuple[int, int, list[str]]:
        gone = sorted(held - live)
        at = utc_timestamp()
        marker = {
            purge_marker_name(s): encode_marker(
                Purged(sha256=s, path=self.path, at=at, actor=self.actor, reason=self.reason)
            )
            for s in gone
        }
        await self.remote.write_many(marker)  # first: readers that miss the content learn why
        objects, size = 0, 0
        read = self.read or [None] * len(self.journals)
        for journal, inventory, stored in zip(self.journals, self.inventories, read, strict=True):
            rewritten = await rewrite_journal(journal, inventory, redaction, stored=stored)
            retired, retired_bytes = await retire_parts(journal, rewritten, self.path, self.actor, self.reason)
            objects, size = objects + rewritten.objects + retired, size + rewritten.bytes + retired_bytes
        doomed = {**doomed, **{n: versions[n] for n in versions if _version_sha(n) in gone}}
        more, extra = await _remove(self.remote, doomed)
        objects, size = objects + more, size + extra
        for journal, inventory in zip(self.journals, self.inventories, strict=True):
            stored = {blob_name(s): f.size for s, f in inventory.blobs.items()}
            indexed = {search_segment_name(s): f.size for s, f in inventory.search.items()}
            copies = {n: stored[n] for s in gone if (n := blob_name(s)) in stored}
            # a segment holding a doc of any of these contents: the doc carries its path's labels too
            spares = self.sparing.spares(gone) if self.sparing is not None else None
            copies.update(await _segments_holding(journal, indexed, sorted(held), spares))
            more, extra = await _remove(journal, copies)
            objects, size = objects + more, size + extra
        return objects, size, gone


async def _hashes_in_journal(journal: JournalStorage, rel: str) -> tuple[set[str], Inventory, list[tuple[str, bytes]]]:
    """Every hash `rel` has in a commit record or checkpoint this journal still stores, its inventory, and
    those objects as read (the rewrite uses them: `_journal.redact.rewrite_journal`)."""
    inventory = Inventory.of(await journal.stat(JOURNAL_DIR))
    stored = await read_all(journal, journal_objects(inventory))
    found: set[str] = set()
    for name, data in stored:
        model = CommitRecord if name.startswith(f"{JOURNAL_DIR}/log/") else Checkpoint
        try:
            parsed = await parse_off_loop(model, data, name)
        except ValueError:
            continue  # a marker or a damaged object names no content of ours
        if isinstance(parsed, CommitRecord):
            record = parsed.delta.files.get(rel)
        else:
            record = await _in_checkpoint(journal, parsed, rel)
        if record is not None:
            found.add(record.sha256)
    return found, inventory, stored


async def _in_checkpoint(journal: JournalStorage, checkpoint: Checkpoint, rel: str) -> FileEntry | None:
    """`rel`'s entry in a checkpoint: inline, or in the one part whose range holds it (read and verified)."""
    index = CheckpointFiles(checkpoint, journal)
    if (i := index.index_of(rel)) is not None:
        await index.load([i])
    return index.lookup(rel)


async def _segments_holding(
    journal: JournalStorage, segments: dict[str, int], shas: list[str], spares: Callable[[str, bytes], bool] | None
) -> dict[str, int]:
    """Those of the search index `segments` (name: size) that name any of `shas`: a doc of that content,
    but those `spares` keeps. A plain byte search: a sha that only shows up as a word of some text removes a
    segment too, which costs that segment's files a read at the next search, never a wrong answer."""
    needles = [s.encode() for s in shas]
    if not needles:
        return {}
    found = await read_all(journal, sorted(segments))
    return {
        name: segments[name]
        for name, data in found
        if any(n in data for n in needles) and not (spares is not None and spares(name, data))
    }


@dataclass(frozen=True)
class _Sparing:
    """A file purge's rule for a segment that matches a content of the path: it stays if it holds no row of
    the path (a doc or a tombstone: a doc carries its path's labels) and no doc of a content that leaves
    storage. What matched is then the doc of another path whose bytes a live path still holds (its text is
    that content's, its labels its own path's). The purge's commit merged every segment into one without
    the path's docs (`_rules.operations.merges_whole_index`), so the index it leaves names a segment that
    stays, even when another live path holds the same bytes: a fresh handle's search finds every segment
    (docs/decisions/0175)."""

    path: str

    def spares(self, gone: list[str]) -> Callable[[str, bytes], bool]:
        purged = set(gone)

        def spared(_name: str, data: bytes) -> bool:
            """Whether the segment `data` stays (one that cannot be read does not)."""
            try:
                segment = decode_segment(data)
                return self.path not in segment.paths and not any(
                    (doc := segment.doc(i)) is not None and doc.sha256 in purged for i in range(len(segment.paths))
                )
            except ValueError:  # DamagedSegment too
                return False

        return spared


def _version_sha(name: str) -> str | None:
    """The content hash in a version snapshot's name (``<ts>_<sha>[_<suffix>].txt``), if it has one."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".txt")
    return next(
        (part for part in stem.split("_") if len(part) == 64 and all(c in "0123456789abcdef" for c in part)), None
    )


async def _sizes(remote: JournalStorage, names: list[str]) -> dict[str, int]:
    """Sizes of those of `names` that exist (one listing each; no content is read)."""
    sizes: dict[str, int] = {}
    for name in names:
        sizes.update({n: f.size for n, f in (await remote.stat(under=name)).items() if n == name})
    return sizes


async def _remove(remote: JournalStorage, names: dict[str, int]) -> tuple[int, int]:
    await remote.remove_all(sorted(names))
    return len(names), sum(names.values())
