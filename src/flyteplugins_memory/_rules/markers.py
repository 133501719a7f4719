"""Pure: the small objects that mark what is gone or moved, and the store's own settings.

    log/<seq>.json  Tombstone   a commit that gc() collected; the slot stays taken (for a while, see
                                `_journal.retention`) so that no stale handle can commit into it
    log/<seq>.json  Fence       in the old journal (inside the store prefix): the log moved; earlier
                                versions refuse it (``format`` 2), so none of them can commit after it
    head.json       MovedHead   in the old journal: earlier versions refuse it on open (unknown fields)
    log/<seq>.json  Deleted     the store was deleted (`delete_store`): who, when, why; also in head.json
    head.json                   and in the slots a stale handle may aim at, so no save lands after it
                                (``format`` 2: earlier versions refuse it as newer, never resurrect)
    log/<seq+1>.json Successor  right after a deletion record: the key took a new store (its generation)
    purged/<sha>.json  Purged   content purge() removed, so readers can tell purged from corrupt
    config.json     StoreConfig settings every handle of the store uses (the gc window)

Every marker is parsed leniently about extra fields (as every version since 0.2 has parsed them) but
strictly about the fields it needs. All but the tombstone carry the evolution fields of `_rules.formats` (major
``format``, ``writer``, ``min_reader``, ``ext``); a higher major than this version knows raises
`StoreFormatTooNew`. The tombstone is frozen as it is: listings tell it from a record by its size (older
versions included), so it can never grow, and it names nothing that could evolve.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import CorruptStore
from .formats import Evolving, refuse_newer_format, refuse_to_overwrite, stamped
from .layout import JOURNAL_DIR

#: A tombstone is smaller than any commit record (whose mandatory fields alone take over 100 bytes), so a
#: listing tells them apart by size.
TOMBSTONE_MAX_BYTES = 64
#: No marker is larger than this (a fence names the new location); larger log objects are records.
MARKER_MAX_BYTES = 4096
#: The package version that moved the journal out of the store prefix; named in the markers versions
#: before it refuse (as their ``min_reader``, a label they print), so their error says what to upgrade to.
MIN_READER = "flyteplugins-memory>=0.2 (journal outside the store prefix)"
CONFIG_NAME = f"{JOURNAL_DIR}/config.json"


def purge_marker_name(sha256: str) -> str:
    return f"{JOURNAL_DIR}/purged/{sha256[:2]}/{sha256}.json"


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class Tombstone(_Lenient):
    collected: Literal[True]


class Fence(_Lenient, Evolving):
    """``format`` 2 is what makes versions before 0.2 refuse it (their records are format 1)."""

    format: Literal[2] = 2  # type: ignore[assignment]
    seq: int
    moved_to: str
    #: a label for versions before 0.2 (they print it); counts as revision 0
    min_reader: int | str = MIN_READER  # type: ignore[assignment]


class Deleted(_Lenient, Evolving):
    """The deletion record of a store: what `delete_store` leaves of it (see `_journal.store_deletion`)."""

    format: Literal[2] = 2  # type: ignore[assignment]
    #: required, so that no other small object (a record with a ``seq``) ever reads as a deletion
    deleted: Literal[True]
    #: the log slot the deletion took: every commit below it was deleted with the store
    seq: int
    at: str
    actor: str = ""
    reason: str = ""
    #: how many files the store held
    files: int = 0

    def describe(self, uri: str) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"MemoryStore at {uri} was deleted by {self.actor!r} at {self.at}{why}"


class Successor(_Lenient, Evolving):
    """The log slot right after a deletion record: the key took a new store, generation `generation`,
    whose journal lives apart (`_rules.journal_location.generation_root`; see `_journal.generations`). Claimed
    create-only by the first ``create`` after the deletion, so concurrent creators agree on one."""

    format: Literal[2] = 2  # type: ignore[assignment]
    #: required, so that no other small object ever reads as one
    successor: Literal[True]
    generation: int = Field(ge=1)
    at: str


class MovedHead(_Lenient, Evolving):
    seq: int
    checkpoint: int
    moved_to: str
    min_reader: int | str = MIN_READER  # type: ignore[assignment]


class Purged(_Lenient, Evolving):
    sha256: str
    path: str
    at: str
    actor: str = ""
    reason: str = ""


class StoreConfig(_Lenient, Evolving):
    """The store's settings. Fields this version does not know (a newer version's settings) are kept,
    top-level ones included, so that rewriting the window never drops them (docs/journal.md, "How the format
    evolves")."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    #: keep what the commits of this many seconds need (None: the package default)
    gc_window_seconds: float | None = Field(default=None, ge=0)

    def with_window(self, seconds: float | None) -> StoreConfig:
        """These settings with another window, extensions kept; refused (`StoreFormatTooNew`) if they
        hold settings this version must not write over."""
        refuse_to_overwrite(self.min_reader, self.writer, "change the settings of", CONFIG_NAME)
        return self.model_copy(update={"gc_window_seconds": seconds})


def encode_marker(marker: BaseModel) -> bytes:
    """The bytes of a marker as this version writes it (its writer recorded, if it has one)."""
    if isinstance(marker, Evolving):
        marker = stamped(marker)
    return marker.model_dump_json().encode("utf-8")


#: Every tombstone is the same few bytes: it names no content and no commit.
TOMBSTONE = encode_marker(Tombstone(collected=True))


def parse_marker(data: bytes) -> Tombstone | Fence | Deleted | None:
    """The marker a log slot holds, or None if it holds something else (a commit record, or garbage)."""
    if not data.lstrip().startswith(b"{"):
        return None
    for model in (Tombstone, Fence, Deleted):
        try:
            return model.model_validate_json(data)
        except ValidationError:
            continue
    return None


def parse_deleted(data: bytes | None) -> Deleted | None:
    """The deletion record in `data` (a head or a log slot), or None if it is not one."""
    if data is None or len(data) > MARKER_MAX_BYTES or b'"deleted"' not in data:
        return None
    try:
        return Deleted.model_validate_json(data)
    except ValidationError:
        return None


def parse_successor(data: bytes | None) -> Successor | None:
    """The successor claim in `data` (the log slot after a deletion record), or None if it is not one."""
    if data is None or len(data) > MARKER_MAX_BYTES or b'"successor"' not in data:
        return None
    try:
        return Successor.model_validate_json(data)
    except ValidationError:
        return None


def parse_moved_head(data: bytes) -> MovedHead | None:
    try:
        return MovedHead.model_validate_json(data)
    except ValidationError:
        return None


def parse_config(data: bytes | None) -> StoreConfig:
    if data is None:
        return StoreConfig()
    try:
        return StoreConfig.model_validate_json(data)
    except ValidationError as exc:
        refuse_newer_format(data, CONFIG_NAME, 1)
        raise CorruptStore(f"Store settings {CONFIG_NAME!r} are malformed: {exc}") from exc


def parse_purged(data: bytes) -> Purged | None:
    """The purge marker in `data`, or None if it is not one (`StoreFormatTooNew` if it is a newer one)."""
    try:
        return Purged.model_validate_json(data)
    except ValidationError:
        refuse_newer_format(data, "purge marker", 1)
        return None
