"""One save as the commit path sees it: the handle's base state, its changes and transcript, the bytes it
uploads, and the operation it carries (`_rules.operations`); `_journal.commit` runs it and records in it how far
it got, which the handle reads when a save fails (`Checkout._settle`) or its projection lags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._rules.commit_info import About
from .._rules.fold import Fold
from .._rules.journal_objects import FileEntry
from .._rules.merge import Changes
from .._rules.operations import (
    Create,
    FoldTranscript,
    Operation,
    Save,
    is_trusted,
    leaves_no_strays,
    merges_whole_index,
)
from .._rules.search_index import Repairs, Updates
from .._rules.state import State
from .search_segments import Prepared

__all__ = ["SaveJob"]


@dataclass
class SaveJob:
    """One save: the handle's base state, its changes and transcript, and the bytes it uploads."""

    base: State
    changes: Changes
    messages: list[dict[str, Any]]
    contents: dict[str, bytes]
    versions: dict[str, bytes] = field(default_factory=dict)
    commit_id: str = ""
    #: the base is an import of an upstream-written store whose checkpoint 0 is not stored yet
    imported: bool = False
    #: what the commit does (`_rules.operations`): a save, a create, a change of settings, a decision, gc()'s
    #: expiry, a purge or a fold of the transcript; the commit path and the commit info's ``kind`` follow from it
    operation: Operation = field(default_factory=Save)
    #: the log slots this save tried to create; only these can hold its commit
    attempted: list[int] = field(default_factory=list)
    #: it committed, but upstream's layout could not be brought up to date (the next save does)
    projection_failed: bool = False
    #: who saves and why, recorded in the commit info (None: taken from the writes it holds)
    actor: str | None = None
    reason: str | None = None
    #: new files this save created at their own paths (`_journal.inplace`): they need no blob and no projection
    placed: set[str] = field(default_factory=set)
    #: docs a search of the handle found missing from the persisted search index, the commit they were
    #: found at (`_journal.search_segments.extend` persists them when the save lands right on it), its segment cache
    search_repairs: Repairs = field(default_factory=Repairs)
    #: committed bytes of in-place files this save changes that the handle already holds (`WorkingCopy.held`):
    #: their copy into a blob (`_journal.preserve`) fetches nothing
    held: dict[str, bytes] = field(default_factory=dict)
    #: contents this save copied into blobs before its commit point (`_journal.preserve`)
    preserved: list[str] = field(default_factory=list)
    #: of those, the copies whose blob this save created, by path, with the base's record of the path: the
    #: state it commits on (or is refused against) decides whether they stay (`_journal.preserve.unneeded_copies`)
    created: dict[str, FileEntry] = field(default_factory=dict)
    #: the state its last commit attempt was built on, or that refused it (None: it got no further)
    newest: State | None = None
    #: the search index's share of this save (`_journal.search_segments`): its docs, and the segment uploaded
    #: with its content for a commit on the base (None: none yet)
    docs: Updates | None = None
    prepared: Prepared | None = None
    #: a checkpoint follows its commit and writes the head hint: its projection leaves the head alone
    checkpointing: bool = False

    @property
    def exclusive(self) -> bool:
        """A create: refuse (StoreAlreadyExists) instead of rebasing if the first commit slot is taken."""
        return isinstance(self.operation, Create)

    @property
    def trusted(self) -> bool:
        """The store's read-only prefixes do not bind its files (a trusted decision, gc()'s expiry)."""
        return is_trusted(self.operation)

    @property
    def leaves_no_strays(self) -> bool:
        """If it does not commit, it must leave no file behind at a path (`_rules.operations.leaves_no_strays`)."""
        return leaves_no_strays(self.operation)

    @property
    def whole_index(self) -> bool:
        """Its search update merges every segment (`_rules.operations.merges_whole_index`)."""
        return merges_whole_index(self.operation)

    @property
    def fold(self) -> Fold | None:
        """The fold of the transcript it commits (`compact_transcript`), which merges with concurrent appends."""
        return self.operation.fold if isinstance(self.operation, FoldTranscript) else None

    def about(self) -> About:
        return About(self.operation.kind, self.actor, self.reason)
