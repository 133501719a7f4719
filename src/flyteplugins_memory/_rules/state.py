"""Pure: a committed state of the store, built from a checkpoint and (usually) one commit record.

Its files are an `_rules.index.Files`: the checkpoint's index, loaded lazily, with the record's changes on top,
so building a state and deriving the next one cost O(changes), not O(files).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import CorruptStore, UnsafeStoreContent
from .formats import Evolving, refuse_to_overwrite
from .index import CheckpointFiles, Files
from .journal_objects import (
    EMPTY_CHECKPOINT,
    RECENT_COMMITS,
    Checkpoint,
    CommitInfo,
    CommitRecord,
    Delta,
    Origin,
)
from .paths import file_dir_clashes
from .transcript import as_committed

__all__ = ["State"]


def _refuse_clashes(files: Files, what: str) -> None:
    """Refuse a file and a directory of one name where it can be checked now: the whole state when its
    checkpoint is inline (small), else the record's own changes (parts are checked as they load)."""
    paths = files if not files.base.partitioned else [p for p, e in files.changes.items() if e is not None]
    clashes = file_dir_clashes(paths)
    if clashes:
        raise UnsafeStoreContent(f"{what} holds {clashes[0]!r} both as a file and as a directory")


@dataclass
class State:
    """A committed state of the store, together with the checkpoint its record is relative to."""

    seq: int
    checkpoint: Checkpoint
    files: Files
    messages: list[dict[str, Any]]
    audit_total: int
    #: audit events after the checkpoint, oldest first
    recent_audit: list[dict[str, Any]] = field(default_factory=list)
    recent_commits: list[str] = field(default_factory=list)
    origin: Origin = Origin.JOURNAL
    #: `time.monotonic()` when this state was last known to be the newest (-inf: never, e.g. a pinned
    #: commit); a save from a state known newest long ago re-reads the head first (see `_journal.commit`)
    observed_at: float = field(default_factory=time.monotonic)
    #: the commit the head hint was last known to name (-1: not known); a save one past it leaves the hint
    #: one commit behind (`_journal.commit.write_head`), which an open's first probe covers (`_journal.opening`)
    head_hint: int = -1
    #: what the commit that made this state did (None: a checkpoint, or a record without commit info)
    info: CommitInfo | None = None
    #: store-level extensions, carried into every record and checkpoint derived from this state
    ext: dict[str, Any] = field(default_factory=dict)
    #: the highest ``min_reader`` of the objects this state was read from, and who wrote that object
    min_reader: int = 0
    written_by: str = ""

    def __post_init__(self) -> None:
        self.messages = as_committed(self.messages)  # never changed in place: its fingerprints are kept

    @property
    def needs_save(self) -> bool:
        """Whether a save must run even without changes: the store is new, imported, or its journal is
        still where earlier versions kept it (the save moves it)."""
        return self.seq == 0 or self.origin is not Origin.JOURNAL

    def check_can_write(self, operation: str, where: str) -> None:
        """Raise `StoreFormatTooNew` if this state holds data this version must not write over."""
        refuse_to_overwrite(self.min_reader, self.written_by, operation, where)

    def unobserved(self) -> State:
        """This state, marked as not known to be the newest (a pinned or settled commit)."""
        self.observed_at = -math.inf
        return self

    @classmethod
    def at_checkpoint(cls, checkpoint: Checkpoint, source: Any = None) -> State:
        """The state a checkpoint holds; `source` is the `ObjectStorage` its parts are read from."""
        return cls.on_index(checkpoint, CheckpointFiles(checkpoint, source))

    @classmethod
    def on_index(cls, checkpoint: Checkpoint, index: CheckpointFiles) -> State:
        files = Files(index)
        _refuse_clashes(files, f"Checkpoint {checkpoint.seq}")
        messages = list(checkpoint.messages)
        state = cls(checkpoint.seq, checkpoint, files, messages, checkpoint.audit_total, [], list(checkpoint.commits))
        return state._versioned_as(checkpoint, checkpoint)

    @classmethod
    def from_record(cls, checkpoint: Checkpoint, index: CheckpointFiles, record: CommitRecord) -> State:
        """Apply a commit record's cumulative delta to its checkpoint (whose file index is `index`)."""
        delta = record.delta
        if record.checkpoint != checkpoint.seq or delta.keep > len(checkpoint.messages):
            raise CorruptStore(f"Commit {record.seq} does not fit checkpoint {checkpoint.seq}")
        files = Files(index, dict(delta.files))
        _refuse_clashes(files, f"Commit {record.seq}")
        messages = list(checkpoint.messages[: delta.keep]) + list(delta.append)
        total = checkpoint.audit_total + len(delta.audit)
        state = cls(record.seq, checkpoint, files, messages, total, list(delta.audit), list(delta.commits))
        state.info = record.info
        return state._versioned_as(record, checkpoint)

    def _versioned_as(self, newest: Evolving, checkpoint: Checkpoint) -> State:
        """Take the store-level extensions of the newest object (the checkpoint's, when the record has none
        of its own: a record written without them must not drop them), and the strictest ``min_reader``."""
        self.ext = dict(newest.ext or checkpoint.ext)
        strictest = max((newest, checkpoint), key=lambda obj: obj.min_reader)
        self.min_reader, self.written_by = strictest.min_reader, strictest.writer
        return self

    def on_checkpoint(self, checkpoint: Checkpoint, index: CheckpointFiles) -> State:
        """This state, re-based on `checkpoint` (which holds exactly it; `index` is its file index)."""
        copies = {"messages": list(self.messages), "ext": dict(self.ext)}
        return replace(
            self,
            checkpoint=checkpoint,
            files=Files(index),
            recent_audit=[],
            recent_commits=list(self.recent_commits),
            **copies,
        )

    def delta(self) -> Delta:
        """The cumulative delta from this state's checkpoint to this state: O(changes)."""
        base = self.checkpoint
        keep = len(base.messages)
        if self.messages[:keep] != base.messages:
            keep = 0
        return Delta(
            files=dict(self.files.changes),
            keep=keep,
            append=self.messages[keep:],
            audit=self.recent_audit,
            commits=self.recent_commits[-RECENT_COMMITS:],
        )

    def record(self) -> CommitRecord:
        """The commit record of this state, carrying the store-level extensions forward."""
        return CommitRecord(
            seq=self.seq,
            checkpoint=self.checkpoint.seq,
            checkpoint_stored=self.checkpoint != EMPTY_CHECKPOINT,
            delta=self.delta(),
            info=self.info,
            ext=self.ext,
            min_reader=self.min_reader,
        )

    def as_checkpoint(self, audit_segments: list[int], index: dict[str, Any]) -> Checkpoint:
        """This state as a checkpoint whose file index is `index` (``files`` inline, or ``parts`` and the
        partitioned ``format``: see `_journal.checkpoints`)."""
        return Checkpoint(
            seq=self.seq,
            messages=self.messages,
            audit_total=self.audit_total,
            audit_segments=audit_segments,
            legacy_audit_lines=self.checkpoint.legacy_audit_lines,
            commits=self.recent_commits[-RECENT_COMMITS:],
            ext=self.ext,
            min_reader=self.min_reader,
            **index,
        )
