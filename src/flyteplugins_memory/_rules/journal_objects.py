"""Pure: the commit journal's records and the committed state they describe.

A store's history is a numbered log of commit records. Record ``n`` holds the *cumulative* change from
a checkpoint ``c < n`` to state ``n``, so any state is one checkpoint plus one record, and opening costs
O(1) requests. Checkpoints are full states written now and then to keep records small. Records are
untrusted input: parsing is strict and every path in them passes the same rules as caller paths.

Records, checkpoints and the head carry the evolution fields of `_rules.formats` (major ``format``, ``writer``,
``min_reader``, ``ext``); a field outside ``ext`` that this version does not know means a newer major and is
refused. Each record also holds its commit's `CommitInfo` (who, when, why, which paths), which `store.log()`
reads.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from ..errors import CorruptStore, UnsafeStoreContent
from .entries import STRICT, FileEntry, Part, PartRef, SafeChain, SafeChanges, SafeFiles, same_write
from .formats import FORMAT, Evolving, ext_field, refuse_newer_format, stamped

__all__ = ["FORMAT", "FileEntry", "Part", "PartRef", "SafeChain", "SafeChanges", "SafeFiles", "same_write"]
#: The major format of a checkpoint whose file index is split into parts (`parts`): readers of format 1
#: do not know that field, so they must refuse such a checkpoint (`StoreFormatTooNew`), not misread it.
PARTITIONED_FORMAT = 2
#: Commit ids remembered in each record, to recognise a retried save that had in fact landed.
RECENT_COMMITS = 64


class _Strict(BaseModel):
    model_config = STRICT


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
    """A full state. ``audit_segments`` name the checkpoints whose segment holds older audit events.

    Its file index is either inline (``files``, format 1: small stores, readable by every version since
    0.1) or split into parts (``parts``, format 2: sorted, disjoint ranges of paths, each a content-addressed
    object read only when needed; see `_rules.index`)."""

    MAJOR: ClassVar[int] = PARTITIONED_FORMAT
    format: Literal[1, 2] = FORMAT  # type: ignore[assignment]
    seq: int
    files: SafeFiles = Field(default_factory=dict, exclude_if=lambda value: not value)
    parts: list[PartRef] = Field(default_factory=list, exclude_if=lambda value: not value)
    messages: list[dict[str, Any]] = []
    audit_total: int = Field(default=0, ge=0)
    audit_segments: list[int] = []
    legacy_audit_lines: int = Field(default=0, ge=0)
    commits: list[str] = []
    #: checkpoint 0 of an imported store only: the import, shown by `store.log()` as its oldest commit
    info: CommitInfo | None = _unless_none()

    @model_validator(mode="after")
    def _one_index(self) -> Checkpoint:
        if self.parts and (self.files or self.format != PARTITIONED_FORMAT):
            raise ValueError("a checkpoint with parts has format 2 and no inline files")
        for before, after in zip(self.parts, self.parts[1:], strict=False):
            if not before.last < after.first:
                raise ValueError(f"parts overlap or are unsorted: {before.last!r} then {after.first!r}")
        return self

    @property
    def partitioned(self) -> bool:
        return bool(self.parts)


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


def parse(model: type[BaseModel], data: bytes, name: str) -> Any:
    """Strictly parse a journal object; a newer major format raises `StoreFormatTooNew`, malformed or
    hostile content `CorruptStore`.

    Strict first, the loose look at ``format`` only when that fails: the outcome is the same as looking
    first (``format`` is a literal, so a newer major never validates), without decoding a large checkpoint
    twice on every open."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        refuse_newer_format(data, name, getattr(model, "MAJOR", FORMAT))
        error = UnsafeStoreContent if "unsafe path" in str(exc) else CorruptStore
        raise error(f"Journal object {name!r} is malformed: {exc}") from exc


def encode(record: BaseModel) -> bytes:
    """The bytes of a journal object as this version writes it (its writer recorded, if it has one)."""
    written: BaseModel = stamped(record) if isinstance(record, Evolving) else record
    return written.model_dump_json(exclude_defaults=False).encode("utf-8")


class Origin(enum.Enum):
    """Where a state was read from: this version's journal, an upstream-written store (import), or the
    journal that earlier versions kept inside the store prefix (moved on the next save)."""

    JOURNAL = "journal"
    IMPORT = "import"
    OLD_JOURNAL = "old_journal"


EMPTY_CHECKPOINT = Checkpoint(seq=0)
