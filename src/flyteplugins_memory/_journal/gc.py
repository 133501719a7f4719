"""gc(): remove the journal objects no committed state inside the retention window needs.

One run: read the newest state (head hint and a probe), list the journal (small after gc: the log holds
the window, the blobs the live files), read the window's commit records and the checkpoints they are
built on, then delete, oldest kinds first: commit records (or empty them into tombstones, see
`_journal.retention`), checkpoints, audit segments, blobs, purge markers. Before deleting anything the head hint
is pointed at the newest state, so an open never needs a removed record. Its cost is O(what it removes +
what the window holds), never O(history). The old journal a moved store left behind is cleaned too.

The window comes from the call, else the store's setting (``config.json`` in the journal, written by
`set_gc_window`), else `DEFAULT_WINDOW`. The store's retention policy (`_rules.retention_policy`) extends it to
``max_age`` when that is longer, and decides which ``versions/`` snapshots go (`_journal.snapshot_retention`);
a dry run plans the same and removes nothing. Saves run gc opportunistically after each checkpoint, best
effort, and only when the log shows something old enough to remove.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta

from .._rules.journal_objects import CommitRecord, Origin, encode
from .._rules.layout import HEAD_NAME, JOURNAL_DIR, blob_name, log_name, search_segment_name, sidecar_name
from .._rules.markers import CONFIG_NAME, TOMBSTONE, TOMBSTONE_MAX_BYTES, encode_marker, parse_config
from .._rules.offload import parse_off_loop
from .._rules.open_hint import head_for
from .._rules.retention_policy import journal_span, persisted_policy
from .._rules.search_forms import decode_segment
from .._rules.state import State
from .._rules.ttl import EXPIRED_REASON, is_expired
from ..errors import MemoryStoreError, StorageError
from .checkpoints import read_all_parts
from .journal_storage import JournalStorage
from .log_reads import LOG_DIR, read_checkpoint
from .opening import latest_state
from .redact import Redaction, retire_parts, rewrite_journal, rewriting
from .relocate import clean_old_journal
from .retention import SLOT_GRACE, Inventory, Needs, Removal, kept_commits, needs, removal, with_dropped
from .snapshot_retention import Expired, expired_snapshots, snapshot_removal

logger = logging.getLogger(__name__)

#: Keep what the commits of the last 24 hours need, unless the call or the store says otherwise.
DEFAULT_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class GcResult:
    """What one gc() removed (or, with ``dry_run``, would remove): objects deleted or emptied, the bytes
    they held, and the commits (sequence numbers) whose states can no longer be opened. `versions` counts
    the ``versions/`` snapshots among `objects`; `expired` names the files whose ttl ran out and that this
    gc deleted (an audited commit, op ``expired``)."""

    objects: int = 0
    bytes: int = 0
    commits: tuple[int, ...] = ()
    versions: int = 0
    expired: tuple[str, ...] = ()
    dry_run: bool = False


def clock() -> float:
    """Now, in seconds since the epoch (storage timestamps are compared with it); tests move it."""
    return time.time()


def seconds(window: timedelta | float) -> float:
    value = window.total_seconds() if isinstance(window, timedelta) else float(window)
    if value < 0:
        raise ValueError(f"A retention window cannot be negative, got {window!r}")
    return value


async def configured_window(remote: JournalStorage) -> float:
    """The store's retention window in seconds (its setting, else the default)."""
    config = parse_config(await remote.read(CONFIG_NAME))
    return DEFAULT_WINDOW.total_seconds() if config.gc_window_seconds is None else config.gc_window_seconds


async def set_window(remote: JournalStorage, window: timedelta | None) -> None:
    """Store the retention window every handle of this store uses (None: back to the default)."""
    config = parse_config(await remote.read(CONFIG_NAME))
    updated = config.with_window(None if window is None else seconds(window))
    await remote.write_many({CONFIG_NAME: encode_marker(updated)})


