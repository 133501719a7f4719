"""Pure: the commit journal's records and the committed state they describe.

A store's history is a numbered log of commit records. Record ``n`` holds the *cumulative* change from
a checkpoint ``c < n`` to state ``n``, so any state is one checkpoint plus one record, and opening costs
O(1) requests. Checkpoints are full states written now and then to keep records small. Records are
untrusted input: parsing is strict and every path in them passes the same rules as caller paths.
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._errors import CorruptStore, InvalidPath, UnsafeStoreContent
from ._paths import file_dir_clashes, is_reserved, normalize_path
from ._records import MemoryMeta

FORMAT = 1
#: Commit ids remembered in each record, to recognise a retried save that had in fact landed.
RECENT_COMMITS = 64


class _Strict(BaseModel):
    # NaN and infinities in messages round-trip as upstream's json does (pydantic would write null)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, ser_json_inf_nan="constants")


class FileRecord(_Strict):
    """A live file: content hash and size, sidecar fields, and where its bytes are."""

    sha256: str
    bytes: int = Field(ge=0)
    updated_at: str = ""
    updated_by: str = ""
    reason: str = ""
    has_meta: bool = True
    #: True for files imported from an upstream-written store: the bytes are at the file's own path
    legacy: bool = False
    #: why the imported sidecar could not be read (then `meta` raises `CorruptStore`)
    meta_error: str = ""

    @field_validator("sha256")
    @classmethod
    def _hex_digest(cls, value: str) -> str:
        if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
            raise ValueError("sha256 must be 64 lowercase hex digits")
        return value

    def meta(self, path: str) -> MemoryMeta | None:
        if self.meta_error:
            raise CorruptStore(self.meta_error)
        if not self.has_meta:
            return None
        return MemoryMeta(path, self.sha256, self.updated_at, self.updated_by, self.reason, self.bytes)

    @classmethod
    def from_meta(cls, meta: MemoryMeta, *, legacy: bool = False) -> FileRecord:
        return cls(
            sha256=meta.sha256,
            bytes=meta.bytes,
            updated_at=meta.updated_at,
            updated_by=meta.updated_by,
            reason=meta.reason,
            legacy=legacy,
        )


def _checked_paths(files: dict[str, Any]) -> dict[str, Any]:
    for path in files:
        try:
            canonical = normalize_path(path)
        except InvalidPath as exc:
            raise ValueError(f"unsafe path {path!r}: {exc}") from exc
        if canonical != path or is_reserved(path):
            raise ValueError(f"unsafe path {path!r}")
    return files


#: File maps whose every path passes the caller-path rules (records are untrusted input).
SafeFiles = Annotated[dict[str, FileRecord], AfterValidator(_checked_paths)]
SafeChanges = Annotated[dict[str, FileRecord | None], AfterValidator(_checked_paths)]


class Delta(_Strict):
    """Cumulative change from a checkpoint: files (None = deleted), transcript, audit events, commit ids."""

    files: SafeChanges = {}
    keep: int = Field(default=0, ge=0)
    append: list[dict[str, Any]] = []
    audit: list[dict[str, Any]] = []
    commits: list[str] = []


class CommitRecord(_Strict):
    format: Literal[1] = FORMAT
    seq: int
    checkpoint: int
    #: False when the checkpoint is the empty start of a store we created, which has no object
    checkpoint_stored: bool = True
    delta: Delta


class Checkpoint(_Strict):
    """A full state. ``audit_segments`` name the checkpoints whose segment holds older audit events."""

    format: Literal[1] = FORMAT
    seq: int
    files: SafeFiles = {}
    messages: list[dict[str, Any]] = []
    audit_total: int = Field(default=0, ge=0)
    audit_segments: list[int] = []
    legacy_audit_lines: int = Field(default=0, ge=0)
    commits: list[str] = []


class Head(_Strict):
    """A hint, not the truth: the newest commit and checkpoint a writer knew of."""

    seq: int
    checkpoint: int


def apply_files(files: dict[str, FileRecord], changes: dict[str, FileRecord | None]) -> dict[str, FileRecord]:
    """`files` with `changes` applied (a None change deletes)."""
    out = dict(files)
    for path, entry in changes.items():
        if entry is None:
            out.pop(path, None)
        else:
            out[path] = entry
    return out


def parse(model: type[_Strict], data: bytes, name: str) -> Any:
    """Strictly parse a journal object; malformed or hostile content raises `CorruptStore`."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        error = UnsafeStoreContent if "unsafe path" in str(exc) else CorruptStore
        raise error(f"Journal object {name!r} is malformed: {exc}") from exc


