"""A state's file index, loaded lazily: its checkpoint's parts as they are needed, with the record's
changes on top.

A checkpoint of a large store does not list its files: it names *parts* (`PartRef`: sorted, disjoint
ranges of paths), each a content-addressed object. Opening reads no part. Whatever looks at files first
awaits the parts it needs (`Files.need`, `need_under`, `need_all`); touching a part that is not loaded is
a bug in the caller and raises `PartNotLoaded` (an `AssertionError`), never a wrong answer.

Parts are untrusted input (`load_part`): their sha256 and size must match the reference, their paths pass
the caller-path rules, are sorted and lie exactly in the range the checkpoint names. A file and a
directory of one name (``x`` beside ``x/y``) are refused in what is loaded: within a part when it loads,
and around every path an operation asks for (its parents and what lies under it), so no answer is built on
such content. Small checkpoints keep their files inline and are checked whole, as before.

The I/O here goes through the `ObjectStorage` the checkpoint was read from (typed only, so this module
stays below the storage seam); parts of one checkpoint are shared by every state built on it.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from ..errors import ContentPurged, CorruptStore, StateCollected, UnsafeStoreContent
from .codecs import sha256_bytes
from .entries import FileEntry, Part, PartRef
from .journal_objects import Checkpoint, parse
from .layout import checkpoint_name, part_name
from .markers import parse_purged, purge_marker_name
from .paths import file_dir_clashes, parent_dirs

if TYPE_CHECKING:
    from ..storage._contract import ObjectStorage

#: Parts read at once when many are needed (a full listing).
LOAD_BATCH = 64


class PartNotLoaded(AssertionError):
    """Internal: code looked at files of a part it did not load first (`Files.need`). A bug, not a
    condition of the store: it must fail loudly rather than answer as if the files did not exist."""


def load_part(data: bytes, ref: PartRef, name: str) -> Part:
    """A part object checked against the checkpoint's reference to it (`CorruptStore`, or
    `UnsafeStoreContent` for unsafe paths and file/directory clashes)."""
    if len(data) != ref.bytes or sha256_bytes(data) != ref.sha256:
        raise CorruptStore(f"Part {name!r} does not match its checkpoint's reference (sha256 or size)")
    part: Part = parse(Part, data, name)
    paths = list(part.files)
    if len(paths) != ref.count or paths[0] != ref.first or paths[-1] != ref.last:
        raise CorruptStore(f"Part {name!r} does not hold the range its checkpoint names")
    if any(not a < b for a, b in itertools.pairwise(paths)):
        raise CorruptStore(f"Part {name!r} is not sorted")
    _refuse_clashes(paths, f"Part {name!r}")
    return part


def _refuse_clashes(paths: Iterable[str], what: str) -> None:
    clashes = file_dir_clashes(paths)
    if clashes:
        raise UnsafeStoreContent(f"{what} holds {clashes[0]!r} both as a file and as a directory")


def range_under(prefix: str) -> tuple[str, str | None]:
    """The range of paths strictly under directory `prefix`: [prefix/, prefix0) ("0" follows "/"); for ""
    (the whole store) it has no upper end."""
    return (prefix + "/", prefix + "0") if prefix else ("", None)


def inside(path: str, lo: str, hi: str | None) -> bool:
    return lo <= path and (hi is None or path < hi)


class CheckpointFiles:
    """The file index of one checkpoint: inline, or parts loaded on demand from `source`."""

    def __init__(self, checkpoint: Checkpoint, source: ObjectStorage | None):
        self.seq = checkpoint.seq
        self.refs = list(checkpoint.parts)
        self.inline: dict[str, FileEntry] = dict(checkpoint.files)
        self.source = source
        self._firsts = [ref.first for ref in self.refs]
        self.loaded: dict[int, dict[str, FileEntry]] = {}
        self.exts: dict[int, dict] = {}
        self._sorted: dict[int, list[str]] = {}
        #: parts being read now, and by which event loop: a concurrent read of the same part waits for that
        #: one instead of reading it again (a view without a lock of its own, such as ``store.at(commit)``,
        #: may look up many paths at once)
        self._reading: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = {}
        if not self.refs:
            self._sorted[-1] = sorted(self.inline)

    @property
    def partitioned(self) -> bool:
        return bool(self.refs)

    def index_of(self, path: str) -> int | None:
        """The part whose range holds `path`, if any (then only that part can hold it)."""
        i = bisect.bisect_right(self._firsts, path) - 1
        return i if i >= 0 and path <= self.refs[i].last else None

    def overlapping(self, lo: str, hi: str | None) -> list[int]:
        """The parts whose range meets [lo, hi)."""
        start = max(0, bisect.bisect_right(self._firsts, lo) - 1)
        end = len(self._firsts) if hi is None else bisect.bisect_left(self._firsts, hi)
        return [i for i in range(start, end) if self.refs[i].last >= lo]

    def lookup(self, path: str) -> FileEntry | None:
        if not self.refs:
            return self.inline.get(path)
        i = self.index_of(path)
        if i is None:
            return None
        return self._part(i).get(path)

    def _part(self, i: int) -> dict[str, FileEntry]:
        if i not in self.loaded:
            raise PartNotLoaded(f"part {i} of checkpoint {self.seq} was used before it was loaded")
        return self.loaded[i]

    def paths_in(self, lo: str, hi: str | None) -> list[str]:
        """Sorted paths of the checkpoint in [lo, hi) (the parts holding them must be loaded)."""
        groups = [-1] if not self.refs else self.overlapping(lo, hi)
        out: list[str] = []
        for i in groups:
            if i >= 0:
                self._part(i)
            paths = self._sorted[i]
            end = len(paths) if hi is None else bisect.bisect_left(paths, hi)
            out += paths[bisect.bisect_left(paths, lo) : end]
        return out

    def first_under(self, prefix: str) -> int | None:
        """The part that would hold the first path under directory `prefix`, if any part can."""
        lo, hi = range_under(prefix)
        i = bisect.bisect_right(self._firsts, lo) - 1
        if i >= 0 and self.refs[i].last >= lo:
            return i
        i += 1
        return i if i < len(self.refs) and inside(self._firsts[i], lo, hi) else None

    def any_under(self, prefix: str) -> bool:
        """Whether the checkpoint holds a path under directory `prefix` (the part `first_under` names must be
        loaded): one part answers it, however many the directory spans."""
        i = self.first_under(prefix)
        if i is None:
            return False
        lo, hi = range_under(prefix)
        self._part(i)
        paths = self._sorted[i]
        j = bisect.bisect_left(paths, lo)
        if j < len(paths) and inside(paths[j], lo, hi):
            return True
        return i + 1 < len(self.refs) and inside(self._firsts[i + 1], lo, hi)

    def missing(self, indices: Iterable[int]) -> list[int]:
        return sorted({i for i in indices if i not in self.loaded})

    async def load(self, indices: Iterable[int]) -> None:
        """Read, verify and keep the parts `indices` that are not loaded yet. A part that another call on this
        event loop is reading is waited for, and read here only if that read failed (its caller has the error)."""
        indices = list(indices)
        loop = asyncio.get_running_loop()
        while pending := {r[1] for i in self.missing(indices) if (r := self._reading.get(i)) and r[0] is loop}:
            await asyncio.wait(pending)
        wanted = self.missing(indices)
        if not wanted:
            return
        assert self.source is not None, "a partitioned checkpoint always knows where it was read from"
        mine: asyncio.Future[None] = loop.create_future()
        for i in wanted:  # a read on another loop keeps its entry: this one reads the part too
            self._reading.setdefault(i, (loop, mine))
        try:
            for start in range(0, len(wanted), LOAD_BATCH):
                batch = wanted[start : start + LOAD_BATCH]
                names = {i: part_name(self.refs[i].sha256) for i in batch}
                found = await self.source.read_many(list(names.values()))
                for i, name in names.items():
                    if name not in found:
                        raise await self._missing(name)
                    self.keep(i, load_part(found[name], self.refs[i], name))
        finally:
            for i in wanted:
                if self._reading.get(i, (None, None))[1] is mine:
                    del self._reading[i]
            mine.set_result(None)  # the waiters look again: a part still missing is theirs to read

    async def _missing(self, name: str) -> Exception:
        """A missing part: gc() collected this checkpoint (it deletes checkpoints before their parts), a
        purge cut it again without a purged path (`_journal.redact`: a purge marker names the old part), or
        damage."""
        assert self.source is not None
        sha = name.rsplit("/", 1)[-1].removesuffix(".json")
        marker = await self.source.read(purge_marker_name(sha))
        if marker is not None and (purged := parse_purged(marker)) is not None:
            return ContentPurged(
                f"Part {name!r} of checkpoint {self.seq} was replaced when purge({purged.path!r}) ran at "
                f"{purged.at}: refresh() or open the store again"
            )
        if not await self.source.exists(checkpoint_name(self.seq)):
            return StateCollected(f"Checkpoint {self.seq} was removed by gc(); open the store again")
        return CorruptStore(f"Part {name!r} of checkpoint {self.seq} is missing")

    def keep(self, i: int, part: Part) -> None:
        self.loaded[i], self.exts[i], self._sorted[i] = dict(part.files), dict(part.ext), list(part.files)

    def adopt_loaded(self, other: CheckpointFiles | None) -> None:
        """Take the loaded parts of `other` that this checkpoint references too (same sha256, same bytes)."""
        if other is None or other is self or not self.refs:
            return
        by_sha = {other.refs[i].sha256: i for i in other.loaded}
        for i, ref in enumerate(self.refs):
            if i not in self.loaded and (j := by_sha.get(ref.sha256)) is not None:
                self.loaded[i], self.exts[i], self._sorted[i] = other.loaded[j], other.exts[j], other._sorted[j]

    def all_loaded(self) -> bool:
        return len(self.loaded) == len(self.refs)


class Files(Mapping[str, FileEntry]):
    """A state's files: its checkpoint's index (`base`) with `changes` on top (None: deleted). Read-only;
    `with_changes` makes the files of a new state in O(changes)."""

    def __init__(self, base: CheckpointFiles, changes: dict[str, FileEntry | None] | None = None):
        self.base = base
        self.changes: dict[str, FileEntry | None] = dict(changes or {})
        self._checked_all = False

    # -- lookups (the parts they touch must be loaded) ---------------------------------------------------

    def get(self, path: str, default: FileEntry | None = None) -> FileEntry | None:  # type: ignore[override]
        entry = self.changes[path] if path in self.changes else self.base.lookup(path)
        return default if entry is None else entry

    def __getitem__(self, path: str) -> FileEntry:
        entry = self.get(path)
        if entry is None:
            raise KeyError(path)
        return entry

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.get(path) is not None

    def __iter__(self) -> Iterator[str]:
        for path in self.base.paths_in(*range_under("")):
            if path not in self.changes:
                yield path
        yield from (p for p, e in self.changes.items() if e is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def under(self, prefix: str) -> list[str]:
        """Sorted paths strictly under directory `prefix` ("" for all)."""
        lo, hi = range_under(prefix)
        paths = {p for p in self.base.paths_in(lo, hi) if p not in self.changes}
        paths |= {p for p, e in self.changes.items() if e is not None and inside(p, lo, hi)}
        return sorted(paths)

    def has_under(self, prefix: str) -> bool:
        lo, hi = range_under(prefix)
        if any(e is not None and inside(p, lo, hi) for p, e in self.changes.items()):
            return True
        return any(p not in self.changes for p in self.base.paths_in(lo, hi))

    def with_changes(self, changes: Mapping[str, FileEntry | None]) -> Files:
        """These files with `changes` applied (the parts holding their paths must be loaded)."""
        out = dict(self.changes)
        for path, entry in changes.items():
            if entry is None and self.base.lookup(path) is None and path not in out:
                continue  # never in the checkpoint nor written since: nothing to record
            # a path written since the checkpoint and deleted again stays, as None: the records up to the
            # next checkpoint say it was deleted, which lets a later write's history read back to it
            out[path] = entry
        return Files(self.base, out)

    # -- loading ---------------------------------------------------------------------------------------

    def parts_for(self, paths: Iterable[str]) -> set[int]:
        """The parts a lookup of each of `paths` needs: its own, its parents', and those under it."""
        base, wanted = self.base, set()
        for path in paths:
            for candidate in (path, *parent_dirs(path)):
                if (i := base.index_of(candidate)) is not None:
                    wanted.add(i)
            wanted.update(base.overlapping(*range_under(path)))
        return wanted

    async def need(self, paths: Iterable[str]) -> None:
        """Load what looking at `paths` needs, and refuse a file/directory clash around any of them."""
        paths = list(paths)
        if self.base.partitioned:
            await self.base.load(self.parts_for(paths))
            # a parent that the checkpoint holds as a file must have nothing under it, wherever that would be
            # (only a hostile store has both; one more part, and only when a parent is a file)
            file_parents = {d for p in paths for d in parent_dirs(p) if self.base.lookup(d) is not None}
            await self.base.load(i for d in file_parents if (i := self.base.first_under(d)) is not None)
            for path in paths:
                self._refuse_clash_at(path)
            for parent in sorted(file_parents):
                if self.base.any_under(parent):
                    raise UnsafeStoreContent(
                        f"Checkpoint {self.base.seq} holds {parent!r} both as a file and as a directory"
                    )

    async def need_under(self, prefix: str) -> None:
        """Load what listing directory `prefix` needs ("" for everything)."""
        if not prefix:
            await self.need_all()
            return
        await self.need([prefix])
        if self.base.partitioned:
            paths = self.under(prefix)
            _refuse_clashes(paths, f"Checkpoint {self.base.seq}")

    async def need_all(self) -> None:
        """Load every part (a full listing, gc, purge): O(files) bytes, fetched concurrently in batches."""
        if self.base.partitioned and not self._checked_all:
            await self.base.load(range(len(self.base.refs)))
            _refuse_clashes(self, f"Checkpoint {self.base.seq}")
            self._checked_all = True

    def _refuse_clash_at(self, path: str) -> None:
        files = [d for d in parent_dirs(path) if self.get(d) is not None]
        if self.get(path) is not None:
            files.append(path)
        if len(files) > 1 or (files and self.has_under(path)):
            raise UnsafeStoreContent(f"Checkpoint {self.base.seq} holds {files[0]!r} both as a file and as a directory")