async def collect(
    remote: JournalStorage,
    window: timedelta | None = None,
    *,
    newest: State | None = None,
    dry_run: bool = False,
    snapshots: bool = True,
    expired: Expired | None = None,
) -> GcResult:
    """Remove what no state committed inside the window (nor the newest) needs, and the ``versions/``
    snapshots the retention policy lets go (unless not `snapshots`); with `dry_run`, only say what.
    `expired`: what a dry run's expiry pass would have done under ``versions/`` by now (a real one did it)."""
    span = seconds(window) if window is not None else await configured_window(remote)
    newest = await latest_state(remote, newest)
    if newest is None or newest.seq == 0 or newest.origin is not Origin.JOURNAL:
        return await _with_old(remote, GcResult(dry_run=dry_run), dry_run)  # nothing here yet (old layout)
    newest.check_can_write("gc", remote.uri)
    now, policy = clock(), persisted_policy(newest.ext)
    inventory = Inventory.of(await remote.stat(JOURNAL_DIR))
    cutoff = now - journal_span(span, policy)
    plan, need = await _plan(remote, newest, inventory, cutoff, now - SLOT_GRACE, now)
    versions = await snapshot_removal(remote, newest, policy, now, now - span, expired) if snapshots else {}
    if snapshots and (need.expired or need.labelled):  # what else holds expired data: snapshots, search
        done = expired.removed if expired is not None else frozenset()  # a dry run's expiry pass counted them
        versions.update({n: size for n, size in (await _expired_snapshots(remote, need)).items() if n not in done})
        segments = await _segments_holding(remote, inventory, need.expired_shas, need.labelled)
        plan = replace(plan, delete={**plan.delete, **segments})
    if not dry_run:
        await _remove(remote, newest, plan, versions)
        if snapshots and need.labelled:
            await _scrub_labels(remote, need.labelled, now)
    return await _with_old(remote, _result(plan, versions, dry_run), dry_run)


async def _scrub_labels(remote: JournalStorage, paths: frozenset[str], now: float) -> None:
    """Rewrite the stored records and checkpoints (and parts) holding labels of entries of `paths` whose
    ttl ran out by `now`, without those labels (in place, as purge does: `_journal.redact`); their expiry stays."""
    async with rewriting(remote):  # not while a purge in this process rewrites them (it would undo ours)
        inventory = Inventory.of(await remote.stat(JOURNAL_DIR))
        done = await rewrite_journal(remote, inventory, Redaction(expired=paths, now=now))
        await retire_parts(remote, done, min(paths), "gc", EXPIRED_REASON)


async def _plan(
    remote: JournalStorage, newest: State, inventory: Inventory, cutoff: float, slot_cutoff: float, now: float
) -> tuple[Removal, Needs]:
    kept = kept_commits(inventory, newest.seq, cutoff)
    # the newest record too (a pinned open of the newest commit is built from it, not from a later
    # checkpoint), and commits that landed since we read the newest: their blobs are not orphans
    landed = inventory.live_records(max(inventory.records, default=0))
    records = await _read_records(remote, kept + [s for s in landed if s > newest.seq])
    wanted = {r.checkpoint for r in records.values() if r.checkpoint_stored} - {newest.checkpoint.seq}
    checkpoints = {seq: await read_checkpoint(remote, seq) for seq in sorted(wanted)}
    checkpoints[newest.checkpoint.seq] = newest.checkpoint
    parts = await read_all_parts(remote, checkpoints.values())  # O(files): the blobs they name are kept
    need = needs(newest, kept, records, checkpoints, parts, now)
    oldest_kept = min(need.records, default=newest.seq)
    dropped = [s for s, found in inventory.records.items() if s < oldest_kept and found.size >= TOMBSTONE_MAX_BYTES]
    if dropped:  # read once: the slots are emptied or deleted below
        need = with_dropped(need, await _dropped_records(remote, dropped), now)
    return removal(inventory, newest.seq, need, cutoff, slot_cutoff), need


