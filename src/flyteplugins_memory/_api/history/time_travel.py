"""Time travel: `MemoryStore.at(commit)`, a read-only view of the whole store as of one commit.

The view is the committed state `commit` created (`_journal.opening.state_at`: its record and the checkpoint it is
relative to, so opening one costs what opening the store does), read like a handle reads: listings,
existence and metadata from its file index, contents fetched on demand from their blobs and verified by
sha256. It has no working copy: every write raises `ReadOnlySnapshot`. A commit the store never made, or
one gc() collected, raises `CommitNotFound` when the view is asked for; content gc() collected while the
view is in use raises `StateCollected` on read, as for any handle pinned to collected state.

A file whose ttl has run out reads as missing here too, judged at now (`_journal.gc.clock`) as a handle judges it,
not at the commit's time: an expired file (scratch, a secret) never comes back through time travel, and
the view of the newest commit agrees with the handle.

`open_bytes` streams a file of the commit as the handle's does (`_journal.streaming`, decision 0162): the same
stored object `read_bytes` here verifies, read in parts. For a file stored in place whose path a later save
rewrote or deleted, that is the blob copy the save made of its old bytes, not the path.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, NoReturn

from ..._base.syncify import syncify
from ..._journal import gc as _gc
from ..._journal.commit_log import Commit
from ..._journal.contents import fetch_contents
from ..._journal.journal_storage import JournalStorage
from ..._journal.log_reads import read_checkpoint
from ..._journal.opening import latest_state, state_at
from ..._journal.streaming import open_committed
from ..._journal.versions import decode_text
from ..._rules.admission import Access, PathAdmission
from ..._rules.arguments import check_int
from ..._rules.codecs import MemoryMeta
from ..._rules.journal_objects import EMPTY_CHECKPOINT, FileEntry
from ..._rules.metadata import Scalar, check_where, from_ext, matches
from ..._rules.state import State
from ..._rules.ttl import is_expired
from ...errors import CommitNotFound, CorruptStore, InvalidArgument, PathNotFound, ReadOnlySnapshot, StateCollected
from ...storage._byte_stream import ByteStream
from ..core import StoreCore


class StoreAt:
    """The store as of commit `seq` (from ``store.at(commit)``): read it like a handle (`read_text`,
    `read_bytes`, `read_json`, `open_bytes`, `list_paths`, `exists`, `get_meta`, `current_sha`, `messages`); every
    write (`write_text`, `write_bytes`, `write_json`, `delete`, `set_metadata`, `restore`, `append`,
    `extend`, `save`) raises `ReadOnlySnapshot`. Paths pass the handle's rules (`InvalidPath`, ...)."""

    def __init__(self, state: State, remote: JournalStorage | None, admission: PathAdmission):
        self._state, self._remote, self._admission = state, remote, admission

    def __repr__(self) -> str:
        return f"StoreAt(seq={self.seq})"

    @property
    def seq(self) -> int:
        """The commit this view shows the store as of."""
        return self._state.seq

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The transcript as of the commit (a copy: changing it changes nothing stored)."""
        return copy.deepcopy(list(self._state.messages))

    @syncify
    async def read_bytes(self, rel_path: str, default: bytes | None = None) -> bytes | None:
        """Contents of `rel_path` as of the commit, or `default` if it was not a file then."""
        rel = self._admission.admit(rel_path, Access.READ)
        entry = await self._entry(rel)
        if entry is None:
            return default
        return (await fetch_contents(self._remote, {rel: entry}, self._state))[rel]

    @syncify
    async def open_bytes(self, rel_path: str) -> ByteStream:
        """`rel_path` as of the commit, as a binary file object read in parts (`ByteStream`, as
        `MemoryStore.open_bytes`): the bytes `read_bytes` returns, checked against their sha256 when the
        reader reaches the end. `PathNotFound` if it was no file then (or its ttl has run out by now),
        `ContentPurged` for purged content, `ContentChanged` for a file stored in place that a save
        replaced while the stream read it (open it again: the save kept the old bytes in a blob)."""
        rel = self._admission.admit(rel_path, Access.READ)
        entry = await self._entry(rel)
        if entry is None:
            raise PathNotFound(f"No file {rel!r} in the store as of commit {self.seq}")
        return await open_committed(self._remote, rel, entry, self._state)

    @syncify
    async def read_text(self, rel_path: str, default: str = "") -> str:
        """UTF-8 contents of `rel_path` as of the commit, or `default`; `NotText` for binary content."""
        data = await self.read_bytes.aio(rel_path)
        return default if data is None else decode_text(data, rel_path)

    @syncify
    async def read_json(self, rel_path: str, default: Any = None) -> Any:
        """JSON-decoded contents of `rel_path` as of the commit, or `default` if missing or empty."""
        text = await self.read_text.aio(rel_path)
        if not text.strip():
            return default
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorruptStore(f"{rel_path!r} is not valid JSON: {exc}") from exc

    @syncify
    async def list_paths(self, prefix: str = "", *, where: Mapping[str, Scalar] | None = None) -> list[str]:
        """Sorted paths of the files under directory `prefix` as of the commit (`where` as `list_paths`)."""
        rel = self._admission.admit(prefix, Access.LIST)
        wanted = check_where(where)
        files = self._state.files
        await files.need_under(rel)
        live = self._live(files.under(rel))
        return [p for p in live if not wanted or matches(_metadata(files.get(p), p), wanted)]

    @syncify
    async def exists(self, rel_path: str) -> bool:
        """Whether `rel_path` was a file, or a directory holding one, as of the commit."""
        rel = self._admission.admit(rel_path, Access.READ)
        return await self._entry(rel) is not None or bool(self._live(self._state.files.under(rel)))

    @syncify
    async def get_meta(self, rel_path: str) -> MemoryMeta | None:
        """The metadata sidecar of `rel_path` as of the commit, or None."""
        rel = self._admission.admit(rel_path, Access.READ)
        entry = await self._entry(rel)
        return None if entry is None else entry.meta(rel)

    @syncify
    async def current_sha(self, rel_path: str) -> str:
        """The sha256 of `rel_path`'s content as of the commit, or ``""``."""
        rel = self._admission.admit(rel_path, Access.READ)
        entry = await self._entry(rel)
        return "" if entry is None else entry.sha256

    # -- every write is refused (the handle's I/O writes with their `.aio`, so async code fails alike) ----------

    @syncify
    async def write_text(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("write_text")

    @syncify
    async def write_bytes(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("write_bytes")

    @syncify
    async def write_json(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("write_json")

    @syncify
    async def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("delete")

    @syncify
    async def set_metadata(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("set_metadata")

    @syncify
    async def restore(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("restore")

    def append(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("append")

    def extend(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("extend")

    @syncify
    async def save(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("save")

    # -- internals ------------------------------------------------------------------------------------

    def _refuse(self, operation: str) -> NoReturn:
        raise ReadOnlySnapshot(f"{operation}: the store as of commit {self.seq} is read-only (write to the store)")

    async def _entry(self, rel: str) -> FileEntry | None:
        """`rel`'s entry as of the commit (None: no such file then, or its ttl has run out by now); the
        parts around `rel` are loaded (`exists` looks under it)."""
        await self._state.files.need([rel])
        entry = self._state.files.get(rel)
        return None if is_expired(entry, _gc.clock()) else entry

    def _live(self, paths: list[str]) -> list[str]:
        """Those of `paths` (loaded) whose ttl has not run out by now."""
        files, now = self._state.files, _gc.clock()
        return [p for p in paths if not is_expired(files.get(p), now)]


def _metadata(entry: FileEntry | None, path: str) -> Mapping[str, Scalar]:
    return {} if entry is None else from_ext(entry.ext, path)


class TimeTravelAPI(StoreCore):
    """The store as of a commit: `at`."""

    @syncify
    async def at(self, commit: int | Commit) -> StoreAt:
        """A read-only view of the whole store as of `commit` (a seq from `log()`, or a `Commit`): files,
        metadata and transcript as that commit left them (`StoreAt`). `CommitNotFound` for a commit the
        store never made or one gc() collected; `InvalidArgument` for anything but an int or a `Commit`."""
        seq = _seq_of(commit)
        view = await self._checkout.ready(self)
        remote = self._checkout.remote_if_known()
        state = await _state(remote, view.base, seq)
        if isinstance(commit, Commit) and commit.id and state.recent_commits and state.recent_commits[-1] != commit.id:
            # the same number in another store: the one this key had before `delete_store`, or another key's
            raise CommitNotFound(f"Commit {seq} ({commit.id}) is not a commit of this store")
        return StoreAt(state, remote, self._admission)


def _seq_of(commit: object) -> int:
    if isinstance(commit, Commit):
        return commit.seq
    if isinstance(commit, bool) or not isinstance(commit, int):
        raise InvalidArgument(f"commit must be a seq (an int) or a Commit from log(), got {commit!r}")
    return check_int("commit", commit, minimum=None)


async def _state(remote: JournalStorage | None, known: State, seq: int) -> State:
    """Committed state `seq`; `CommitNotFound` if the store never made it, or gc() collected it."""
    newest = known.seq if remote is None or seq <= known.seq else (await latest_state(remote, known) or known).seq
    if remote is None or not 0 <= seq <= newest:
        raise CommitNotFound(f"No commit {seq} in this store (its newest is {newest})")
    if seq == 0:
        return await _imported(remote)
    try:
        return await state_at(remote, seq)
    except StateCollected as exc:
        raise CommitNotFound(f"Commit {seq} was collected by gc(): it is older than the retention window") from exc


async def _imported(remote: JournalStorage) -> State:
    """State 0: the import of a store written without a journal (a store we created has none to show)."""
    checkpoint = await read_checkpoint(remote, 0)
    if checkpoint is EMPTY_CHECKPOINT:
        raise CommitNotFound("No commit 0 in this store: it was created empty (log() shows its first commit)")
    return State.at_checkpoint(checkpoint, remote)
