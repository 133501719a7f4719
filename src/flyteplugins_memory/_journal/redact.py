"""Rewriting stored journal objects without the content-derived data a purge removes.

Commit records and checkpoints are written once and never changed by a save (docs/sync.md); they carry
content-derived data inline: a file entry's labels (``ext["metadata"]``) and attribution, the proposals
map (a draft's text, every proposal's labels) and the transcript (appended messages, a checkpoint's
messages). gc already overwrites records (tombstones); a purge does the same for what it redacts: every
record and checkpoint still stored (in this journal and in an old one a moved store left behind) that
holds redacted data is rewritten **in place**, same name, same ``seq``, same references to other files'
contents, audit events and commit info, with only the redacted places changed (see `Redaction`). A
partitioned checkpoint's parts are content-addressed, so a part that held the purged path's entry is cut
again under a new sha256, every checkpoint referencing it is rewritten to name the new part, and the old
part gets a purge marker before it is deleted: a reader holding the old reference gets `ContentPurged`
(refresh, or open again), never `CorruptStore` (`_rules.index.CheckpointFiles`).

Which places are rewritten is the data map's (`_rules.data_map.PLACES`): `HANDLED` names them, and a test keeps
the two in step.

Concurrent purges: every pass also applies the purges that the stored records' audit events name (a
path, or a message by the sha256 of its encoding: `purge_ledger`), each to the objects older than its
commit, and reads again when a purge committed while it ran, so a pass in another process that read an
object before this one rewrote it cannot write the purged data back for good.

Concurrent readers: an object is replaced by one write (atomic on every backend), so a reader sees the old
object or the redacted one, both valid. Stale handles keep what they hold in memory, but cannot write it
back: every purge makes a commit of its own (`_journal.purge`, `_api.upkeep.message_purge`), so a stale
handle's next save finds its slot taken and rebases onto the newest record, read from storage, and a
checkpoint it holds is read again when the record counts more purges than its state (`_rules.purge_count`;
the purging handle's own checkpoint takes the redaction in memory: `_handle.checkout.Checkout.redact_held`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .._rules.codecs import sha256_bytes, utc_timestamp
from .._rules.entries import FileEntry, Part, PartRef
from .._rules.index import load_part
from .._rules.journal_objects import Checkpoint, CommitRecord, encode
from .._rules.layout import JOURNAL_DIR, checkpoint_name, log_name, part_name
from .._rules.markers import Purged, encode_marker, purge_marker_name
from .._rules.metadata import EXT_KEY as METADATA
from .._rules.offload import parse_off_loop
from .._rules.proposals import EXT_MAP as PROPOSALS
from .._rules.purge_count import PURGED_FLAG
from .._rules.transcript import encode_message
from .._rules.ttl import is_expired
from ..storage._contract import ObjectStorage
from .retention import Inventory

#: The places of `_rules.data_map.PLACES` this module rewrites (a test checks every place that carries content,
#: labels or messages in a journal object is among them).
HANDLED = (
    "file entry (delta.files / files / part files)",
    "appended messages (delta.append) and the checkpoint transcript (messages)",
    "proposals map (ext.proposals)",
)
#: Journal objects read at once.
READ_BATCH = 64


@dataclass(frozen=True)
class Redaction:
    """What a purge removes from stored records and checkpoints.

    `path`: a purged path: its file entries' extensions (labels, ttl, record counts) become
    ``{"purged": true}`` (`_rules.purge_count.is_purged_entry`: no read returns their content); who wrote them
    and why stay (attribution is not content, and history, log and audit must agree on it); its proposals
    lose their content and labels (``"purged": true``).
    `messages`: message encodings (`_rules.transcript.encode_message`) mapped to the message that replaces each,
    wherever it sits in a stored transcript."""

    path: str | None = None
    actor: str = ""
    reason: str = ""
    messages: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    #: messages named by the sha256 of their encoding (`message_hash`): other purges' (`Ledger`)
    hashed: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    #: other purged paths, redacted as `path` is (other purges', `Ledger`)
    more_paths: frozenset[str] = frozenset()
    #: paths whose entries written with a ttl that ran out by `now` lose their labels (gc, `_api.upkeep.expiry`):
    #: their ``expires_at`` stays, so every reader still sees them expired
    expired: frozenset[str] = frozenset()
    now: float = 0.0

    def entry(self, path: str, entry: FileEntry | None) -> FileEntry | None:
        if entry is None:
            return entry
        purged = path == self.path or path in self.more_paths
        if path in self.expired and not purged:
            return _without_labels(entry) if is_expired(entry, self.now) else entry
        if not purged:
            return entry
        redacted = entry.model_copy(update={"ext": {PURGED_FLAG: True}})
        return entry if redacted == entry else redacted

    def paths(self) -> list[str]:
        """The paths whose entries this redaction may change."""
        return sorted({*self.expired, *self.more_paths, *([self.path] if self.path is not None else [])})

    def in_range(self, first: str, last: str) -> bool:
        """Whether a part holding paths `first` to `last` may hold an entry this redaction changes."""
        return any(first <= path <= last for path in self.paths())

    def files(self, files: Mapping[str, FileEntry | None]) -> dict[str, Any] | None:
        """`files` redacted, or None if nothing in them changes."""
        changed = {p: after for p in self.paths() if p in files and (after := self.entry(p, files[p])) is not files[p]}
        return {**files, **changed} if changed else None

    def with_ledger(self, ledger: Ledger, seq: int) -> Redaction:
        """This redaction, and the messages every purge of `ledger` committed after `seq` redacted (an
        object of `seq` holds what the store held before those purges)."""
        later = [(key, new) for at, key, new in ledger if seq < at]
        extra = {key: new for key, new in later if new is not None and key not in self.hashed}
        paths = frozenset(key for key, new in later if new is None) - self.more_paths - {self.path}
        if not extra and not paths:
            return self
        return replace(self, hashed={**self.hashed, **extra}, more_paths=self.more_paths | paths)

    def transcript(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        if not self.messages and not self.hashed:
            return None
        out, changed = [], False
        for message in messages:
            encoded = encode_message(message)
            replacement = self.messages.get(encoded)
            if replacement is None and self.hashed:
                replacement = self.hashed.get(message_hash(encoded))
            changed |= replacement is not None
            out.append(message if replacement is None else dict(replacement))
        return out if changed else None

    def ext(self, ext: dict[str, Any]) -> dict[str, Any] | None:
        found = ext.get(PROPOSALS)
        purged = {*self.more_paths, *([self.path] if self.path is not None else [])}
        if not purged or not isinstance(found, dict):
            return None
        proposals, changed = dict(found), False
        for proposal_id, raw in found.items():
            if isinstance(raw, dict) and raw.get("path") in purged and (redacted := redact_proposal(raw)) != raw:
                proposals[proposal_id], changed = redacted, True
        return {**ext, PROPOSALS: proposals} if changed else None


def _without_labels(entry: FileEntry) -> FileEntry:
    """An expired entry without its labels (the rest of its ``ext``, its expiry included, stays)."""
    if METADATA not in entry.ext:
        return entry
    return entry.model_copy(update={"ext": {k: v for k, v in entry.ext.items() if k != METADATA}})


def redact_proposal(raw: dict[str, Any]) -> dict[str, Any]:
    """A stored proposal without its content and labels (what it was stays: its sha256 and size)."""
    if "content" not in raw and not raw.get("metadata"):
        return raw
    kept = {k: v for k, v in raw.items() if k not in ("content", "metadata")}
    return {**kept, PURGED_FLAG: True}


@dataclass
class Rewritten:
    """What one journal's rewrite did: objects rewritten and written anew, old parts removed."""

    objects: int = 0
    bytes: int = 0
    #: old part sha256 -> the reference that replaces it (itself when the part needs no cut)
    parts: dict[str, PartRef] = field(default_factory=dict)
    #: the parts cut again: new sha256 -> bytes (written before the checkpoints naming them)
    cut: dict[str, bytes] = field(default_factory=dict)
    #: the parts they replace: old sha256 -> size
    replaced: dict[str, int] = field(default_factory=dict)