@dataclass(frozen=True)
class ExpiredNow:
    """What holds expired data now (`expired_now`)."""

    #: the objects that hold expired content: leave them out
    objects: frozenset[str] = frozenset()
    #: the labels of expired entries that records, checkpoints and parts still hold: redact them
    #: (None: none hold any)
    labels: Redaction | None = None


async def expired_now(remote: JournalStorage) -> ExpiredNow:
    """What of the store at `remote` holds expired data now, whether or not gc() has run (read only: what
    an export leaves out or redacts): the objects holding content whose every stored entry has expired
    (its blobs, ``versions/`` snapshots and search index segments, and upstream's copy, file and sidecar,
    of each path whose newest entry has expired), and the labels of expired entries, as gc() scrubs them.
    Reads every stored record, checkpoint and part."""
    newest = await latest_state(remote)
    if newest is None or newest.seq == 0 or newest.origin is not Origin.JOURNAL:
        return ExpiredNow()
    now = clock()
    inventory = Inventory.of(await remote.stat(JOURNAL_DIR))
    _, need = await _plan(remote, newest, inventory, float("-inf"), float("-inf"), now)
    await newest.files.need_all()
    gone = {p for p, entry in newest.files.items() if is_expired(entry, now)}
    labels = Redaction(expired=need.labelled, now=now) if need.labelled else None
    if not need.expired and not gone and not need.labelled:
        return ExpiredNow(labels=labels)
    names = {blob_name(sha) for sha in need.expired_shas if sha in inventory.blobs}
    names |= set(await _expired_snapshots(remote, need))
    names |= set(await _segments_holding(remote, inventory, need.expired_shas, need.labelled))
    names |= {name for path in gone for name in (path, sidecar_name(path))}
    return ExpiredNow(frozenset(names), labels)


async def _segments_holding(
    remote: JournalStorage, inventory: Inventory, shas: frozenset[str], labelled: frozenset[str] = frozenset()
) -> dict[str, int]:
    """The search index segments holding a doc of any of `shas` (a byte search for the sha256, as purge
    does: a state whose segment is gone reads as "index data missing" and search indexes files again), or
    the labels of a doc of a path of `labelled` (an expired entry's labels, whose content a live path may
    still hold: the doc of that path carries them)."""
    names = {search_segment_name(sha): found.size for sha, found in inventory.search.items()}
    needles = [sha.encode() for sha in shas]
    found: dict[str, int] = {}
    ordered = sorted(names)
    for start in range(0, len(ordered), 64):
        read = await remote.read_many(ordered[start : start + 64])
        found.update({n: names[n] for n, data in read.items() if any(x in data for x in needles)})
        found.update({n: names[n] for n, data in read.items() if labelled and _labels_of(data, labelled)})
    return found


def _labels_of(data: bytes, paths: frozenset[str]) -> bool:
    """Whether search segment `data` (JSON or binary) holds the labels of a doc of one of `paths` (a segment
    that does not parse: yes, to be safe; search indexes its files again)."""
    try:
        segment = decode_segment(data)
        return any(
            (doc := segment.doc(i)) is not None and bool(doc.metadata)
            for i, path in enumerate(segment.paths)
            if path in paths
        )
    except ValueError:  # DamagedSegment too
        return True


async def _expired_snapshots(remote: JournalStorage, need: Needs) -> dict[str, int]:
    """The ``versions/`` snapshots of content only expired entries hold (one listing per path and sha)."""
    found: dict[str, int] = {}
    for path, sha in sorted(need.expired):
        found.update(await expired_snapshots(remote, {path: sha}))
    return found


async def _remove(remote: JournalStorage, newest: State, plan: Removal, versions: dict[str, int]) -> None:
    """Journal objects first (head hint, then tombstones, then deletions in `_deletion_steps` order), then
    snapshots: a crash anywhere leaves what a live state needs, and a second gc finishes the job."""
    if not plan.empty:
        await remote.write_many({HEAD_NAME: encode(head_for(newest.seq, newest.checkpoint))})
        await remote.write_many({log_name(s): TOMBSTONE for s in plan.tombstone})
        for step in _deletion_steps(plan.delete):
            await remote.remove_all(step)
    if versions:
        await remote.remove_all(sorted(versions))


