"""Pure: how a checkpoint's file index is cut into parts, and which parts a new checkpoint rewrites.

A part is a sorted run of file entries of at most about `PART_MAX_BYTES` (1 MiB: about 4,500 files), so
a store of a few thousand files has one part and a listing of it is one read, while the checkpoint of a
100,000-file store names about 30 parts (a few KiB of references). A new checkpoint rewrites only the parts
whose range holds a path changed since the previous checkpoint (a path between two ranges belongs to the
part before it); the others are referenced again, byte for byte. A rewritten run is split into pieces of
about `PART_TARGET_BYTES` when it grows past `PART_MAX_BYTES`, and merged with a neighbour when it shrinks
below `PART_MIN_BYTES`; an index of several parts that fits one part is cut again as one (`fits_one`: parts
of an older, smaller size converge at the next checkpoint). An index of at most `INLINE_MAX_BYTES` stays
inline in the checkpoint (format 1, which every earlier version reads). Readers take parts of any size.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from .entries import FileEntry, PartRef

#: A rewritten part is cut into pieces of about this size ...
PART_TARGET_BYTES = 768 * 1024
#: ... when it grows past this (and an index up to this size is one part); ...
PART_MAX_BYTES = 1024 * 1024
#: ... and merged with a neighbour below this.
PART_MIN_BYTES = 128 * 1024
#: A file index this small stays inline in the checkpoint (readable by versions before 0.4): an open reads
#: it whole, so it stays small; a larger index is read only when something looks at files.
INLINE_MAX_BYTES = 64 * 1024

Entries = list[tuple[str, FileEntry]]


def entry_bytes(path: str, entry: FileEntry) -> int:
    """About what one entry adds to an encoded part."""
    return len(json.dumps(path)) + len(entry.model_dump_json()) + 2


def index_bytes(entries: Mapping[str, FileEntry]) -> int:
    return sum(entry_bytes(p, e) for p, e in entries.items())


def fits_one(refs: list[PartRef]) -> bool:
    """Whether an index of several parts (of an older, smaller size, or one that shrank) fits one part: the
    next checkpoint then rewrites it as one, at most `PART_MAX_BYTES` read and written once."""
    return len(refs) > 1 and sum(ref.bytes for ref in refs) <= PART_MAX_BYTES


def owner(firsts: list[str], path: str) -> int:
    """The part a changed `path` belongs to: the one whose range holds it, else the one before it (the
    first part for a path before every range)."""
    return max(0, bisect.bisect_right(firsts, path) - 1)


def runs(indices: set[int]) -> list[list[int]]:
    """Consecutive runs of part indices, in order."""
    out: list[list[int]] = []
    for i in sorted(indices):
        if out and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def chunk(entries: Entries) -> list[Entries]:
    """Sorted entries cut into pieces of about `PART_TARGET_BYTES` (one piece if they fit a part)."""
    sizes = [entry_bytes(p, e) for p, e in entries]
    total = sum(sizes)
    if not entries:
        return []
    pieces = 1 if total <= PART_MAX_BYTES else math.ceil(total / PART_TARGET_BYTES)
    out: list[Entries] = [[]]
    filled = 0
    for item, size in zip(entries, sizes, strict=True):
        if filled >= total * len(out) / pieces and out[-1]:
            out.append([])
        out[-1].append(item)
        filled += size
    return out


@dataclass(frozen=True)
class Rewrite:
    """One run of consecutive parts `first..last` (indices into the old refs) replaced by `pieces`."""

    first: int
    last: int
    pieces: list[Entries]

    @property
    def small(self) -> bool:
        return sum(entry_bytes(p, e) for piece in self.pieces for p, e in piece) < PART_MIN_BYTES


def rewrite_run(
    run: list[int], loaded: Mapping[int, Mapping[str, FileEntry]], changes: Mapping[str, FileEntry | None]
) -> Rewrite:
    """The new pieces of a run of parts after `changes` (those that belong to the run) are applied."""
    merged: dict[str, FileEntry] = {}
    for i in run:
        merged.update(loaded[i])
    for path, entry in changes.items():
        if entry is None:
            merged.pop(path, None)
        else:
            merged[path] = entry
    return Rewrite(run[0], run[-1], chunk(sorted(merged.items())))


def assign(refs: list[PartRef], changes: Mapping[str, FileEntry | None]) -> dict[int, dict[str, FileEntry | None]]:
    """Changed paths grouped by the part they belong to (`owner`)."""
    firsts = [ref.first for ref in refs]
    out: dict[int, dict[str, FileEntry | None]] = {}
    for path, entry in changes.items():
        out.setdefault(owner(firsts, path), {})[path] = entry
    return out


def spliced(refs: list[PartRef], rewrites: list[Rewrite], written: list[list[PartRef]]) -> list[PartRef]:
    """The new list of part references: `refs` with each rewritten run replaced by its new parts."""
    out: list[PartRef] = []
    at = 0
    for rewrite, new in zip(rewrites, written, strict=True):
        out += refs[at : rewrite.first] + new
        at = rewrite.last + 1
    return out + refs[at:]