def journal_objects(inventory: Inventory) -> list[str]:
    """The names of the commit records (not tombstones) and checkpoints `inventory` lists."""
    records = [log_name(s) for s in inventory.live_records(max(inventory.records, default=0))]
    return records + [checkpoint_name(s) for s in sorted(inventory.checkpoints)]


async def rewrite_journal(
    journal: ObjectStorage,
    inventory: Inventory,
    redaction: Redaction,
    *,
    stored: list[tuple[str, bytes]] | None = None,
) -> Rewritten:
    """Rewrite every commit record and checkpoint `inventory` lists that holds what `redaction` removes;
    cut again the parts of partitioned checkpoints that hold the purged path. `stored`: those objects as
    the caller read them already (`journal_objects`), else they are read here."""
    done = Rewritten()
    for _ in range(SETTLE_ROUNDS):
        newest = max(inventory.records, default=0)
        if stored is None:
            stored = await read_all(journal, journal_objects(inventory))
        ledger = purge_ledger(stored)
        out: dict[str, bytes] = {}
        for name, data in stored:
            applied = redaction.with_ledger(ledger, _seq_of(name))
            if (redacted := await redact_object(journal, name, data, applied, done)) is not None:
                out[name] = redacted
        new_parts = {part_name(sha): data for sha, data in done.cut.items()}
        await journal.write_many(new_parts)  # before the checkpoints that name them
        await journal.write_many(out)
        done.objects += len(out) + len(new_parts)
        done.bytes += sum(map(len, out.values())) + sum(map(len, new_parts.values()))
        # A purge elsewhere (another process) that committed after this pass read may have rewritten an
        # object before this pass wrote it over: read again, its redaction now in the ledger.
        inventory = Inventory.of(await journal.stat(JOURNAL_DIR))
        if not await _purge_after(journal, inventory, newest):
            break
        stored = None
    return done