def _result(plan: Removal, versions: dict[str, int], dry_run: bool) -> GcResult:
    objects = len(plan.delete) + len(plan.tombstone) + len(versions)
    size = sum(plan.delete.values()) + sum(plan.tombstone.values()) + sum(versions.values())
    return GcResult(objects, size, plan.commits, len(versions), dry_run=dry_run)


def _deletion_steps(names: Iterable[str]) -> list[list[str]]:
    """Records before the checkpoints they are built on, those before segments and blobs: a reader that
    still finds a record finds what it needs, or learns that the commit was collected."""
    kinds = ("log", "checkpoints", "parts", "search", "audit", "blobs", "purged")
    steps: list[list[str]] = [[] for _ in range(len(kinds) + 1)]
    for name in sorted(names):
        kind = name.removeprefix(JOURNAL_DIR + "/").split("/", 1)[0]
        steps[kinds.index(kind) if kind in kinds else len(kinds)].append(name)
    return [step for step in steps if step]


async def _read_records(remote: JournalStorage, seqs: list[int]) -> dict[int, CommitRecord]:
    found = await remote.read_many([log_name(s) for s in seqs])
    records = {}
    for seq in seqs:
        data = found.get(log_name(seq))
        if data is not None:
            records[seq] = await parse_off_loop(CommitRecord, data, log_name(seq))
    return records


async def _dropped_records(remote: JournalStorage, seqs: list[int]) -> list[CommitRecord]:
    """The commit records of log slots gc() drops, as far as they read as commits: a slot that holds something
    else, or cannot be read, holds no entry gc() could learn an expiry from (logged; nothing is less safe than
    before this look)."""
    try:
        found = await remote.read_many([log_name(s) for s in seqs])
    except StorageError as exc:
        logger.warning("gc could not read the commits it drops for expired content: %s", exc)
        return []
    records = []
    for name, data in found.items():
        try:
            records.append(await parse_off_loop(CommitRecord, data, name))
        except MemoryStoreError:
            continue
    return records


async def _with_old(remote: JournalStorage, result: GcResult, dry_run: bool = False) -> GcResult:
    if not remote.journal_moved or dry_run:
        return result
    objects, size = await clean_old_journal(remote, clock())
    return replace(result, objects=result.objects + objects, bytes=result.bytes + size)


async def collection_due(remote: JournalStorage, newest: State) -> float | None:
    """The retention window (seconds) if the log holds a commit old enough for gc() to remove after a
    checkpoint of `newest`, else None; reads only (the setting and the log's listing, at once), so it may
    run beside the head's write. None too if it cannot tell (logged: the next checkpoint asks again)."""
    try:
        span, listed = await asyncio.gather(configured_window(remote), remote.stat(LOG_DIR))
        log = Inventory.of(listed)
        now = clock()
        oldest_kept = kept_commits(log, newest.seq, now - span)[0]
        removable = [
            s
            for s, found in log.records.items()
            if s < oldest_kept and (found.size >= TOMBSTONE_MAX_BYTES or found.modified < now - SLOT_GRACE)
        ]
    except (MemoryStoreError, OSError) as exc:
        logger.warning("gc() after a checkpoint of %s failed (the next one retries): %s", remote.uri, exc)
        return None
    return span if removable else None


async def collect_quietly(remote: JournalStorage, newest: State, span: float | None = None) -> None:
    """gc() after a checkpoint, best effort: only if the log holds a commit old enough to go (`span`: what
    `collection_due` said, else it is asked here)."""
    if span is None and (span := await collection_due(remote, newest)) is None:
        return
    try:
        await collect(remote, timedelta(seconds=span), newest=newest, snapshots=False)
    except (MemoryStoreError, OSError) as exc:
        logger.warning("gc() after a checkpoint of %s failed (the next one retries): %s", remote.uri, exc)
