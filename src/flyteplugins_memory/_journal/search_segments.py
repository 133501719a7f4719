"""The search index in storage: reading its segments, and updating it with each commit.

Segments are immutable journal objects, ``search/<sha[:2]>/<sha256>.json``, named by their bytes and
uploaded before the commit record that names them (from ``ext["search"]``, see `_rules.search_index`); each
save that changes files writes one (its docs, merged with the newest segments), and purge() removes
those that hold a purged content (`purge_segments`). The
index is a derived cache, never the truth: a save whose index update fails for any reason commits
without it (the record then carries the previous index, whose ``seq`` no longer matches, and readers
check it against the file index), and a reader that meets a missing or corrupt segment indexes files
instead; so does one that meets a segment whose postings or docs turn out malformed when decoded
(`DamagedSegment`: bytes a hostile or buggy writer made, matching their sha256), and a merge drops it
(docs/decisions/0161). Nothing here raises into a save.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._base.version import WRITER
from .._rules.journal_objects import EMPTY_CHECKPOINT, FileEntry
from .._rules.layout import search_segment_name
from .._rules.metadata import EXT_KEY as METADATA_KEY
from .._rules.offload import off_loop
from .._rules.purge_count import purges
from .._rules.search_forms import DamagedSegment
from .._rules.search_index import (
    EXT_KEY,
    MAX_SEGMENTS,
    Repairs,
    SearchExt,
    Segment,
    SegmentRef,
    Updates,
    decode_segment,
    encode_segment,
    merge_plan,
    merged,
    read_ext,
)
from .._rules.search_restem import in_language
from .._rules.search_stem import search_language
from .._rules.search_text import Doc, make_doc
from .._rules.state import State
from .._rules.ttl import expires_at
from ..errors import InvalidArgument, MemoryStoreError, StorageError
from ..storage._contract import ObjectStorage

logger = logging.getLogger(__name__)

#: Segments already reported missing, by store and sha256 (bounded): a handle that read the index before another
#: handle's purge or gc rewrote it meets the same gone segment at each search and save until it refreshes,
#: and one warning says it all.
_REPORTED: OrderedDict[tuple[str, str], None] = OrderedDict()
_REPORTED_MAX = 256


def doc_for(path: str, entry: FileEntry, data: bytes) -> Doc:
    """The index's doc for a file: its content, and what `get_meta` gives for it."""
    meta = (entry.updated_at, entry.updated_by, entry.reason, entry.bytes)
    metadata = entry.ext.get(METADATA_KEY) or {}
    return make_doc(entry.sha256, data, meta, metadata if isinstance(metadata, dict) else {}, expires_at(entry))


def docs_for(changes: Mapping[str, FileEntry | None], contents: Mapping[str, bytes]) -> Updates | None:
    """Docs for a save's changes (None for deletions); None if some content is not at hand."""
    if any(e is not None and p not in contents for p, e in changes.items()):
        return None
    return {p: (doc_for(p, e, contents[p]) if e is not None else None) for p, e in changes.items()}


async def updates_of(changes: Mapping[str, FileEntry | None], contents: Mapping[str, bytes]) -> Updates | None:
    """`docs_for`, off the loop when the save is large; None (the save commits without updating the index)
    when the search language is misconfigured: the index is a cache, and a search says what is wrong."""
    size = sum(len(contents.get(p, b"")) for p in changes)
    try:
        return await off_loop(size, docs_for, changes, contents)
    except InvalidArgument as exc:  # only `search_language()` raises it here
        logger.warning("Committing without updating the search index: %s", exc)
        return None


async def read_segments(remote: ObjectStorage, refs: list[SegmentRef], cache: dict[str, Segment]) -> dict[str, Segment]:
    """Those of the segments `refs` names that can be had, by sha256, as they answer in the search
    language (`in_language`: an unstemmed one stemmed as it is read): from `cache` where it holds them,
    else read concurrently, checked, and cached. A missing or corrupt one, or one stemmed in another
    language, is left out (logged): the caller indexes files instead of trusting what it held."""
    missing = [r for r in refs if r.sha256 not in cache]
    if missing:
        try:
            found = await remote.read_many([search_segment_name(r.sha256) for r in missing])
        except (StorageError, MemoryStoreError) as exc:
            logger.warning("Search index unreadable, indexing files instead: %s", exc)
            found = {}
        for ref in missing:
            if (segment := _checked(remote.uri, ref, found.get(search_segment_name(ref.sha256)))) is not None:
                cache[ref.sha256] = segment
    language, out = search_language(), {}
    for ref in refs:
        if ref.sha256 in cache and (segment := in_language(cache[ref.sha256], language)) is not None:
            out[ref.sha256] = segment
        elif ref.sha256 in cache:
            message = "Search segment %s was stemmed in %s, not %s: indexing files instead"
            _report(remote.uri, ref.sha256, message, cache[ref.sha256].stem, language)
    return out