#: An audit event's field naming the message a purge redacted, by `message_hash`, and what replaced it.
PURGED_MESSAGE = "purged_message"
#: Passes of one rewrite at most, each after a purge elsewhere committed during the one before.
SETTLE_ROUNDS = 4
#: Purges committed in a journal: (the commit, then `message_hash` of a message and what replaced it, or a
#: purged path and None).
Ledger = list[tuple[int, str, dict[str, Any] | None]]


def message_hash(encoded: str) -> str:
    """The sha256 of a message's encoding (`_rules.transcript.encode_message`): what a purge's audit names."""
    return sha256_bytes(encoded.encode("utf-8"))


def ledger_field(messages: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The audit event field of a purge of `messages` (encoding -> replacement): every later rewrite pass
    of the journal redacts them too in objects older than the purge (`purge_ledger`), so a pass another
    process made at the same time cannot bring them back (`rewrite_journal`)."""
    if not messages:
        return {}
    return {PURGED_MESSAGE: [{"sha256": message_hash(e), "to": new} for e, new in sorted(messages.items())]}


def purge_ledger(stored: list[tuple[str, bytes]]) -> Ledger:
    """The purges the commit records among `stored` hold, by their audit events (op ``purge``): a path's
    (no ``message`` or ``record`` index) and the messages a message purge names (`ledger_field`), each at
    the first record holding its event: the purge's commit (a record's events are those since its
    checkpoint)."""
    first: dict[tuple[str, str, str], tuple[int, dict[str, Any] | None]] = {}
    for name, data in stored:
        if not name.startswith(f"{JOURNAL_DIR}/log/") or b'"purge"' not in data:
            continue
        seq = _seq_of(name)
        for event in _events(data):
            if event.get("op") != "purge":
                continue
            when = str(event.get("ts", ""))  # with the key: one purge's event, in later records too
            found: list[tuple[str, dict[str, Any] | None]] = []
            if "message" not in event and "record" not in event and isinstance(event.get("path"), str):
                found.append((event["path"], None))
            found += [(e["sha256"], e["to"]) for e in event.get(PURGED_MESSAGE) or [] if _names_message(e)]
            for key, new in found:
                ident = (key, when, "path" if new is None else "message")
                if ident not in first or seq < first[ident][0]:
                    first[ident] = (seq, new)
    return [(seq, key, new) for (key, _, _), (seq, new) in sorted(first.items())]


def _names_message(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and isinstance(entry.get("to"), dict)


def _events(data: bytes) -> list[dict[str, Any]]:
    try:
        body = json.loads(data)
        events = body["delta"]["audit"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _seq_of(name: str) -> int:
    """The seq in a record's or checkpoint's name (-1 for any other object)."""
    stem = name.rsplit("/", 1)[-1].split(".", 1)[0]
    return int(stem) if stem.isdigit() else -1


async def _purge_after(journal: ObjectStorage, inventory: Inventory, seq: int) -> bool:
    """Whether a purge committed after commit `seq` (its record among those `inventory` lists)."""
    later = [log_name(s) for s in inventory.live_records(max(inventory.records, default=0)) if s > seq]
    for _, data in await read_all(journal, later):
        try:
            if json.loads(data).get("info", {}).get("kind") == "purge":
                return True
        except (ValueError, AttributeError):
            continue
    return False


async def redact_object(
    journal: ObjectStorage, name: str, data: bytes, redaction: Redaction, done: Rewritten
) -> bytes | None:
    """Commit record or checkpoint `name` of `journal` (its bytes: `data`) without what `redaction`
    removes, or None if it holds none of it (or is no record or checkpoint of ours: a marker, a newer
    format, a damaged object). A checkpoint's parts that hold it are cut again into `done` (not written)."""
    try:
        if name.startswith(f"{JOURNAL_DIR}/log/"):
            record: CommitRecord = await parse_off_loop(CommitRecord, data, name)
            redacted: CommitRecord | Checkpoint | None = _record(record, redaction)
        elif name.startswith(f"{JOURNAL_DIR}/checkpoints/"):
            checkpoint: Checkpoint = await parse_off_loop(Checkpoint, data, name)
            redacted = await _checkpoint(journal, checkpoint, redaction, done)
        else:
            return None
    except ValueError:
        return None  # a marker, a newer format or a damaged object: it names no content of ours
    return None if redacted is None else encode(redacted)


