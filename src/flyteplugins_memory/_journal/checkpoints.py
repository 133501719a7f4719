"""Writing a checkpoint's file index: inline for a small store, else the parts that changed (`_rules.parts`).

A checkpoint of state `n` built on checkpoint `c` rewrites only the parts of `c` whose range holds a path
that records since `c` changed: it loads those parts, applies the changes, cuts the result (`_rules.parts.chunk`)
and uploads the new parts, content-addressed and immutable, before the checkpoint object that names them.
Every other part is referenced again and not rewritten. So checkpoint bytes follow what changed since the
last checkpoint (at most one part per changed path, plus the list of references), not the store's size.
The one exception is bounded: an index of several parts that fits one part (`_rules.parts.fits_one`: parts an
older version cut smaller, or a store that shrank) is rewritten as one part, at most `PART_MAX_BYTES`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._rules import parts as _parts
from .._rules.codecs import sha256_bytes
from .._rules.entries import FileEntry, Part, PartRef
from .._rules.index import LOAD_BATCH, CheckpointFiles, load_part
from .._rules.journal_objects import PARTITIONED_FORMAT, Checkpoint, apply_files, encode
from .._rules.layout import part_name
from .._rules.parts import Entries, Rewrite, assign, chunk, fits_one, index_bytes, rewrite_run, runs, spliced
from .._rules.state import State
from ..errors import CorruptStore
from ..storage._contract import ObjectStorage


async def checkpoint_of(
    remote: ObjectStorage, state: State, audit_segments: list[int]
) -> tuple[Checkpoint, CheckpointFiles]:
    """Upload the parts a checkpoint of `state` needs; returns the checkpoint (not written yet) and its
    file index, with the parts this wrote (and those `state` had loaded) already loaded."""
    base = state.files.base
    if base.partitioned:
        refs, written = await _rewritten_parts(remote, state)
    else:
        refs, written = await _first_parts(remote, state)
    if refs is None:
        inline = apply_files(base.inline, state.files.changes)
        checkpoint = state.as_checkpoint(audit_segments, {"files": inline})
    else:
        checkpoint = state.as_checkpoint(audit_segments, {"parts": refs, "format": PARTITIONED_FORMAT})
    index = CheckpointFiles(checkpoint, remote)
    for i, ref in enumerate(refs or []):
        if ref.sha256 in written:
            index.keep(i, written[ref.sha256])
    index.adopt_loaded(base)
    return checkpoint, index


async def _first_parts(remote: ObjectStorage, state: State) -> tuple[list[PartRef] | None, dict[str, Part]]:
    """An inline index that grew past `INLINE_MAX_BYTES` is cut into parts (None: it stays inline)."""
    files = apply_files(state.files.base.inline, state.files.changes)
    if index_bytes(files) <= _parts.INLINE_MAX_BYTES:  # read at call time: tests lower it
        return None, {}
    pieces = chunk(sorted(files.items()))
    refs, written = await _upload(remote, [pieces], [{}])
    return refs[0], written


async def _rewritten_parts(remote: ObjectStorage, state: State) -> tuple[list[PartRef] | None, dict[str, Part]]:
    """The parts after the changes since the checkpoint: changed runs rewritten, the rest referenced again."""
    base = state.files.base
    groups = assign(base.refs, state.files.changes)
    affected = set(range(len(base.refs))) if fits_one(base.refs) else set(groups)
    while True:
        await base.load(affected)
        rewrites = [rewrite_run(run, base.loaded, _changes_of(run, groups)) for run in runs(affected)]
        grow = {_neighbour(r, affected, len(base.refs)) for r in rewrites if r.small} - {None}
        if not grow:
            break
        affected |= {i for i in grow if i is not None}
    exts = [_ext_of(base, r) for r in rewrites]
    new, written = await _upload(remote, [r.pieces for r in rewrites], exts)
    refs = spliced(base.refs, rewrites, new)
    return (refs or None), written


def _changes_of(run: list[int], groups: dict[int, dict[str, FileEntry | None]]) -> dict[str, FileEntry | None]:
    return {p: e for i in run for p, e in groups.get(i, {}).items()}


def _neighbour(rewrite: Rewrite, affected: set[int], count: int) -> int | None:
    """A part to merge a run that shrank too small with: the next one, else the one before."""
    for i in (rewrite.last + 1, rewrite.first - 1):
        if 0 <= i < count and i not in affected:
            return i
    return None


def _ext_of(base: CheckpointFiles, rewrite: Rewrite) -> dict[str, Any]:
    """Extensions of the parts a run replaces, carried into the parts that replace them."""
    ext: dict[str, Any] = {}
    for i in range(rewrite.first, rewrite.last + 1):
        ext.update(base.exts.get(i, {}))
    return ext


async def _upload(
    remote: ObjectStorage, runs_of_pieces: list[list[Entries]], exts: list[dict[str, Any]]
) -> tuple[list[list[PartRef]], dict[str, Part]]:
    """Encode and upload new parts (idempotent: named by their sha256); returns their references per run."""
    objects: dict[str, bytes] = {}
    written: dict[str, Part] = {}
    refs: list[list[PartRef]] = []
    for pieces, ext in zip(runs_of_pieces, exts, strict=True):
        refs.append([])
        for piece in pieces:
            part = Part(files=dict(piece), ext=ext)
            data = encode(part)
            sha = sha256_bytes(data)
            objects[part_name(sha)], written[sha] = data, part
            refs[-1].append(
                PartRef(first=piece[0][0], last=piece[-1][0], count=len(piece), sha256=sha, bytes=len(data))
            )
    await remote.write_many(objects)
    return refs, written


async def read_all_parts(journal: ObjectStorage, checkpoints: Iterable[Checkpoint]) -> dict[str, dict[str, FileEntry]]:
    """Every part the `checkpoints` reference, by sha256, read once each and verified (gc: O(files) bytes)."""
    refs = {ref.sha256: ref for checkpoint in checkpoints for ref in checkpoint.parts}
    out: dict[str, dict[str, FileEntry]] = {}
    wanted = sorted(refs)
    for start in range(0, len(wanted), LOAD_BATCH):
        names = {part_name(sha): sha for sha in wanted[start : start + LOAD_BATCH]}
        found = await journal.read_many(list(names))
        for name, sha in names.items():
            if name not in found:
                raise CorruptStore(f"Part {name!r} is referenced by a kept checkpoint but missing")
            out[sha] = dict(load_part(found[name], refs[sha], name).files)
    return out
