"""A store's objects by their logical names: the store prefix, and its journal wherever that lives.

The journal's objects have logical names under ``meta/.journal/`` (`_rules.layout.JOURNAL_DIR`: ``log/...``,
``head.json``, blobs, parts, checkpoints), and everything above this module uses those names alone. Where
they live is the journal's business, not the object store's: beside the tree of stores since issue 8
(`_rules.journal_location.journal_root`), inside the store prefix for a bucket-root store and for stores
saved by earlier versions (the old journal a move reads, `_journal.old_journal`), and at its own root for
each generation of a key (`_journal.generations`). `JournalStorage` is the one place that maps them, as
delta-rs's log store owns the commit entries apart from the object store: it wraps two `ObjectStorage`s
of one filesystem, the store prefix and the journal root, and routes each name to one of them. The
object-storage contract (`storage.ObjectStorage`) stays about objects under one prefix.

A batch that names objects on both sides is split into runs of consecutive names on one side, made in
order, so a batch whose order matters (`remove_many`; writes on a backend that makes them one by one) keeps
it; reads and unordered removals go to both sides at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._rules.journal_location import journal_root
from .._rules.layout import JOURNAL_DIR
from ..storage._contract import Capabilities, Listed
from ..storage._copy import Copied
from ..storage._fsio import gather_all
from ..storage._fsspec import FsspecStorage

__all__ = ["JournalStorage"]

_JOURNAL_PREFIX = JOURNAL_DIR + "/"


class JournalStorage:
    """The objects of one store by logical name: its prefix's, and its journal's at `journal_root`.

    Implements `storage.ObjectStorage` (names relative to the store prefix, journal names included), plus
    where the journal lives: `journal_root`, `journal_moved`, and `with_journal_root` for a view of
    another journal of the same store (the old one during a move, another generation's).
    """

    def __init__(self, store: FsspecStorage, root: str | None = None):
        #: the objects under the store prefix (upstream's layout, and the old journal inside it)
        self.store = store
        #: the objects under the journal root, by their names inside the journal (``log/...``)
        self.journal = store.beside(journal_root(store.prefix) if root is None else root)

    @classmethod
    def at(cls, uri: str) -> JournalStorage:
        """The store at `uri`, its journal where this version keeps it (generation 0's)."""
        return cls(FsspecStorage(uri))

    # -- where the store and its journal live ------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The store prefix as a URI."""
        return self.store.uri

    @property
    def prefix(self) -> str:
        """The store prefix as the filesystem names it (no protocol)."""
        return self.store.prefix

    @property
    def capabilities(self) -> Capabilities:
        """What the backend can do (both sides share one filesystem)."""
        return self.store.capabilities

    @property
    def journal_root(self) -> str:
        """Where names under ``meta/.journal/`` live (outside the prefix, see `_rules.journal_location`)."""
        return self.journal.prefix

    @property
    def journal_moved(self) -> bool:
        """Whether the journal lives outside the store prefix (it stays inside for a bucket-root store)."""
        return self.journal_root != f"{self.prefix}/{JOURNAL_DIR}"

    def with_journal_root(self, root: str) -> JournalStorage:
        """The same store, with journal names mapped to `root` (sharing this one's filesystem)."""
        return JournalStorage(self.store, root)

    # -- routing ----------------------------------------------------------------------------------------

    def _side(self, name: str) -> tuple[FsspecStorage, str]:
        """The storage holding object `name`, and its name there."""
        if name.startswith(_JOURNAL_PREFIX):
            return self.journal, name[len(_JOURNAL_PREFIX) :]
        if name == JOURNAL_DIR:
            return self.journal, ""
        return self.store, name

    def _runs(self, names: Iterable[str]) -> list[tuple[FsspecStorage, list[tuple[str, str]]]]:
        """`names` as runs of consecutive names on one side: the storage, and (logical, local) name pairs."""
        runs: list[tuple[FsspecStorage, list[tuple[str, str]]]] = []
        for name in names:
            side, local = self._side(name)
            if runs and runs[-1][0] is side:
                runs[-1][1].append((name, local))
            else:
                runs.append((side, [(name, local)]))
        return runs

    # -- the contract, by logical name --------------------------------------------------------------------

    async def read(self, name: str) -> bytes | None:
        """Contents of object `name`, or None if it does not exist."""
        side, local = self._side(name)
        return await side.read(local)

    async def read_range(self, name: str, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` of object `name` (fewer where it is shorter), or None if it does not exist."""
        side, local = self._side(name)
        return await side.read_range(local, start, end)

    async def read_many(self, names: list[str]) -> dict[str, bytes]:
        """Contents of the named objects that exist (missing ones are left out), in the order of `names`."""
        runs = self._runs(names)
        if len(runs) == 1:
            side, pairs = runs[0]
            found = await side.read_many([local for _, local in pairs])
            return {name: found[local] for name, local in pairs if local in found}
        parts = await gather_all(side.read_many([local for _, local in pairs]) for side, pairs in runs)
        merged = {
            name: part[local]
            for (_, pairs), part in zip(runs, parts, strict=True)
            for name, local in pairs
            if local in part
        }
        return {name: merged[name] for name in names if name in merged}

    async def write_many(self, objects: dict[str, bytes]) -> None:
        """Write every object; each one is whole or absent to readers."""
        for side, pairs in self._runs(objects):
            await side.write_many({local: objects[name] for name, local in pairs})

    async def create_exclusive(self, name: str, data: bytes) -> bool:
        """Create object `name` only if it does not exist; True if this call created it."""
        side, local = self._side(name)
        return await side.create_exclusive(local, data)

    async def create_many(self, objects: dict[str, bytes]) -> set[str]:
        """Create each object only if its name is free; the names this call created."""
        created: set[str] = set()
        for side, pairs in self._runs(objects):
            made = await side.create_many({local: objects[name] for name, local in pairs})
            created.update(name for name, local in pairs if local in made)
        return created

    async def copy_checked(self, source: str, target: str, sha256: str) -> Copied | None:
        """Copy object `source` to object `target` in the backend if its bytes hash to `sha256`
        (`FsspecStorage.copy_checked`); None where the backend cannot."""
        side, local = self._side(source)
        to, to_local = self._side(target)
        return await side.copy_checked(local, to.full_path(to_local), sha256)

    async def remove_many(self, names: list[str]) -> None:
        """Delete the named objects one after the other, in order; missing ones are ignored."""
        for side, pairs in self._runs(names):
            await side.remove_many([local for _, local in pairs])

    async def remove_all(self, names: list[str]) -> None:
        """Delete the named objects, concurrently where the backend can, in no particular order."""
        runs = self._runs(names)
        if len(runs) == 1:
            side, pairs = runs[0]
            await side.remove_all([local for _, local in pairs])
            return
        grouped = {id(side): side for side, _ in runs}
        by_side = {key: [local for side, pairs in runs if id(side) == key for _, local in pairs] for key in grouped}
        await gather_all(grouped[key].remove_all(local_names) for key, local_names in by_side.items())

    async def exists(self, name: str) -> bool:
        """Whether object `name` exists."""
        side, local = self._side(name)
        return await side.exists(local)

    async def list(self, under: str = "") -> dict[str, int]:
        """Every object of the store (or under `under`) as ``{name: size}``; the journal's only under
        ``meta/.journal``, or when it lives inside the prefix."""
        return {name: found.size for name, found in (await self.stat(under)).items()}

    async def stat(self, under: str = "") -> dict[str, Listed]:
        """Like `list`, with each object's modification time."""
        side, local = self._side(under)
        found = await side.stat(local)
        return {f"{_JOURNAL_PREFIX}{name}": listed for name, listed in found.items()} if side is self.journal else found
