"""Pure: the commit journal's records and the committed state they describe.

A store's history is a numbered log of commit records. Record ``n`` holds the *cumulative* change from
a checkpoint ``c < n`` to state ``n``, so any state is one checkpoint plus one record, and opening costs
O(1) requests. Checkpoints are full states written now and then to keep records small. Records are
untrusted input: parsing is strict and every path in them passes the same rules as caller paths.

Records, checkpoints and the head carry the evolution fields of `_format` (major ``format``, ``writer``,
``min_reader``, ``ext``); a field outside ``ext`` that this version does not know means a newer major and is
refused. Each record also holds its commit's `CommitInfo` (who, when, why, which paths), which `store.log()`
reads.
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._codecs import MemoryMeta
from ._errors import CorruptStore, InvalidPath, UnsafeStoreContent
from ._format import FORMAT, Evolving, ext_field, refuse_newer_format, refuse_to_overwrite, stamped
from ._paths import file_dir_clashes, is_reserved, normalize_path

__all__ = ["FORMAT"]  # re-exported: the major format of records, checkpoints and the head
#: Commit ids remembered in each record, to recognise a retried save that had in fact landed.
RECENT_COMMITS = 64


class _Strict(BaseModel):
    # NaN and infinities in messages round-trip as upstream's json does (pydantic would write null)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, ser_json_inf_nan="constants")


class FileEntry(_Strict):
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
    #: the commit that last wrote the file (None: written by a version before commit info, or not yet
    #: committed); bookkeeping, not content: see `same_write`
    commit: int | None = Field(default=None, ge=0, exclude_if=lambda value: value is None)
    #: per-file extensions: kept while the file is unchanged, dropped when this version rewrites it
    ext: dict[str, Any] = ext_field()

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

    def last_commit(self) -> int | None:
        """The commit that last wrote this file: 0 for a file untouched since an import, None if unknown."""
        return 0 if self.legacy and self.commit is None else self.commit

    @classmethod
    def from_meta(cls, meta: MemoryMeta, *, legacy: bool = False) -> FileEntry:
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
SafeFiles = Annotated[dict[str, FileEntry], AfterValidator(_checked_paths)]
SafeChanges = Annotated[dict[str, FileEntry | None], AfterValidator(_checked_paths)]
#: Paths a commit changed, each mapped to the commit that changed it before (None: none known).
SafeChain = Annotated[dict[str, Annotated[int, Field(ge=0)] | None], AfterValidator(_checked_paths)]


def same_write(a: FileEntry | None, b: FileEntry | None) -> bool:
    """Whether two records describe the same write, whichever commit each was stamped with."""
    if a is None or b is None:
        return a is b
    return a.model_copy(update={"commit": None}) == b.model_copy(update={"commit": None})


class CommitInfo(_Strict):
    """What one commit did, and who and why (`store.log()`); it describes that commit only."""

    #: "save", "create", or "import" (the history of a store written without a journal, checkpoint 0)
    kind: str = "save"
    #: UTC ISO-8601 with milliseconds
    time: str = ""
    actor: str = ""
    reason: str = ""
    wrote: SafeChain = {}
    deleted: SafeChain = {}
    #: messages added at the end of the transcript
    appended: int = Field(default=0, ge=0)
    #: the commit changed or removed committed messages (an edit in place, a redaction)
    rewrote: bool = False
    ext: dict[str, Any] = ext_field()

    def previous(self, path: str) -> int | None:
        """The commit that changed `path` before this one, if known."""
        return self.wrote[path] if path in self.wrote else self.deleted.get(path)


class Delta(_Strict):
    """Cumulative change from a checkpoint: files (None = deleted), transcript, audit events, commit ids."""

    files: SafeChanges = {}
    keep: int = Field(default=0, ge=0)
    append: list[dict[str, Any]] = []
    audit: list[dict[str, Any]] = []
    commits: list[str] = []


def _unless_none() -> Any:
    return Field(default=None, exclude_if=lambda value: value is None)


class CommitRecord(_Strict, Evolving):
    seq: int
    checkpoint: int
    #: False when the checkpoint is the empty start of a store we created, which has no object
    checkpoint_stored: bool = True
    delta: Delta
    #: None in records written before commit info existed
    info: CommitInfo | None = _unless_none()

    @model_validator(mode="after")
    def _chain_goes_back(self) -> CommitRecord:
        # `store.log(path=...)` follows these links: each must point to an earlier commit
        if self.info is not None:
            links = [*self.info.wrote.values(), *self.info.deleted.values()]
            if any(link is not None and link >= self.seq for link in links):
                raise ValueError(f"commit {self.seq} links a path to a commit that is not older")
        return self


class Checkpoint(_Strict, Evolving):
    """A full state. ``audit_segments`` name the checkpoints whose segment holds older audit events."""

    seq: int
    files: SafeFiles = {}
    messages: list[dict[str, Any]] = []
    audit_total: int = Field(default=0, ge=0)
    audit_segments: list[int] = []
    legacy_audit_lines: int = Field(default=0, ge=0)
    commits: list[str] = []
    #: checkpoint 0 of an imported store only: the import, shown by `store.log()` as its oldest commit
    info: CommitInfo | None = _unless_none()


class Head(_Strict, Evolving):
    """A hint, not the truth: the newest commit and checkpoint a writer knew of. Rewritten blindly after
    every commit, so its ``ext`` is not carried: durable extension data belongs in records."""

    seq: int
    checkpoint: int


def apply_files(files: dict[str, FileEntry], changes: dict[str, FileEntry | None]) -> dict[str, FileEntry]:
    """`files` with `changes` applied (a None change deletes)."""
    out = dict(files)
    for path, entry in changes.items():
        if entry is None:
            out.pop(path, None)
        else:
            out[path] = entry
    return out


def parse(model: type[_Strict], data: bytes, name: str) -> Any:
    """Strictly parse a journal object; a newer major format raises `StoreFormatTooNew`, malformed or
    hostile content `CorruptStore`.

    Strict first, the loose look at ``format`` only when that fails: the outcome is the same as looking
    first (``format`` is a literal, so a newer major never validates), without decoding a large checkpoint
    twice on every open."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        refuse_newer_format(data, name, FORMAT)
        error = UnsafeStoreContent if "unsafe path" in str(exc) else CorruptStore
        raise error(f"Journal object {name!r} is malformed: {exc}") from exc