def _checked(store: str, ref: SegmentRef, data: bytes | None) -> Segment | None:
    if data is None:
        _report(
            store,
            ref.sha256,
            "Search segment %s is gone (a purge or gc removed it after this state was read), indexing files instead;"
            " refresh() moves the handle to the newest index",
        )
        return None
    if len(data) != ref.bytes or hashlib.sha256(data).hexdigest() != ref.sha256:
        _report(store, ref.sha256, "Search segment %s is corrupt, indexing files instead")
        return None
    try:
        segment = decode_segment(data)
    except ValueError as exc:
        logger.warning("Search segment %s is malformed, indexing files instead: %s", ref.sha256, exc)
        return None
    segment.sha256 = ref.sha256
    return segment


def report_damaged(store: str, damage: DamagedSegment) -> None:
    """Warn (once per process) that a segment turned out malformed where it was decoded."""
    _report(store, damage.segment.sha256 or "", "Search segment %s is malformed, indexing files instead: %s", damage)


def _report(store: str, sha256: str, message: str, *details: object) -> None:
    """Warn of an unusable segment once per process (a long-lived handle meets it again and again)."""
    if (store, sha256) in _REPORTED:
        return
    _REPORTED[store, sha256] = None
    if len(_REPORTED) > _REPORTED_MAX:
        _REPORTED.popitem(last=False)
    logger.warning(message, sha256, *details)


#: `Prepared.index`'s ``seq`` while the commit it goes into has no slot yet (commit seqs are never negative)
_THIS_COMMIT = -1


@dataclass
class Prepared:
    """This save's share of the search index, written before its commit slot is known: its segment is
    uploaded with the save's other content (the first wave of a save, `_journal.commit`), and `apply` names it
    in whichever commit attempt is built on `latest`. None in `index`: the update failed (commit without it)."""

    latest: State
    index: SearchExt | None


async def prepare(
    remote: ObjectStorage, latest: State, updates: Updates | None, repairs: Repairs, *, whole: bool = False
) -> Prepared | None:
    """Write the segment of `updates` (and `repairs`' docs made against `latest`) for a commit built on `latest`,
    merged with every segment of the index if `whole` (a purge's commit). Best effort, as `extend`; None when
    the save carries no docs (deletions with unknown contents)."""
    if updates is None:
        return None
    try:
        return Prepared(latest, await _extended(remote, latest, _THIS_COMMIT, updates, repairs, whole))
    except Exception as exc:
        logger.warning("Committing without updating the search index: %s", exc)
        return Prepared(latest, None)


def apply(prepared: Prepared | None, new: State) -> None:
    """Set `new`'s ``ext["search"]`` from `prepared` (made on the state `new` is built on)."""
    if prepared is None or prepared.index is None:
        return
    index = prepared.index
    sx = SearchExt(new.seq if index.seq == _THIS_COMMIT else index.seq, list(index.segments))
    new.ext = {**new.ext, EXT_KEY: sx.encoded()}


async def extend(
    remote: ObjectStorage, latest: State, new: State, updates: Updates | None, repairs: Repairs, *, whole: bool = False
) -> None:
    """Set `new`'s ``ext["search"]``: `latest`'s index plus a segment of `updates` (this commit's docs)
    and, when they were made against `latest`, `repairs`' docs (all segments merged into one if `whole`).
    Best effort: on any failure `new` keeps `latest`'s index, which then no longer claims to be exact."""
    apply(await prepare(remote, latest, updates, repairs, whole=whole), new)


async def _extended(
    remote: ObjectStorage, latest: State, seq: int, updates: Updates, repairs: Repairs, whole: bool = False
) -> SearchExt:
    old = read_ext(latest.ext) or SearchExt()
    repaired = repairs.seq is not None and repairs.seq == latest.seq
    exact = repaired or old.seq == latest.seq or _empty(latest)
    sx = SearchExt(seq if exact else old.seq, list(old.segments))
    docs: Updates = dict(repairs.docs) if repaired else {}
    if repaired:  # their docs were read from the files: the index no longer needs the unreadable segments
        sx.segments = [r for r in sx.segments if r.sha256 not in repairs.dropped]
    docs.update(updates)
    # a merge may wait only where the index names no segment a purge removed (exact, and no purge ever) and
    # the save hides no doc whose text must go with its file
    may_wait = exact and purges(latest.ext) == 0 and _forgets_nothing(latest, updates)
    if docs and await _fold(remote, sx, docs, repairs.cache, may_wait=may_wait, whole=whole):
        sx.seq = old.seq  # older than this commit (or unknown): it lacks the dropped segments' docs, inexact
    return sx