def encode(record: _Strict) -> bytes:
    return record.model_dump_json(exclude_defaults=False).encode("utf-8")


def _refuse_clashes(files: dict[str, FileRecord], what: str) -> None:
    clashes = file_dir_clashes(files)
    if clashes:
        raise UnsafeStoreContent(f"{what} holds {clashes[0]!r} both as a file and as a directory")


class Origin(enum.Enum):
    """Where a state was read from: this version's journal, an upstream-written store (import), or the
    journal that earlier versions kept inside the store prefix (moved on the next save)."""

    JOURNAL = "journal"
    IMPORT = "import"
    OLD_JOURNAL = "old_journal"


@dataclass
class State:
    """A committed state of the store, together with the checkpoint its record is relative to."""

    seq: int
    checkpoint: Checkpoint
    files: dict[str, FileRecord]
    messages: list[dict[str, Any]]
    audit_total: int
    #: audit events after the checkpoint, oldest first
    recent_audit: list[dict[str, Any]] = field(default_factory=list)
    recent_commits: list[str] = field(default_factory=list)
    origin: Origin = Origin.JOURNAL
    #: `time.monotonic()` when this state was last known to be the newest (-inf: never, e.g. a pinned
    #: commit); a save from a state known newest long ago re-reads the head first (see `_commit`)
    observed_at: float = field(default_factory=time.monotonic)

    @property
    def needs_save(self) -> bool:
        """Whether a save must run even without changes: the store is new, imported, or its journal is
        still where earlier versions kept it (the save moves it)."""
        return self.seq == 0 or self.origin is not Origin.JOURNAL

    def unobserved(self) -> State:
        """This state, marked as not known to be the newest (a pinned or settled commit)."""
        self.observed_at = -math.inf
        return self

    @classmethod
    def at_checkpoint(cls, checkpoint: Checkpoint) -> State:
        files, messages = dict(checkpoint.files), list(checkpoint.messages)
        _refuse_clashes(files, f"Checkpoint {checkpoint.seq}")
        return cls(checkpoint.seq, checkpoint, files, messages, checkpoint.audit_total, [], list(checkpoint.commits))

    @classmethod
    def from_record(cls, checkpoint: Checkpoint, record: CommitRecord) -> State:
        """Apply a commit record's cumulative delta to its checkpoint."""
        delta = record.delta
        if record.checkpoint != checkpoint.seq or delta.keep > len(checkpoint.messages):
            raise CorruptStore(f"Commit {record.seq} does not fit checkpoint {checkpoint.seq}")
        files = apply_files(checkpoint.files, delta.files)
        _refuse_clashes(files, f"Commit {record.seq}")
        messages = list(checkpoint.messages[: delta.keep]) + list(delta.append)
        total = checkpoint.audit_total + len(delta.audit)
        return cls(record.seq, checkpoint, files, messages, total, list(delta.audit), list(delta.commits))

    def delta(self) -> Delta:
        """The cumulative delta from this state's checkpoint to this state."""
        base = self.checkpoint
        files: dict[str, FileRecord | None] = {p: e for p, e in self.files.items() if base.files.get(p) != e}
        files.update({p: None for p in base.files if p not in self.files})
        keep = len(base.messages)
        if self.messages[:keep] != base.messages:
            keep = 0
        return Delta(
            files=files,
            keep=keep,
            append=self.messages[keep:],
            audit=self.recent_audit,
            commits=self.recent_commits[-RECENT_COMMITS:],
        )

    def record(self) -> CommitRecord:
        stored = self.checkpoint != EMPTY_CHECKPOINT
        return CommitRecord(seq=self.seq, checkpoint=self.checkpoint.seq, checkpoint_stored=stored, delta=self.delta())

    def as_checkpoint(self, audit_segments: list[int]) -> Checkpoint:
        return Checkpoint(
            seq=self.seq,
            files=self.files,
            messages=self.messages,
            audit_total=self.audit_total,
            audit_segments=audit_segments,
            legacy_audit_lines=self.checkpoint.legacy_audit_lines,
            commits=self.recent_commits[-RECENT_COMMITS:],
        )


EMPTY_CHECKPOINT = Checkpoint(seq=0)