def encode(record: _Strict) -> bytes:
    """The bytes of a journal object as this version writes it (its writer recorded, if it has one)."""
    written: BaseModel = stamped(record) if isinstance(record, Evolving) else record
    return written.model_dump_json(exclude_defaults=False).encode("utf-8")


def _refuse_clashes(files: dict[str, FileEntry], what: str) -> None:
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
    files: dict[str, FileEntry]
    messages: list[dict[str, Any]]
    audit_total: int
    #: audit events after the checkpoint, oldest first
    recent_audit: list[dict[str, Any]] = field(default_factory=list)
    recent_commits: list[str] = field(default_factory=list)
    origin: Origin = Origin.JOURNAL
    #: `time.monotonic()` when this state was last known to be the newest (-inf: never, e.g. a pinned
    #: commit); a save from a state known newest long ago re-reads the head first (see `_commit`)
    observed_at: float = field(default_factory=time.monotonic)
    #: what the commit that made this state did (None: a checkpoint, or a record without commit info)
    info: CommitInfo | None = None
    #: store-level extensions, carried into every record and checkpoint derived from this state
    ext: dict[str, Any] = field(default_factory=dict)
    #: the highest ``min_reader`` of the objects this state was read from, and who wrote that object
    min_reader: int = 0
    written_by: str = ""

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
    def at_checkpoint(cls, checkpoint: Checkpoint) -> State:
        files, messages = dict(checkpoint.files), list(checkpoint.messages)
        _refuse_clashes(files, f"Checkpoint {checkpoint.seq}")
        state = cls(checkpoint.seq, checkpoint, files, messages, checkpoint.audit_total, [], list(checkpoint.commits))
        return state._versioned_as(checkpoint, checkpoint)

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
        state = cls(record.seq, checkpoint, files, messages, total, list(delta.audit), list(delta.commits))
        state.info = record.info
        return state._versioned_as(record, checkpoint)

    def _versioned_as(self, newest: Evolving, checkpoint: Checkpoint) -> State:
        """Take the store-level extensions of the newest object, and the strictest ``min_reader``."""
        self.ext = dict(newest.ext)
        strictest = max((newest, checkpoint), key=lambda obj: obj.min_reader)
        self.min_reader, self.written_by = strictest.min_reader, strictest.writer
        return self

    def on_checkpoint(self, checkpoint: Checkpoint) -> State:
        """This state, re-based on `checkpoint` (which holds exactly it)."""
        copies = {"files": dict(self.files), "messages": list(self.messages), "ext": dict(self.ext)}
        return replace(self, checkpoint=checkpoint, recent_audit=[], recent_commits=list(self.recent_commits), **copies)

    def delta(self) -> Delta:
        """The cumulative delta from this state's checkpoint to this state."""
        base = self.checkpoint
        files: dict[str, FileEntry | None] = {p: e for p, e in self.files.items() if base.files.get(p) != e}
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

    def as_checkpoint(self, audit_segments: list[int]) -> Checkpoint:
        return Checkpoint(
            seq=self.seq,
            files=self.files,
            messages=self.messages,
            audit_total=self.audit_total,
            audit_segments=audit_segments,
            legacy_audit_lines=self.checkpoint.legacy_audit_lines,
            commits=self.recent_commits[-RECENT_COMMITS:],
            ext=self.ext,
            min_reader=self.min_reader,
        )


EMPTY_CHECKPOINT = Checkpoint(seq=0)