def _empty(state: State) -> bool:
    """A store's empty start (a new store: no file, so nothing the index could miss)."""
    return state.seq == 0 and state.checkpoint == EMPTY_CHECKPOINT and not state.files.changes


def _forgets_nothing(latest: State, updates: Updates) -> bool:
    """Whether no doc of `updates` hides one whose text must leave storage once its file does: a removed doc
    (a deletion, an expiry) or the replaced doc of a file with a ttl. gc() keeps every segment a state
    names, and only a merge drops a hidden doc's text, so those saves merge (docs/decisions/0146)."""
    for path, doc in updates.items():
        if doc is None:
            return False
        entry = latest.files.get(path)
        if entry is not None and expires_at(entry) is not None:
            return False
    return True


def _merge_waits(sx: SearchExt, merging: list[SegmentRef], cache: dict[str, Segment]) -> bool:
    """Whether to write this save's docs as a segment of their own instead of merging: the merge would read
    segments the handle does not hold (a round trip more before the commit, which waits for the segment),
    and the index stays within `MAX_SEGMENTS` without it. A save whose handle holds them (it wrote or read
    them), the save that would pass the bound, and any save of a store that was ever purged or whose index
    is inexact merge as before: a purge removes segments the index may still name, and only the merge's read
    finds them gone and drops them (docs/decisions/0146)."""
    return any(r.sha256 not in cache for r in merging) and len(sx.segments) + 1 <= MAX_SEGMENTS


async def _fold(
    remote: ObjectStorage,
    sx: SearchExt,
    docs: Updates,
    cache: dict[str, Segment],
    *,
    may_wait: bool = False,
    whole: bool = False,
) -> bool:
    """Write `docs` as a new segment, merged with the newest segments as `merge_plan` says, or with all of
    them if `whole` (those `cache` lacks are read, unless the merge `may_wait`, `_merge_waits`; the new one is
    cached: the handle's next search needs it). A segment to merge that is gone (a purge removes those holding
    a purged doc) leaves the index, which then misses its docs: True if that happened (the caller marks the
    index inexact, and readers index those files again)."""
    dropped = False
    while True:  # each round merges, or drops at least one segment: bounded by their number
        sizes = [r.bytes for r in sx.segments] + [len(encode_segment(docs, WRITER))]
        count = len(sizes) if whole else merge_plan(sizes)
        merging = sx.segments[len(sx.segments) + 1 - count :] if count else []
        if not merging or (may_wait and not whole and _merge_waits(sx, merging, cache)):
            merging = []
            break
        found = await read_segments(remote, merging, cache)
        # by sha: two saves of the same docs name one segment twice
        complete = all(r.sha256 in found for r in merging)
        if complete and (merging_docs := _full_docs(remote.uri, merging, found, cache)) is not None:
            docs = merged(merging_docs, docs, oldest=len(merging) == len(sx.segments))
            break
        sx.segments = [r for r in sx.segments if r.sha256 in found or r not in merging]
        dropped = True
    data = encode_segment(docs, WRITER)
    sha = hashlib.sha256(data).hexdigest()
    await remote.write_many({search_segment_name(sha): data})
    cache[sha] = decode_segment(data)
    cache[sha].sha256 = sha
    sx.segments = [*sx.segments[: len(sx.segments) - len(merging)], SegmentRef(sha, len(data))]
    return dropped


def _full_docs(
    store: str, refs: list[SegmentRef], found: dict[str, Segment], cache: dict[str, Segment]
) -> Updates | None:
    """The docs of segments `refs` merged (newest wins), or None when one turns out malformed: it then
    leaves `found` and `cache`, as a missing one would (the caller drops it from the index)."""
    older: Updates = {}
    for ref in refs:
        try:
            older = merged(older, found[ref.sha256].full_docs(), oldest=False)
        except DamagedSegment as exc:
            report_damaged(store, exc)
            del found[ref.sha256]
            cache.pop(ref.sha256, None)
            return None
    return older


async def read_contents(read: Any, paths: list[str], batch: int = 64) -> dict[str, bytes]:
    """``await read(path)`` for each of `paths`, `batch` at a time."""
    out: dict[str, bytes] = {}
    for start in range(0, len(paths), batch):
        chunk = paths[start : start + batch]
        out.update(zip(chunk, await asyncio.gather(*(read(p) for p in chunk)), strict=True))
    return out
