"""Pure: what a commit does, as one typed operation it carries instead of a set of flags.

Every commit a handle makes is one of these (pyiceberg's ``TableUpdate`` and delta-rs's operation per
commit are the models): a plain `Save` of the handle's changes, the `Create` of a new store, a
`ChangeSettings` of store-level settings, a `Decision` on a staged memory, gc()'s `Expire` of files whose
time to live ran out, a `Purge`, or a `FoldTranscript` (transcript compaction). The operation says how the
commit path treats it (whether it refuses a taken first slot, whether a loser may leave a file behind,
whether read-only prefixes bind it) and what the commit info records as its ``kind``. `Import` names the
history of a store written without a journal, checkpoint 0's info (`_journal.legacy`), which no handle
commits.

The recorded kinds are the stored format and do not change with this module: ``save`` (a save, a decision,
an expiry, a fold), ``create``, ``settings``, ``purge`` and ``import``; readers of any version read them as strings
(`_rules.journal_objects.CommitInfo.kind`). A store's deletion is no commit info: it is a marker record
(`_rules.markers.Deleted`, `_journal.store_deletion`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .fold import Fold

__all__ = [
    "ChangeSettings",
    "Create",
    "Decision",
    "Expire",
    "FoldTranscript",
    "Import",
    "Operation",
    "Purge",
    "Save",
    "Settings",
    "is_trusted",
    "leaves_no_strays",
    "settings_of",
    "transcript_event",
]


@dataclass(frozen=True)
class Settings:
    """A change of store-level settings a commit carries: extensions to set, compared
    and swapped against the base (`_rules.merge.rebase`), and the audit events that record it."""

    ext: dict[str, Any]
    audit: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Save:
    """The handle's unsaved changes and transcript, as they are."""

    kind: ClassVar[str] = "save"


@dataclass(frozen=True)
class Create:
    """The first commit of a new store (``create``): refused (`StoreAlreadyExists`) instead of rebased if
    the first slot is taken; it may persist settings chosen at creation (read-only prefixes)."""

    settings: Settings | None = None
    kind: ClassVar[str] = "create"


@dataclass(frozen=True)
class ChangeSettings:
    """A change of store-level settings (read-only prefixes, retention, an archive import's record), with
    the handle's unsaved changes, in one commit."""

    settings: Settings
    kind: ClassVar[str] = "settings"


@dataclass(frozen=True)
class Decision:
    """A decision on a staged memory (`_api.staged`): if it does not commit, the handle forgets it and never
    saves it again, so it leaves nothing at a path; a `trusted` one is not bound by read-only prefixes."""

    trusted: bool = False
    kind: ClassVar[str] = "save"


@dataclass(frozen=True)
class Expire:
    """gc()'s deletion of files whose time to live ran out (`_api.expiry`): trusted, since an expired file
    goes also under a read-only prefix."""

    kind: ClassVar[str] = "save"


@dataclass(frozen=True)
class Purge:
    """A purge's commit (`_journal.purge`, `_api.message_purge`): like a decision, it leaves nothing at a path
    if it does not commit. `event` is its audit event when it rewrites the transcript, recorded in place of
    the generic rewrite event."""

    event: dict[str, Any] | None = None
    kind: ClassVar[str] = "purge"


@dataclass(frozen=True)
class FoldTranscript:
    """A fold of the transcript (`_api.compaction`): it merges with concurrent appends (`_rules.merge`);
    `event` is its audit event, recorded in place of the generic rewrite event."""

    fold: Fold
    event: dict[str, Any]
    kind: ClassVar[str] = "save"


@dataclass(frozen=True)
class Import:
    """The history of a store written without a journal, taken as one commit (checkpoint 0's info)."""

    kind: ClassVar[str] = "import"


#: What a handle's commit carries (`_journal.commit.SaveJob.operation`).
Operation = Save | Create | ChangeSettings | Decision | Expire | Purge | FoldTranscript


def settings_of(operation: Operation) -> Settings | None:
    """The settings `operation` changes, if any."""
    return operation.settings if isinstance(operation, (Create, ChangeSettings)) else None


def transcript_event(operation: Operation) -> dict[str, Any] | None:
    """The audit event `operation` records for a rewrite of the transcript, in place of the generic one."""
    return operation.event if isinstance(operation, (Purge, FoldTranscript)) else None


def is_trusted(operation: Operation) -> bool:
    """Whether the store's read-only prefixes do not bind the files `operation` commits."""
    return isinstance(operation, Expire) or (isinstance(operation, Decision) and operation.trusted)


def merges_whole_index(operation: Operation) -> bool:
    """Whether a commit of `operation` merges every search segment into one: a purge's and gc()'s expiry,
    so that the state it makes names no segment holding the docs they delete (the purge or gc then removes
    those segments, and a fresh handle's search finds every segment it names: docs/decisions/0175)."""
    return isinstance(operation, (Purge, Expire))


def leaves_no_strays(operation: Operation) -> bool:
    """Whether a commit of `operation` that does not land must leave no file at a path (no in-place upload,
    `_journal.inplace`): a create's loser, and a decision or purge, which the handle forgets if it fails."""
    return isinstance(operation, (Create, Decision, Purge))
