"""The one committed state an export archives, whatever saves run while it reads.

Export lists the store's objects, then reads them in batches. A save by another handle in between commits
a newer state and rewrites upstream's layout in place: a file's bytes at its path (the older state then
holds them only in a blob `_journal.preserve` wrote after the listing), its sidecar, ``messages.json``, the head
hint. Archived as read, the journal would name content the archive does not hold. So the export pins the
newest committed state before it lists anything (`pin`) and archives exactly that state (`Pinned`):

- the journal up to its commit: later commit records, checkpoints and audit segments are left out, and
  the head hint names the pinned commit;
- upstream's layout as that state projects it: each of its files with bytes that match its sha256 (else
  fetched from where that state's content now lives, as any reader of it would: `fetch_contents`), each
  sidecar naming that content, its transcript in ``messages.json``. Files and sidecars of paths it does
  not hold (a later save's, or the stray of a save that died) are left out.

``versions/``, ``audit/log.jsonl``, blobs and parts are immutable or only grow: they go as read. A store
with no journal of ours (written by upstream) or still in an old journal is archived as listed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from .._rules.archive_format import journal_member, store_member
from .._rules.codecs import decode_messages, decode_meta, encode_messages, encode_meta, sha256_bytes
from .._rules.journal_objects import Origin, encode
from .._rules.layout import HEAD_NAME, JOURNAL_DIR, Kind, classify, sidecar_name
from .._rules.open_hint import head_for
from .._rules.paths import MESSAGES_PATH
from .._rules.state import State
from ..errors import CorruptStore
from .contents import fetch_contents
from .journal_storage import JournalStorage
from .opening import latest_state

__all__ = ["Pinned", "Read", "Source", "pin", "settle"]

#: An object to archive: whether it is in the journal (else under the prefix), its name, its listed size.
Source = tuple[bool, str, int]
#: An object as read: its member name, source, bytes (None: gone when read) and their sha256 ("": not
#: hashed yet; the archive writer hashes it).
Read = tuple[str, Source, bytes | None, str]
#: Journal directories whose objects are numbered by the commit they belong to.
NUMBERED = ("log", "checkpoints", "audit")


async def pin(remote: JournalStorage) -> Pinned | None:
    """The newest committed state of our journal, every file of it indexed; None if there is none."""
    state = await latest_state(remote)
    if state is None or state.origin is not Origin.JOURNAL:
        return None
    await state.files.need_all()
    return Pinned(remote, state, journal_in_prefix=not remote.journal_moved)


@dataclass
class Pinned:
    """The state an export archives (see the module docstring)."""

    remote: JournalStorage
    state: State
    #: the journal lives under the store prefix (a bucket-root store): its objects are listed there
    journal_in_prefix: bool

    def select(self, names: dict[str, Source]) -> dict[str, Source]:
        """`names` without the objects of later states, with the ones this state needs but were not
        listed (sizes as recorded: read and settled like the others)."""
        kept = {m: s for m, s in names.items() if self._keeps(s)}
        for member, source in self._needed():
            kept.setdefault(member, source)
        return dict(sorted(kept.items()))

    def _keeps(self, source: Source) -> bool:
        in_journal, name, _ = source
        if self._is_journal(in_journal, name):
            return not self._is_later(name)
        found = classify(name)
        return found.kind not in (Kind.FILE, Kind.SIDECAR) or found.path in self.state.files

    def _needed(self) -> Iterable[tuple[str, Source]]:
        for path, record in self.state.files.items():
            yield store_member(path), (False, path, record.bytes)
            if record.has_meta:
                yield store_member(sidecar_name(path)), (False, sidecar_name(path), 0)
        yield store_member(MESSAGES_PATH), (False, MESSAGES_PATH, 0)
        member = store_member(HEAD_NAME) if self.journal_in_prefix else journal_member(HEAD_NAME)
        yield member, (not self.journal_in_prefix, HEAD_NAME, 0)

    def _is_journal(self, in_journal: bool, name: str) -> bool:
        return in_journal or (self.journal_in_prefix and name.startswith(JOURNAL_DIR + "/"))

    def _is_later(self, name: str) -> bool:
        """Whether journal object `name` is a commit record, checkpoint or audit segment after this state."""
        directory, _, stem = name[len(JOURNAL_DIR) + 1 :].partition("/")
        number = stem.split(".", 1)[0]
        return directory in NUMBERED and "/" not in stem and number.isdigit() and int(number) > self.state.seq

    async def settle(self, reads: list[Read]) -> list[Read]:
        """`reads` as this state holds them: each object hashed and checked (on a thread: it parses and
        hashes), replaced where a later save rewrote it."""
        settled = await asyncio.to_thread(lambda: [self._checked(_hashed(read)) for read in reads])
        stale = {read[1][1] for read, ok in zip(reads, settled, strict=True) if ok is None}
        wanted = {p: self.state.files[p] for p in stale}
        contents = await fetch_contents(self.remote, wanted, self.state) if wanted else {}
        out = [ok if ok is not None else self._fetched(read, contents) for read, ok in zip(reads, settled, strict=True)]
        return [read for read in out if read[2] is not None]

    def _checked(self, read: Read) -> Read | None:
        """`read` as this state holds it, or None if it is a file of the state whose bytes must be fetched."""
        _, (in_journal, name, _), data, sha = read
        if self._is_journal(in_journal, name):
            return _as(read, self._head()) if name == HEAD_NAME else read
        found = classify(name)
        if found.kind is Kind.FILE:
            return read if sha == self.state.files[name].sha256 else None
        if found.kind is Kind.SIDECAR:
            return _as(read, self._sidecar(found.path, data))
        if found.kind is Kind.MESSAGES:
            return _as(read, self._transcript(data))
        return read

    def _fetched(self, read: Read, contents: dict[str, bytes]) -> Read:
        member, source, _, _ = read
        return member, source, contents[source[1]], self.state.files[source[1]].sha256

    def _head(self) -> bytes:
        # the head a save of this state writes (its open hint too): the stored one, when it is current
        return encode(head_for(self.state.seq, self.state.checkpoint))

    def _sidecar(self, path: str, data: bytes | None) -> bytes | None:
        """The sidecar as read if it names this state's content of `path`, else as this state writes it."""
        record = self.state.files[path]
        try:
            if data is not None and decode_meta(data, expected_path=path).sha256 == record.sha256:
                return data
            meta = record.meta(path)
        except CorruptStore:
            return data  # an imported sidecar that never parsed: it goes as it is stored
        return None if meta is None else encode_meta(meta)

    def _transcript(self, data: bytes | None) -> bytes:
        try:
            if data is not None and decode_messages(data) == list(self.state.messages):
                return data
        except CorruptStore:
            pass  # replaced by this state's transcript below
        return encode_messages(self.state.messages)


def _hashed(read: Read) -> Read:
    member, source, data, _ = read
    return member, source, data, sha256_bytes(data) if data is not None else ""


def _as(read: Read, data: bytes | None) -> Read:
    """`read` holding `data` (hashed again only if it changed)."""
    member, source, before, _ = read
    if data is before:
        return read
    return member, source, data, sha256_bytes(data) if data is not None else ""


async def settle(pinned: Pinned | None, reads: list[Read]) -> list[Read]:
    """What an export archives of `reads`: without a pinned state, each object as read (one gone since
    it was listed, by a concurrent gc(), is left out)."""
    if pinned is None:
        return [read for read in reads if read[2] is not None]
    return await pinned.settle(reads)
