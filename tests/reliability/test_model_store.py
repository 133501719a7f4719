"""Model of the whole store: every public operation, on three handles of one key, checked after every step
against a plain in-memory model (issue 23, item 3; DESIGN.md section 5b).

Rules: writes (text, JSON, bytes; with and without ``ttl`` and ``metadata``), ``set_metadata``, ``delete``,
``delete_prefix``, ``purge``, ``propose``/``accept``/``discard``, record and session appends, transcript
appends and ``compact_transcript``, ``restore``, ``set_read_only_prefixes`` (handle 0 is the trusted one),
``set_retention``, ``gc``, clock advances past every ttl, ``save``/``refresh``/``revert``, ``export`` then
``import_store`` into a new key, ``delete_store`` and re-creation of the key.

Invariants, after every step:
- nothing a save acknowledged is lost: a fresh handle reads exactly the model's files, transcript, record
  logs, sessions, proposals, read-only prefixes and retention policy, and every handle its own view;
- forgetting is total: no purged content or label, nor any expired one, is readable through a read path
  (reads, ``at``, ``history``/``read_version``, ``diff``, ``restore``, ``search``, ``report``, the audit,
  records, ``export``), and none is present in any stored object (the store prefix and the journal, listed
  with fsspec): purged content at once, expired content once gc has run;
- untrusted handles never change read-only content (a write there is refused, at once or at save);
- ``search`` agrees with a naive scan of each handle's view;
- ``history`` and ``log`` agree with the model's versions and commits.

Content strings are unique per write (``t<n>q<hex>``), so a byte scan of storage finds any copy.
Failures the machine finds stay as explicit tests in ``tests/reliability/test_model_regressions.py``.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from clock import Clock
from flyteplugins_memory import (
    CommitNotFound,
    ConcurrencyError,
    ContentPurged,
    InvalidTransition,
    MemoryStore,
    MemoryStoreError,
    ReadOnlyPath,
    StateCollected,
    StoreDeleted,
    StoreNotFound,
    VersionNotFound,
)
from flyteplugins_memory.testing._kit import objects_under
from reports import report

#: Defects of issue 23 that are still open on main: the single check each one would fail is skipped while
#: its name is here. Remove a name when its fix lands (``git log``).
OPEN_DEFECTS: dict[str, str] = {}
# MODEL_STORE_OPEN_DEFECTS adds names (comma-separated) to run the machine against an older tree;
# MODEL_STORE_FIXED_DEFECTS removes names, to see whether a fix has landed
OPEN_DEFECTS.update(dict.fromkeys(filter(None, os.environ.get("MODEL_STORE_OPEN_DEFECTS", "").split(",")), "env"))
for _fixed in filter(None, os.environ.get("MODEL_STORE_FIXED_DEFECTS", "").split(",")):
    OPEN_DEFECTS.pop(_fixed, None)

STRESS = bool(os.environ.get("FLYTEPLUGINS_MEMORY_STRESS"))
HANDLES = 3
TRUSTED = 0  # handle 0 is opened with trusted=True
KEEPS_VERSIONS = 1  # handle 1 keeps upstream's versions/ snapshots
TTL = timedelta(hours=1)
STEP = 2 * 3600.0  # a clock advance: past every ttl written before it
PATHS = ("a.txt", "notes/b.md", "notes/c.bin", "ro/d.md")
RO = "ro/"
LOGS = ("logs/ev", "ro/log")
SESSION = "s1"
ARCHIVE = "archive/transcript"
#: directories that hold record segments (their files are not the model's files)
SEGMENT_DIRS = ("logs/", "sessions/", "archive/", "ro/log/")
SEARCH_WORD = "alpha"
REDACTED = "[redacted]"
KINDS = ("text", "json", "bytes")

STEPS: Counter[str] = Counter()


def open_defect(name: str) -> bool:
    return name in OPEN_DEFECTS


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Val:
    """One committed or staged version of a file. Equal (as the merge compares) when bytes, labels and
    expiry are; `expiry` names the write that set the ttl (its time is `expires`)."""

    data: bytes
    metadata: tuple[tuple[str, Any], ...] = ()
    expiry: str | None = None
    kind: str = field(default="text", compare=False)
    token: str = field(default="", compare=False)
    labels: tuple[str, ...] = field(default=(), compare=False)
    expires: float | None = field(default=None, compare=False)
    actor: str = field(default="", compare=False)

    def expired(self, now: float) -> bool:
        return self.expires is not None and self.expires <= now

    def meta(self) -> dict[str, Any]:
        return dict(self.metadata)

    def needles(self) -> list[bytes]:
        found = [self.token.encode()] + [label.encode() for label in self.labels]
        if self.kind == "bytes":
            found.append(base64.b64encode(self.data))
        return found


@dataclass
class Prop:
    path: str
    content: str
    token: str
    metadata: tuple[tuple[str, Any], ...]
    status: str = "draft"


@dataclass
class Committed:
    """What storage must hold."""

    files: dict[str, Val] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    #: log -> segments, each (segment id, records), in commit order
    segments: dict[str, list[tuple[int, list[Any]]]] = field(default_factory=dict)
    proposals: dict[str, Prop] = field(default_factory=dict)
    read_only: tuple[str, ...] = ()
    retention: tuple[int | None, timedelta | None] = (None, None)

    def copy(self) -> Committed:
        return Committed(
            dict(self.files),
            list(self.messages),
            {k: list(v) for k, v in self.segments.items()},
            {k: replace(v) for k, v in self.proposals.items()},
            self.read_only,
            self.retention,
        )

    def records(self, log: str) -> list[Any]:
        return [r for _, recs in self.segments.get(log, []) for r in recs]

    def segment_records(self) -> dict[int, list[Any]]:
        return {sid: recs for segs in self.segments.values() for sid, recs in segs}


@dataclass
class Handle:
    store: MemoryStore
    base: Committed
    actor: str
    changes: dict[str, Val | None] = field(default_factory=dict)
    appended: list[str] = field(default_factory=list)
    records: dict[str, list[Any]] = field(default_factory=dict)
    #: segments of the base that a delete_prefix of this handle deletes at save
    dropped_segments: set[int] = field(default_factory=set)
    proposals: dict[str, Prop] = field(default_factory=dict)
    #: the segment files a delete_prefix of this handle deleted (to revert them)
    base_segment_paths: list[str] = field(default_factory=list)
    #: segment id -> its file, for the segments in `dropped_segments` (a conflict names the file)
    dropped_paths: dict[int, str] = field(default_factory=dict)

    def files(self, now: float) -> dict[str, Val]:
        merged: dict[str, Val | None] = {**self.base.files, **self.changes}
        return {p: v for p, v in merged.items() if v is not None and not v.expired(now)}

    def conflicts(self, committed: Committed) -> list[str]:
        files = [
            p
            for p, ours in self.changes.items()
            if committed.files.get(p) != self.base.files.get(p) and committed.files.get(p) != ours
        ]
        # a segment this handle deletes that another save rewrote since (a record purge): the delete
        # conflicts, as a file's would; one another save deleted too agrees with ours
        theirs, base = committed.segment_records(), self.base.segment_records()
        segments = [
            self.dropped_paths[sid] for sid in self.dropped_segments if sid in theirs and theirs[sid] != base.get(sid)
        ]
        return sorted(files + segments)

    def read_only_changes(self, prefixes: tuple[str, ...]) -> bool:
        touched = list(self.changes) + [f"{log}/x" for log, recs in self.records.items() if recs]
        touched += [
            f"{log}/x" for log, segs in self.base.segments.items() for sid, _ in segs if sid in self.dropped_segments
        ]
        return any(p.startswith(pre) for p in touched for pre in prefixes)

    def log_records(self, log: str) -> list[Any]:
        kept = [r for sid, recs in self.base.segments.get(log, []) if sid not in self.dropped_segments for r in recs]
        return kept + self.records.get(log, [])


def tolerant(rule_fn):
    """A rule whose handle needs a state a gc collected gets `StateCollected` (only after a gc): the handle
    is opened again, its unsaved changes lost (never acknowledged)."""

    @functools.wraps(rule_fn)
    def run(self, **kwargs):
        try:
            return rule_fn(self, **kwargs)
        except StateCollected:
            assert self.collected, "StateCollected without a gc"
            h = kwargs.get("h", TRUSTED)
            self.handles[h] = self._open(h)

    return run


def is_segment(path: str) -> bool:
    return path.startswith(SEGMENT_DIRS)


def forgotten_in(blob: bytes, needles: set[bytes]) -> list[bytes]:
    return [n for n in needles if n in blob]


class StoreModel(RuleBasedStateMachine):
    """The machine. `use` binds it to a backend and a clock first (the fixtures of the test running it)."""

    backend: ClassVar[Any] = None
    clock: ClassVar[Clock] = Clock()
    figures: ClassVar[Counter[str]] = Counter()

    @classmethod
    def use(cls, backend: Any, clock: Clock) -> None:
        cls.backend, cls.clock, cls.figures = backend, clock, Counter()

    def __init__(self) -> None:
        super().__init__()
        self.key = f"ms-{uuid.uuid4().hex[:10]}"
        self.generation = 0
        self.n = 0
        self.tmp = tempfile.mkdtemp(prefix="model_store_")
        #: the next invariant check walks every read path and scans storage (always on local disk;
        #: on S3 after the steps that forget something)
        self.deep = True
        self.clock.offset = 0.0
        self._start()

    def _start(self) -> None:
        MemoryStore.create(key=self.key)
        self.committed = Committed()
        self.versions: dict[str, list[Val | None]] = {}
        #: the sha256 of every content ever written (versions/ snapshots may name any of them)
        self.written: set[str] = set()
        #: every file-changing commit, oldest first: (paths written, paths deleted)
        self.commits: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        self.purged: list[Val] = []
        #: tokens of transcript messages and log records that purge_message / RecordLog.purge redacted
        self.purged_texts: set[str] = set()
        #: purged versions a stale handle's base still held when it saved (see OPEN_DEFECTS)
        self.stale_indexed: list[Val] = []
        #: expired versions that a gc run since their expiry had to remove from storage
        self.gc_cleared: list[Val] = []
        self.collected = False  # a gc may have collected old states (history is then a suffix)
        self.purges = 0
        #: paths purged that the store never held (no version of theirs)
        self.purged_unheld: set[str] = set()
        self.deleted = False
        self.handles = [self._open(h) for h in range(HANDLES)]
        #: handles of a deleted generation of the key (kept across re-creation: they must never write into it)
        self.zombies: list[MemoryStore] = getattr(self, "zombies", [])
        self.seg = 0

    # -- helpers ----------------------------------------------------------------------------------

    def now(self) -> float:
        return self.clock()

    def token(self, kind: str) -> str:
        self.n += 1
        return f"t{self.n}q{uuid.uuid4().hex[:8]}{kind}"

    def _open(self, h: int) -> Handle:
        store = MemoryStore.get_or_create(key=self.key, trusted=h == TRUSTED, keep_versions=h == KEEPS_VERSIONS)
        return Handle(store, self.committed.copy(), f"h{h}")

    def all_vals(self) -> list[Val]:
        return [v for vs in self.versions.values() for v in vs if v is not None]

    def forgotten(self) -> list[Val]:
        """Versions no read path may show: purged, or expired by now."""
        now = self.now()
        return self.purged + [v for v in self.all_vals() if v.expired(now)]

    def forgotten_tokens(self) -> set[str]:
        found = {v.token for v in self.forgotten()} | {lab for v in self.forgotten() for lab in v.labels}
        return found | self.purged_texts

    def _commit_files(self, changes: dict[str, Val | None]) -> None:
        wrote, deleted = [], []
        for path, val in changes.items():
            self.versions.setdefault(path, []).append(val)
            if val is None:
                self.committed.files.pop(path, None)
                deleted.append(path)
            else:
                self.committed.files[path] = val
                wrote.append(path)
        if wrote or deleted:
            self.commits.append((tuple(sorted(wrote)), tuple(sorted(deleted))))

    def _model_save(self, h: int) -> None:
        """Apply handle h's unsaved changes to the model (its save committed)."""
        handle = self.handles[h]
        c = self.committed
        self._commit_files(handle.changes)
        c.messages += handle.appended
        for log, segs in c.segments.items():
            c.segments[log] = [s for s in segs if s[0] not in handle.dropped_segments]
        for log, recs in handle.records.items():
            if recs:
                self.seg += 1
                c.segments.setdefault(log, []).append((self.seg, list(recs)))
        c.proposals.update({k: replace(v) for k, v in handle.proposals.items()})
        self.handles[h] = Handle(handle.store, c.copy(), handle.actor)

    def _save(self, h: int) -> None:
        """Save handle h as the model predicts: refused (conflict, read-only), or committed."""
        handle = self.handles[h]
        dirty = handle.store.has_unsaved_changes()
        self.stale_indexed += [v for v in handle.base.files.values() if v in self.purged]
        if handle.changes or handle.appended or any(handle.records.values()) or handle.proposals:
            assert dirty, "the model holds unsaved changes the handle does not"
        if handle.read_only_changes(self.committed.read_only):
            with pytest.raises(ReadOnlyPath):
                handle.store.save()
            self._drop_read_only(h)
            self._save(h)
            return
        conflicting = handle.conflicts(self.committed)
        if conflicting:
            with pytest.raises(ConcurrencyError) as refused:
                handle.store.save()
            assert sorted(set(refused.value.paths) - {"messages.json"}) == conflicting
            return
        handle.store.save()
        if dirty:
            self._model_save(h)

    def _drop_read_only(self, h: int) -> None:
        """A save refused with ReadOnlyPath: drop what lies in the read-only prefixes (revert the files,
        discard the logs' records); the handle's other changes must then save."""
        handle = self.handles[h]
        prefixes = self.committed.read_only
        paths = [p for p in handle.changes if p.startswith(prefixes)]
        if paths:
            handle.store.revert(paths)
            for p in paths:
                del handle.changes[p]
        for log in [log for log in handle.records if (log + "/").startswith(prefixes)]:
            handle.store.records(log).discard_unsaved()
            del handle.records[log]
        ro_segments = {
            sid for log in LOGS if (log + "/").startswith(prefixes) for sid, _ in handle.base.segments.get(log, [])
        }
        if handle.dropped_segments & ro_segments:  # a delete_prefix of a log's segments there
            handle.store.revert([p for p in handle.base_segment_paths if p.startswith(prefixes)])
            handle.dropped_segments -= ro_segments
            handle.dropped_paths = {s: p for s, p in handle.dropped_paths.items() if s in handle.dropped_segments}

    def _settle(self, h: int) -> Handle:
        """Save handle h (a conflict: refresh, dropping the conflicting changes, and save again), then
        refresh it onto the newest state: operations that commit at once start from there."""
        self._save(h)
        if self.handles[h].conflicts(self.committed):
            self._refresh(h)
            self._save(h)
        self._refresh(h)
        return self.handles[h]

    def _refresh(self, h: int) -> None:
        handle = self.handles[h]
        dropped = handle.conflicts(self.committed)
        assert handle.store.refresh() == dropped
        kept = {p: c for p, c in handle.changes.items() if p not in dropped}
        self.handles[h] = Handle(
            handle.store,
            self.committed.copy(),
            handle.actor,
            kept,
            handle.appended,
            handle.records,
            set(),
            handle.proposals,
        )
        # segments a delete_prefix dropped stay dropped only if still committed and not rewritten since
        # (a refresh drops a conflicting delete as it drops a conflicting file change): re-derive
        committed = self.committed.segment_records()
        self.handles[h].dropped_segments = {
            sid for sid in handle.dropped_segments if sid in committed and handle.dropped_paths[sid] not in dropped
        }
        self.handles[h].dropped_paths = {
            s: p for s, p in handle.dropped_paths.items() if s in self.handles[h].dropped_segments
        }

    def _metadata(self, choice: int) -> tuple[tuple[tuple[str, Any], ...], tuple[str, ...]]:
        if choice == 0:
            return (), ()
        label = self.token("L")
        return tuple(sorted({"l": label, "k": "x" if choice == 1 else "y"}.items())), (label,)

    # -- rules: writes ----------------------------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS), kind=st.sampled_from(KINDS),
          ttl=st.booleans(), meta=st.integers(0, 2))  # fmt: skip
    @tolerant
    def write(self, h: int, path: str, kind: str, ttl: bool, meta: int) -> None:
        handle = self.handles[h]
        tok = self.token(kind[0])
        metadata, labels = self._metadata(meta)
        kwargs: dict[str, Any] = {
            "actor": handle.actor,
            "reason": f"write {self.n}",
            "metadata": dict(metadata) or None,
        }
        if ttl:
            kwargs["ttl"] = TTL
        if kind == "text":
            data = f"{tok} {SEARCH_WORD} words".encode()
            call = lambda: handle.store.write_text(path, data.decode(), **kwargs)  # noqa: E731
        elif kind == "json":
            obj = {"note": f"{tok} {SEARCH_WORD}"}
            data = json.dumps(obj, indent=2, sort_keys=True, default=str).encode()
            call = lambda: handle.store.write_json(path, obj, **kwargs)  # noqa: E731
        else:
            data = b"\xff\xfe" + tok.encode() + b"\x00"
            call = lambda: handle.store.write_bytes(path, data, **kwargs)  # noqa: E731
        if path.startswith(handle.base.read_only):
            with pytest.raises(ReadOnlyPath):
                call()
            return
        expires = self.now() + TTL.total_seconds() if ttl else None
        call()
        self.written.add(sha(data))
        handle.changes[path] = Val(data, metadata, tok if ttl else None, kind, tok, labels, expires, handle.actor)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS), kind=st.sampled_from(KINDS),
          ttl=st.booleans(), meta=st.integers(0, 2))  # fmt: skip
    @tolerant
    def write_and_save(self, h: int, path: str, kind: str, ttl: bool, meta: int) -> None:
        """A write saved at once: committed content (what purge, expiry and history act on) is common."""
        self.write(h=h, path=path, kind=kind, ttl=ttl, meta=meta)
        self._save(h)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS), meta=st.integers(0, 2))
    @tolerant
    def set_metadata(self, h: int, path: str, meta: int) -> None:
        handle = self.handles[h]
        current = handle.files(self.now()).get(path)
        if current is not None and current.expires is not None and open_defect("ttl_set_metadata"):
            return
        metadata, labels = self._metadata(meta)
        if path.startswith(handle.base.read_only):
            with pytest.raises(ReadOnlyPath):
                handle.store.set_metadata(path, dict(metadata) or None, actor=handle.actor)
            return
        if current is not None and current in self.purged:  # a stale handle: the content it keeps is purged
            try:
                handle.store.set_metadata(path, dict(metadata) or None, actor=handle.actor)
            except ContentPurged:
                return  # it had to fetch the bytes
            # it held them: its save conflicts with the purge (and must not store them again)
            handle.changes[path] = replace(current, metadata=metadata, labels=labels, actor=handle.actor)
            return
        result = handle.store.set_metadata(path, dict(metadata) or None, actor=handle.actor)
        assert (result is None) == (current is None)
        if current is not None:
            # the content's token stays; the old labels are part of this version's past
            handle.changes[path] = replace(current, metadata=metadata, labels=labels, actor=handle.actor)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS))
    @tolerant
    def delete(self, h: int, path: str) -> None:
        handle = self.handles[h]
        if path.startswith(handle.base.read_only):
            with pytest.raises(ReadOnlyPath):
                handle.store.delete(path, actor=handle.actor)
            return
        existed = path in handle.files(self.now())
        assert handle.store.delete(path, actor=handle.actor) == existed
        if not existed:
            return
        if path in handle.base.files:
            handle.changes[path] = None
        else:
            handle.changes.pop(path, None)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), prefix=st.sampled_from(["notes", "logs", "ro"]))
    @tolerant
    def delete_prefix(self, h: int, prefix: str) -> None:
        handle = self.handles[h]
        now = self.now()
        files = [p for p in handle.files(now) if p.startswith(prefix + "/")]
        logs = [log for log in LOGS if log.startswith(prefix + "/")]
        segments = [
            sid for log in logs for sid, _ in handle.base.segments.get(log, []) if sid not in handle.dropped_segments
        ]
        if (prefix + "/").startswith(handle.base.read_only) and (files or segments):
            with pytest.raises(ReadOnlyPath):  # a prefix that holds read-only files
                handle.store.delete_prefix(prefix, actor=handle.actor)
            return
        deleted = handle.store.delete_prefix(prefix, actor=handle.actor)
        handle.base_segment_paths += [p for p in deleted if is_segment(p)]
        assert sorted(p for p in deleted if not is_segment(p)) == sorted(files)
        assert len([p for p in deleted if is_segment(p)]) == len(segments)
        for log in logs:  # a log's segment files sort in its order (their names start with the time)
            sids = [sid for sid, _ in handle.base.segments.get(log, []) if sid not in handle.dropped_segments]
            files_of_log = sorted(p for p in deleted if is_segment(p) and p.rpartition("/")[0] == log)
            assert len(files_of_log) == len(sids)
            handle.dropped_paths.update(zip(sids, files_of_log, strict=True))
        for path in files:
            if path in handle.base.files:
                handle.changes[path] = None
            else:
                handle.changes.pop(path, None)
        handle.dropped_segments |= set(segments)
        for log in logs:
            handle.records.pop(log, None)

    # -- rules: transcript, records, sessions -------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1))
    @tolerant
    def append(self, h: int) -> None:
        tok = self.token("m")
        self.handles[h].store.append({"role": "user", "content": tok})
        self.handles[h].appended.append(tok)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), log=st.sampled_from([*LOGS, "sessions/" + SESSION]))
    @tolerant
    def record(self, h: int, log: str) -> None:
        handle = self.handles[h]
        if log.startswith(RO) and open_defect("records_read_only"):
            return
        tok = self.token("r")
        if log.startswith("sessions/"):
            record: Any = {"role": "user", "content": tok}
            call = lambda: handle.store.session(SESSION).append(record)  # noqa: E731
        else:
            record = {"tok": tok}
            call = lambda: handle.store.records(log).append(record)  # noqa: E731
        if (log + "/").startswith(handle.base.read_only):
            with pytest.raises(ReadOnlyPath):
                call()
            return
        call()
        handle.records.setdefault(log, []).append(record)

    @precondition(lambda self: not self.deleted and self.committed.messages)
    @rule(h=st.integers(0, HANDLES - 1), pick=st.integers(0, 50))
    @tolerant
    def purge_message(self, h: int, pick: int) -> None:
        handle = self._settle(h)
        messages = self.committed.messages
        if not messages:
            return
        index = pick % len(messages)
        old = messages[index]
        handle.store.purge_message(index, actor=handle.actor, reason="redact")
        self.committed.messages = [REDACTED if m == old else m for m in messages]
        if old != REDACTED:
            self.purged_texts.add(old)
        self.handles[h] = Handle(handle.store, self.committed.copy(), handle.actor)
        self.deep = True

    @precondition(lambda self: not self.deleted and any(self.committed.segments.values()))
    @rule(h=st.integers(0, HANDLES - 1), log=st.sampled_from([*LOGS, "sessions/" + SESSION, ARCHIVE]),
          pick=st.integers(0, 50))  # fmt: skip
    @tolerant
    def purge_record(self, h: int, log: str, pick: int) -> None:
        handle = self._settle(h)
        records = self.committed.records(log)
        if not records:
            return
        index = pick % len(records)
        if (log + "/").startswith(self.committed.read_only):
            with pytest.raises(ReadOnlyPath):
                handle.store.records(log).purge(index, actor=handle.actor)
            return
        old = records[index]
        handle.store.records(log).purge(index, actor=handle.actor, reason="redact")
        new: Any = {"role": old["role"], "content": REDACTED} if isinstance(old, dict) and "role" in old else REDACTED
        seen, segments = 0, []
        for sid, recs in self.committed.segments[log]:  # new lists: handles' bases keep what they saw
            kept = list(recs)
            if seen <= index < seen + len(recs):
                kept[index - seen] = new
            segments.append((sid, kept))
            seen += len(recs)
        self.committed.segments[log] = segments
        text = (old.get("content") or old.get("tok")) if isinstance(old, dict) else old
        if text != REDACTED:
            self.purged_texts.add(text)
        self.handles[h] = Handle(handle.store, self.committed.copy(), handle.actor)
        self.deep = True

    @precondition(lambda self: not self.deleted and self.committed.messages)
    @rule(h=st.integers(0, HANDLES - 1), keep=st.integers(0, 2))
    @tolerant
    def compact_transcript(self, h: int, keep: int) -> None:
        handle = self._settle(h)
        messages = self.committed.messages
        point = max(0, len(messages) - keep)
        summary = self.token("s")
        result = handle.store.compact_transcript(lambda old: summary, keep_last=keep, actor=handle.actor)
        assert result.archived == point
        if point == 0:
            return
        self.seg += 1
        archived = [{"role": "user", "content": m} for m in messages[:point]]
        self.committed.segments.setdefault(ARCHIVE, []).append((self.seg, archived))
        self.committed.messages = [summary, *messages[point:]]
        self.handles[h] = Handle(handle.store, self.committed.copy(), handle.actor)

    # -- rules: proposals -----------------------------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS[:2] + PATHS[3:]), meta=st.integers(0, 2))
    @tolerant
    def propose(self, h: int, path: str, meta: int) -> None:
        handle = self.handles[h]
        tok = self.token("p")
        metadata, _labels = self._metadata(meta)
        content = f"{tok} {SEARCH_WORD} proposed"
        made = handle.store.propose(path, content, actor=handle.actor, metadata=dict(metadata) or None)
        handle.proposals[made.id] = Prop(path, content, tok, metadata)

    @precondition(lambda self: not self.deleted and self.committed.proposals)
    @rule(h=st.integers(0, HANDLES - 1), pick=st.integers(0, 50), accept=st.booleans())
    @tolerant
    def decide(self, h: int, pick: int, accept: bool) -> None:
        handle = self._settle(h)
        ids = sorted(self.committed.proposals)
        pid = ids[pick % len(ids)]
        prop = self.committed.proposals[pid]
        call = handle.store.accept if accept else handle.store.discard
        if prop.path.startswith(self.committed.read_only) and h != TRUSTED:
            with pytest.raises(ReadOnlyPath):
                call(pid, actor=handle.actor)
            return
        if prop.status == "discarded" or (accept and prop.status == "accepted"):
            with pytest.raises(InvalidTransition):
                call(pid, actor=handle.actor)
            return
        decided = call(pid, actor=handle.actor)
        assert decided.status == ("accepted" if accept else "discarded")
        if accept:
            labels = tuple(v for k, v in prop.metadata if k == "l")
            val = Val(prop.content.encode(), prop.metadata, None, "text", prop.token, labels, None, handle.actor)
            self.written.add(sha(val.data))
            self._commit_files({prop.path: val})
        prop.status = decided.status
        self.handles[h] = Handle(handle.store, self.committed.copy(), handle.actor)

    # -- rules: history -----------------------------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS), pick=st.integers(0, 50))
    @tolerant
    def restore(self, h: int, path: str, pick: int) -> None:
        handle = self._settle(h)
        entries = list(handle.store.history(path, limit=100))
        if not entries:
            return
        entry = entries[pick % len(entries)]
        now = self.now()
        live = handle.files(now)
        if entry.deleted:
            if path not in live or path.startswith(self.committed.read_only):
                return  # restoring a deletion of a missing path: nothing to model
            handle.store.restore(path, entry.version_id, actor=handle.actor, reason="restore")
            handle.changes[path] = None
            self._save(h)
            return
        candidates = [v for v in self.versions.get(path, []) if v is not None and sha(v.data) == entry.sha256]
        assert candidates, f"history of {path} names {entry.sha256[:12]}, a content it never had"
        forgotten = [v for v in candidates if v in self.purged or v.expired(now)]
        if forgotten:
            if any(v.expired(now) for v in forgotten) and open_defect("ttl_history"):
                return
            with pytest.raises(MemoryStoreError):
                handle.store.restore(path, entry.version_id, actor=handle.actor, reason="restore")
            assert not handle.store.has_unsaved_changes()
            return
        if path.startswith(self.committed.read_only):
            with pytest.raises(ReadOnlyPath):
                handle.store.restore(path, entry.version_id, actor=handle.actor, reason="restore")
            return
        meta = handle.store.restore(path, entry.version_id, actor=handle.actor, reason="restore")
        chosen = [v for v in candidates if v.meta() == meta.metadata]
        assert chosen, f"restore of {path} {entry.version_id} gave labels {meta.metadata}"
        handle.changes[path] = replace(chosen[-1], actor=handle.actor)
        self._save(h)

    # -- rules: forgetting ----------------------------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS))
    @tolerant
    def purge(self, h: int, path: str) -> None:
        handle = self._settle(h)
        if path.startswith(self.committed.read_only):
            with pytest.raises(ReadOnlyPath):
                handle.store.purge(path, actor=handle.actor, reason="purge")
            return
        handle.store.purge(path, actor=handle.actor, reason="purge")
        self.purges += 1
        if not self.versions.get(path):
            self.purged_unheld.add(path)
        self.deep = True
        if not open_defect("purge_audit"):  # an auditor tells a redaction from a delete
            events = MemoryStore.open(key=self.key).audit_tail(5)
            assert any(e.get("op") == "purge" and e.get("path") == path for e in events), events
        if path in self.committed.files:  # an expired file (gc has not deleted it yet) too
            self._commit_files({path: None})
        self.purged += [v for v in self.versions.get(path, []) if v is not None and v not in self.purged]
        for prop in self.committed.proposals.values() if not open_defect("purge_proposals") else ():
            # a purge redacts the path's drafts (discarded)
            if prop.path == path and prop.status == "draft":
                prop.status = "discarded"
        self.handles[h] = Handle(handle.store, self.committed.copy(), handle.actor)
        self._storage_has_nothing_forgotten()

    @precondition(lambda self: not self.deleted)
    @rule()
    def advance_clock(self) -> None:
        self.clock.offset += STEP
        self.deep = True

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), window=st.sampled_from([None, timedelta(0)]))
    @tolerant
    def gc(self, h: int, window: timedelta | None) -> None:
        handle = self.handles[h]
        now = self.now()
        expired = sorted(p for p, v in self.committed.files.items() if v.expired(now))
        try:
            result = handle.store.gc(window)
        except StateCollected:
            assert self.collected
            self.handles[h] = self._open(h)
            return
        assert sorted(result.expired) == expired
        if expired:
            self._commit_files(dict.fromkeys(expired))
        self.gc_cleared += [v for v in self.all_vals() if v.expired(now) and v not in self.gc_cleared]
        self.collected = True
        self.deep = True

    # -- rules: settings --------------------------------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(on=st.booleans())
    def set_read_only(self, on: bool) -> None:
        handle = self._settle(TRUSTED)
        wanted = (RO,) if on else ()
        assert handle.store.set_read_only_prefixes(wanted, actor=handle.actor, reason="lock") == wanted
        self.committed.read_only = wanted
        self.handles[TRUSTED] = Handle(handle.store, self.committed.copy(), handle.actor)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(1, HANDLES - 1))
    @tolerant
    def untrusted_cannot_change_read_only(self, h: int) -> None:
        from flyteplugins_memory import NotTrusted

        with pytest.raises(NotTrusted):
            self.handles[h].store.set_read_only_prefixes((), actor="intruder")

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), keep_last=st.sampled_from([None, 1, 3]), max_age=st.booleans())
    @tolerant
    def set_retention(self, h: int, keep_last: int | None, max_age: bool) -> None:
        handle = self._settle(h)
        age = timedelta(hours=1) if max_age else None
        handle.store.set_retention(keep_last=keep_last, max_age=age, actor=handle.actor)
        self.committed.retention = (keep_last, age)
        self.handles[h] = Handle(handle.store, self.committed.copy(), handle.actor)

    # -- rules: save, refresh, revert ---------------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1))
    @tolerant
    def save(self, h: int) -> None:
        try:
            self._save(h)
        except StateCollected:
            assert self.collected
            self.handles[h] = self._open(h)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1))
    @tolerant
    def refresh(self, h: int) -> None:
        self._refresh(h)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1), path=st.sampled_from(PATHS))
    @tolerant
    def revert(self, h: int, path: str) -> None:
        handle = self.handles[h]
        reverted = handle.store.revert([path])
        assert reverted == ([path] if path in handle.changes else [])
        handle.changes.pop(path, None)

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1))
    @tolerant
    def reopen(self, h: int) -> None:
        self.handles[h] = self._open(h)

    # -- rules: export, import, deletion ---------------------------------------------------------------

    @precondition(lambda self: not self.deleted)
    @rule(h=st.integers(0, HANDLES - 1))
    @tolerant
    def export_import(self, h: int) -> None:
        handle = self._settle(h)
        self.n += 1
        dest = os.path.join(self.tmp, f"e{self.n}.tar.gz")
        handle.store.export(dest)
        self.figures["exports"] += 1
        with open(dest, "rb") as f:
            archive = f.read()
        self._archive_has_nothing_forgotten(archive)
        copy_key = f"{self.key}-i{self.n}"
        MemoryStore.import_store(dest, key=copy_key, actor="importer")
        copy = MemoryStore.open(key=copy_key)
        self._matches_committed(copy)
        needles = self._stored_needles()
        leaks = {n: forgotten_in(d, needles) for n, d in self._stored().items()}
        assert not {n: v for n, v in leaks.items() if v}, "the imported store holds forgotten content"
        MemoryStore.delete_store(key=copy_key, trusted=True, actor="model")
        os.remove(dest)

    @precondition(lambda self: not self.deleted)
    @rule(trusted=st.booleans())
    def delete_store(self, trusted: bool) -> None:
        ro_files = [p for p in self.committed.files if p.startswith(self.committed.read_only)]
        # a record log's segments are files of the store too
        ro_files += [
            log for log in LOGS if (log + "/").startswith(self.committed.read_only) and self.committed.records(log)
        ]
        if ro_files and not trusted:
            with pytest.raises(ReadOnlyPath):
                MemoryStore.delete_store(key=self.key, actor="admin", reason="forget me")
            return
        assert MemoryStore.delete_store(key=self.key, trusted=trusted, actor="admin", reason="forget me")
        self.figures["deletions"] += 1
        self.deleted = True
        self.zombies = [h.store for h in self.handles]
        self.old_tokens = {v.token for v in self.all_vals()} | {lab for v in self.all_vals() for lab in v.labels}

    @precondition(lambda self: self.zombies)
    @rule(h=st.integers(0, HANDLES - 1))
    def stale_handle_of_a_deleted_store(self, h: int) -> None:
        zombie = self.zombies[h % len(self.zombies)]
        zombie.write_text("zombie.txt", "zombie " + self.token("z"))
        with pytest.raises(StoreDeleted):
            zombie.save()
        zombie.revert(["zombie.txt"])

    @precondition(lambda self: self.deleted)
    @rule()
    def recreate(self) -> None:
        if open_defect("recreate"):
            with pytest.raises(StoreDeleted):
                MemoryStore.create(key=self.key)
            self.generation += 1
            self.key = f"{self.key}-g{self.generation}"
        self._start()
        self.figures["recreations"] += 1

    # -- invariants -----------------------------------------------------------------------------------

    def _needles(self, vals: list[Val]) -> set[bytes]:
        return {n for v in vals for n in v.needles()}

    def _stored_needles(self) -> set[bytes]:
        """What no stored object may hold: purged content and labels, and expired ones a gc run has had to
        remove (less what an open defect still leaves)."""
        purged = self._needles(
            [v for v in self.purged if not (open_defect("purge_proposals") and v.token.endswith("p"))]
        )
        if open_defect("purge_labels"):
            purged -= {lab.encode() for v in self.purged for lab in v.labels}
        cleared = self._needles(self.gc_cleared)
        if open_defect("expired_labels_after_gc"):
            cleared -= {lab.encode() for v in self.gc_cleared for lab in v.labels}
        return purged | cleared | {t.encode() for t in self.purged_texts}

    def _stored(self) -> dict[str, bytes]:
        """Every object under the tree of stores of the storage root (every key and generation, the store
        prefixes and the journals beside them), read through the backend's own filesystem."""
        tree = self.backend.prefix("any").split("/v0/", 1)[0]
        return objects_under(self.backend.fs, tree)

    def _storage_has_nothing_forgotten(self) -> None:
        """No stored object (store prefix and journal) holds purged content or labels, nor expired
        content a gc run has had to remove."""
        needles = self._stored_needles()
        stored = self._stored()
        self.figures["scans"] += 1
        leaks = {n: forgotten_in(d, needles) for n, d in stored.items()}
        if open_defect("stale_save_search_orphan"):
            again = self._needles(self.stale_indexed)
            segments = [n for n in leaks if n.startswith(".journal/") and "/search/" in n]
            leaks.update({n: [x for x in leaks[n] if x not in again] for n in segments})
        assert not {n: v for n, v in leaks.items() if v}, f"forgotten content still stored: {leaks}"

    def _archive_has_nothing_forgotten(self, archive: bytes) -> None:
        """An export holds nothing forgotten: nothing purged, nothing expired (gc or not)."""
        needles = self._stored_needles()
        expired = [v for v in self.all_vals() if v.expired(self.now())]
        needles |= self._needles(expired)
        if open_defect("export_expired"):
            needles -= {lab.encode() for v in expired for lab in v.labels} - self._stored_needles()
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar.getmembers():
                f = tar.extractfile(member)
                data = f.read() if f else b""
                assert not forgotten_in(data, needles), f"export member {member.name} holds forgotten content"

    def _matches_committed(self, fresh: MemoryStore) -> None:
        """A fresh handle reads exactly what the model says storage holds."""
        now = self.now()
        c = self.committed
        live = {p: v for p, v in c.files.items() if not v.expired(now)}
        assert [p for p in fresh.list_paths() if not is_segment(p)] == sorted(live)
        for path, val in live.items():
            assert fresh.read_bytes(path) == val.data, path
            meta = fresh.get_meta(path)
            assert meta is not None and meta.metadata == val.meta(), path
            assert meta.updated_by == val.actor, (path, meta.updated_by, val.actor)
            if val.kind != "bytes":  # search agrees with a scan: a write's own word finds exactly it
                assert [hit.path for hit in fresh.search(val.token, limit=50)] == [path], path
        assert [m["content"] for m in fresh.messages] == c.messages
        for log in (*LOGS, ARCHIVE):
            assert fresh.records(log).read() == c.records(log), log
        session = fresh.session(SESSION).messages
        if not open_defect("sessions_messages"):  # a transcript-like view: a list, as store.messages
            assert isinstance(session, list), type(session)
        got = session() if callable(session) else session
        assert got == c.records("sessions/" + SESSION)
        proposals = {p.id: (p.path, p.status) for p in fresh.proposals()}
        assert proposals == {k: (v.path, v.status) for k, v in c.proposals.items()}
        assert fresh.persisted_read_only_prefixes() == c.read_only
        policy = fresh.retention
        assert (policy.keep_last, policy.max_age) == c.retention

    def _history_matches(self, fresh: MemoryStore) -> None:
        for path in PATHS:
            model = [("" if v is None else sha(v.data)) for v in self.versions.get(path, [])]
            listed = list(reversed(fresh.history(path, limit=500)))
            # versions/ snapshots (handle 1 keeps them) name every write of that handle, saved or not
            snapshots = [e for e in listed if not e.version_id.startswith("c")]
            purged = {sha(v.data) for v in self.purged}
            assert all(e.deleted or (e.sha256 in self.written and e.sha256 not in purged) for e in snapshots)
            entries = [e for e in listed if e.version_id.startswith("c")]
            got = [("" if e.deleted else e.sha256) for e in entries]
            want, have = _collapsed(model), _collapsed(got)
            if not want and path in self.purged_unheld and open_defect("history_purge_never_held"):
                continue
            if self.purges and open_defect("history_across_purge"):
                if have or not self.collected:  # a gc may have collected all of it
                    assert want[-1:] == have[-1:], path  # the newest version at least
            elif self.collected:
                assert want[len(want) - len(have) :] == have, path
            else:
                assert want == have, path
            if entries and not open_defect("history_attribution"):
                last = self.versions[path][-1]
                if last is not None and entries[-1].sha256 == sha(last.data) and last.actor:
                    assert entries[-1].actor == last.actor, path

    def _log_matches(self, fresh: MemoryStore) -> None:
        commits = list(reversed(fresh.log(limit=1000)))
        seqs = [c.seq for c in commits]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "log skips commits"
        got = [
            (tuple(p for p in c.wrote if not is_segment(p)), tuple(p for p in c.deleted if not is_segment(p)))
            for c in commits
        ]
        got = [g for g in got if g[0] or g[1]]
        if self.collected:
            assert self.commits[len(self.commits) - len(got) :] == got
        else:
            assert self.commits == got

    def _read_paths_show_nothing_forgotten(self, fresh: MemoryStore) -> None:
        """Every read path of a fresh handle: at(commit), history/read_version/diff/restore, search,
        report, the audit, proposals."""
        forgotten = self.forgotten()
        if not forgotten and not self.purged_texts:
            return
        tokens = self.forgotten_tokens()
        if open_defect("purge_labels"):
            tokens -= {lab for v in self.purged for lab in v.labels}

        def clean(text: str, where: str) -> None:
            found = [t for t in tokens if t in text]
            assert not found, f"{where} shows forgotten {found}"

        self.figures["read_audits"] += 1
        for commit in fresh.log(limit=1000):
            try:
                past = fresh.at(commit.seq)
            except CommitNotFound:
                continue
            for path in past.list_paths():
                with contextlib.suppress(ContentPurged):  # a typed refusal, never the content
                    clean(repr(past.read_bytes(path)), f"at({commit.seq}).read_bytes({path})")
                meta = past.get_meta(path)
                clean(json.dumps(meta.metadata if meta else {}), f"at({commit.seq}).get_meta({path})")
            for path in PATHS:
                meta = past.get_meta(path)
                clean(json.dumps(meta.metadata if meta else {}), f"at({commit.seq}).get_meta({path})")
            clean(json.dumps(past.messages), f"at({commit.seq}).messages")
        shas = {sha(v.data) for v in forgotten}
        for path in PATHS:
            for entry in fresh.history(path, limit=500):
                if entry.deleted or entry.sha256 not in shas:
                    continue
                expired_only = all(v not in self.purged for v in forgotten if sha(v.data) == entry.sha256)
                if expired_only and open_defect("ttl_history"):
                    continue
                with pytest.raises((VersionNotFound, ContentPurged)):
                    fresh.read_version_bytes(path, entry.version_id)
                with pytest.raises(MemoryStoreError):
                    fresh.diff(path, entry.version_id)
        for tok in {v.token for v in forgotten} | self.purged_texts:
            assert not fresh.search(tok, limit=50), f"search finds forgotten {tok}"
            assert not fresh.search(tok, limit=50, include_transcript=True)
        clean(json.dumps(fresh.messages), "messages")
        for log in (*LOGS, ARCHIVE, "sessions/" + SESSION):
            clean(json.dumps(fresh.records(log).read()), f"records({log})")
        clean(fresh.report(max_files=500, max_commits=500, max_events=1000), "report")
        clean(json.dumps(fresh.audit_tail(10000), default=str), "audit_tail")
        clean(json.dumps([p.metadata for p in fresh.proposals()]), "proposals")

    @invariant()
    def store_matches_the_model(self) -> None:
        STEPS[self.backend.name] += 1
        deep, self.deep = self.deep, self.backend.name == "local" or STRESS
        if self.deleted:
            self._deleted_store_is_gone()
            return
        fresh = MemoryStore.open(key=self.key)
        self._matches_committed(fresh)
        self._history_matches(fresh)
        self._log_matches(fresh)
        now = self.now()
        for h, handle in enumerate(self.handles):
            self._handle_matches(h, handle, now)
        if deep:
            self._storage_has_nothing_forgotten()
            self._read_paths_show_nothing_forgotten(fresh)

    def _handle_matches(self, h: int, handle: Handle, now: float) -> None:
        files = handle.files(now)
        store = handle.store
        try:
            assert [p for p in store.list_paths() if not is_segment(p)] == sorted(files), h
            for path, val in files.items():
                try:
                    assert store.read_bytes(path) == val.data, (h, path)
                except ContentPurged:
                    assert val in self.purged, (h, path)
            assert [m["content"] for m in store.messages] == handle.base.messages + handle.appended
            for log in LOGS:
                try:
                    assert store.records(log).read() == handle.log_records(log), (h, log)
                except ContentPurged:
                    assert self.purged_texts, (h, log)  # a stale handle: a record purge rewrote the segment
            hits = {hit.path for hit in store.search(SEARCH_WORD, limit=50)}
            assert hits == {p for p, v in files.items() if v.kind != "bytes"}, h
        except StateCollected:
            assert self.collected
            self.handles[h] = self._open(h)

    def _deleted_store_is_gone(self) -> None:
        with pytest.raises((StoreDeleted, StoreNotFound)):
            MemoryStore.open(key=self.key)
        if not open_defect("stale_delete"):
            assert self.key not in MemoryStore.list_keys()
        needles = {t.encode() for t in self.old_tokens}
        leaks = {n: forgotten_in(d, needles) for n, d in self._stored().items()}
        assert not {n: v for n, v in leaks.items() if v}, "a deleted store's content is still stored"

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def model_test(backend, clock: Clock, budget: tuple[int, int]) -> dict[str, int]:
    StoreModel.use(backend, clock)
    examples, steps = budget
    run_state_machine_as_test(
        StoreModel,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            # no explain phase (it traces every line on Python < 3.12); shrinking can be switched off while
            # developing the machine (MODEL_STORE_SHRINK=0)
            phases=[Phase.explicit, Phase.reuse, Phase.generate]
            + ([Phase.shrink] if os.environ.get("MODEL_STORE_SHRINK", "1") == "1" else []),
        ),
    )
    return dict(StoreModel.figures)


def _collapsed(items: list[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if not out or out[-1] != item:
            out.append(item)
    return out


#: (examples, steps) per backend: bounded in `make test`, long in `make test-slow`
BOUNDED = {"local": (int(os.environ.get("MS_EX", "12")), int(os.environ.get("MS_STEPS", "30"))), "s3": (3, 15)}
LONG = {"local": (60, 50), "s3": (6, 40)}  # about 4 and 3 minutes on a quiet 2-core machine


def test_the_whole_store_matches_the_model(durable_backend, clock):
    figures = model_test(durable_backend, clock, BOUNDED[durable_backend.name])
    report(f"model_store_{durable_backend.name}", {**figures, "checks": STEPS[durable_backend.name]})


@pytest.mark.slow
@pytest.mark.timeout(900)  # past the suite's 300 s: a long walk, bounded by LONG
def test_the_whole_store_matches_the_model_long(durable_backend, clock):
    figures = model_test(durable_backend, clock, LONG[durable_backend.name])
    report(f"model_store_long_{durable_backend.name}", {**figures, "checks": STEPS[durable_backend.name]})