def part_holds(data: bytes, redaction: Redaction) -> bool:
    """Whether index part `data` holds an entry `redaction` changes (a part that does not parse: no)."""
    try:
        part = Part.model_validate_json(data)
    except ValueError:
        return False
    return redaction.files(part.files) is not None


async def retire_parts(journal: ObjectStorage, done: Rewritten, path: str, actor: str, reason: str) -> tuple[int, int]:
    """Mark the parts `done` replaced as purged, then delete them; returns (objects, bytes) removed."""
    old = sorted(done.replaced)
    if not old:
        return 0, 0
    at = utc_timestamp()
    markers = {
        purge_marker_name(s): encode_marker(Purged(sha256=s, path=path, at=at, actor=actor, reason=reason)) for s in old
    }
    await journal.write_many(markers)
    await journal.remove_all([part_name(s) for s in old])
    return len(old), sum(done.replaced.values())


def _record(record: CommitRecord, redaction: Redaction) -> CommitRecord | None:
    delta_update: dict[str, Any] = {}
    if (files := redaction.files(record.delta.files)) is not None:
        delta_update["files"] = files
    if (append := redaction.transcript(record.delta.append)) is not None:
        delta_update["append"] = append
    update: dict[str, Any] = {}
    if delta_update:
        update["delta"] = record.delta.model_copy(update=delta_update)
    if (ext := redaction.ext(record.ext)) is not None:
        update["ext"] = ext
    return record.model_copy(update=update) if update else None


async def _checkpoint(
    journal: ObjectStorage, checkpoint: Checkpoint, redaction: Redaction, done: Rewritten
) -> Checkpoint | None:
    update: dict[str, Any] = {}
    if (files := redaction.files(checkpoint.files)) is not None:
        update["files"] = files
    if (messages := redaction.transcript(checkpoint.messages)) is not None:
        update["messages"] = messages
    if (ext := redaction.ext(checkpoint.ext)) is not None:
        update["ext"] = ext
    if checkpoint.parts and redaction.paths():
        refs = [await _part(journal, ref, redaction, done) for ref in checkpoint.parts]
        if refs != checkpoint.parts:
            update["parts"] = refs
    return checkpoint.model_copy(update=update) if update else None


async def _part(journal: ObjectStorage, ref: PartRef, redaction: Redaction, done: Rewritten) -> PartRef:
    """`ref`, or the reference of the part cut again without the purged path's data (cached by sha256)."""
    if not redaction.in_range(ref.first, ref.last):
        return ref
    if ref.sha256 in done.parts:
        return done.parts[ref.sha256]
    name = part_name(ref.sha256)
    data = (await journal.read_many([name])).get(name)
    if data is None:  # gone already (gc, or an earlier purge): nothing to cut
        done.parts[ref.sha256] = ref
        return ref
    part = load_part(data, ref, name)
    files = redaction.files(part.files)
    if files is None:
        done.parts[ref.sha256] = ref
        return ref
    cut = encode(Part(files=files, ext=part.ext, min_reader=part.min_reader))
    new = ref.model_copy(update={"sha256": sha256_bytes(cut), "bytes": len(cut)})
    done.parts[ref.sha256], done.cut[new.sha256], done.replaced[ref.sha256] = new, cut, ref.bytes
    return new


async def read_all(journal: ObjectStorage, names: list[str]) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for start in range(0, len(names), READ_BATCH):
        out += list((await journal.read_many(names[start : start + READ_BATCH])).items())
    return out


__all__ = [
    "HANDLED",
    "Redaction",
    "Rewritten",
    "journal_objects",
    "ledger_field",
    "message_hash",
    "part_holds",
    "purge_ledger",
    "redact_object",
    "redact_proposal",
    "retire_parts",
    "rewrite_journal",
    "rewriting",
]


#: One rewrite of a store's history at a time in this process and event loop (`rewriting`).
_REWRITES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def rewriting(remote: ObjectStorage) -> AsyncIterator[None]:
    """Hold while reading and rewriting a store's records and checkpoints: two purges of one store in this
    process (two handles, ``asyncio.gather``) would otherwise each read an object before the other wrote it,
    and the later write would bring back what the earlier one redacted. Purges in different processes are
    not serialized: each pass applies the purges the stored records name and reads again when one committed
    meanwhile (`rewrite_journal`, `purge_ledger`; docs/sync.md, "Two races are closed")."""
    locks = _REWRITES.setdefault(asyncio.get_running_loop(), {})
    async with locks.setdefault(remote.uri, asyncio.Lock()):
        yield
