"""Pure: rebase a handle's unsaved changes onto the newest committed state, or name the conflicts.

Changes that do not conflict merge: different paths, transcript appends (theirs first, in commit order),
audit events (all kept) and deletes of paths the other side left alone. Both sides changing one path to
different content (bytes or user metadata), one side rewriting transcript history that the other
changed, or a write made with ``expected_sha`` to a path whose committed content moved since (whatever
the new bytes), is a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConcurrencyError
from .commit_info import About, commit_info, stamp, with_deletes
from .fold import Fold
from .index import Files, range_under
from .journal_objects import FileEntry
from .metadata import EXT_KEY as METADATA
from .paths import MESSAGES_PATH, directories_of, parent_dirs
from .read_only import SETTING as READ_ONLY
from .read_only import refuse_concurrent_change, refuse_read_only
from .state import State
from .transcript import as_committed, committed_form, concatenated, fingerprints, merged
from .ttl import EXPIRES_AT

#: A save that says nothing about itself: actor and reason come from its writes.
PLAIN_SAVE = About()


@dataclass
class Changes:
    """What a handle changed since its base state. A file mapped to None was deleted; `guarded` paths
    were written with ``expected_sha``, a precondition on the base's content that the commit rechecks.
    `entries` are items of store-level ``ext`` maps, ``(map, item)`` -> new value (None removes it): each
    is a compare-and-swap on the item as the base held it (`_rules.proposals` keeps proposals there)."""

    files: dict[str, FileEntry | None] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)
    guarded: set[str] = field(default_factory=set)
    #: store-level extensions this commit sets, each a compare-and-swap on the base's value (a settings
    #: change such as `_rules.read_only`'s; never held as an unsaved change of a handle). Never removed: a
    #: record with an empty ``ext`` reads its checkpoint's (docs/sync.md), so a cleared setting is empty
    ext: dict[str, Any] = field(default_factory=dict)
    entries: dict[tuple[str, str], Any] = field(default_factory=dict)
    #: for a changed path, the commit that changed it before when the handle knows it and its base does
    #: not say (a restore of a path deleted before the base): the link `store.log(path=...)` follows
    links: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.files or self.audit or self.ext or self.entries)

    def copy(self) -> Changes:
        copied = Changes(dict(self.files), list(self.audit), set(self.guarded), dict(self.ext), dict(self.entries))
        copied.links = dict(self.links)
        return copied


def ext_item(state: State, name: str, item: str) -> Any:
    """Item `item` of the store-level ``ext`` map `name` in `state` (None: absent)."""
    found = state.ext.get(name)
    return found.get(item) if isinstance(found, dict) else None


def entry_name(name: str, item: str) -> str:
    """How a conflicting ``ext`` item is named in `ConcurrencyError.paths`: absolute, so never a file's path."""
    return f"/{name}/{item}"


def with_entries(ext: dict[str, Any], entries: dict[tuple[str, str], Any]) -> dict[str, Any]:
    """`ext` with `entries` applied (a copy; maps emptied by removals are dropped)."""
    merged = dict(ext)
    for (name, item), value in entries.items():
        current = merged.get(name)
        updated = dict(current) if isinstance(current, dict) else {}
        if value is None:
            updated.pop(item, None)
        else:
            updated[item] = value
        if updated:
            merged[name] = updated
        else:
            merged.pop(name, None)
    return merged


def _same_content(a: FileEntry | None, b: FileEntry | None) -> bool:
    """Same bytes, same user metadata (two handles relabelling one file differently conflict too) and
    same expiry: a rewrite of the same bytes that drops or moves a ttl keeps the file alive, so gc's
    deletion of it as expired, committed from before that rewrite, must conflict, not merge over it."""
    if a is None or b is None:
        return a is b
    same_expiry = a.ext.get(EXPIRES_AT) == b.ext.get(EXPIRES_AT)
    return a.sha256 == b.sha256 and a.ext.get(METADATA) == b.ext.get(METADATA) and same_expiry


def merged_transcript(
    base: list[dict[str, Any]], latest: list[dict[str, Any]], ours: list[dict[str, Any]], fold: Fold | None = None
) -> list[dict[str, Any]] | None:
    """The transcript after our save lands on `latest` (compared by content), or None on a conflict.
    Messages of ours in the result are fresh copies in committed form. With `fold`, `ours` is `base`
    folded (`_rules.fold`) plus appends: the fold applies to whatever `latest` holds after the folded messages."""
    return _landing(base, latest, ours, fold)[0]


def _landing(
    base: list[dict[str, Any]], latest: list[dict[str, Any]], ours: list[dict[str, Any]], fold: Fold | None = None
) -> tuple[list[dict[str, Any]] | None, tuple[int, bool]]:
    """`merged_transcript`, and what our save does to it: messages appended, and whether it rewrote."""
    if fold is not None:
        return _folded_landing(base, latest, ours, fold)
    outcome = merged(fingerprints(base), fingerprints(latest), fingerprints(ours))
    if outcome is None:
        return None, (0, False)
    kind, start = outcome
    if kind == "keep":
        return as_committed(latest), (0, False)
    if kind == "append":
        return concatenated(latest, committed_form(ours[start:])), (len(ours) - start, False)
    return committed_form(ours), (max(0, len(ours) - len(base)), True)


def _folded_landing(
    base: list[dict[str, Any]], latest: list[dict[str, Any]], ours: list[dict[str, Any]], fold: Fold
) -> tuple[list[dict[str, Any]] | None, tuple[int, bool]]:
    """A fold lands like the appends it carries, then folds the result: a conflict when `latest` no
    longer begins with the folded messages (another compaction or a rewrite took them)."""
    if not fold.applies_to(base):
        return None, (0, False)
    landed, (appended, _) = _landing(base, latest, fold.unfold(ours, base))
    if landed is None or not fold.applies_to(landed):
        return None, (0, False)
    return fold.apply(landed), (appended, True)


def conflicts(
    base: State, latest: State, changes: Changes, messages: list[dict[str, Any]], fold: Fold | None = None
) -> list[str]:
    """Every path (and ``messages.json``) on which our changes and the commits since `base` disagree,
    including paths that would become a file and a directory at once."""
    paths = [
        path
        for path, ours in changes.files.items()
        if not _same_content(base.files.get(path), latest.files.get(path))
        and (path in changes.guarded or not _same_content(latest.files.get(path), ours))
    ]
    # every commit, not only one onto a concurrent save: a state holding `x` and `x/y` can never be opened
    # again, so no way of making changes (an expired file the handle hid, a refresh) may commit one
    paths += _clashes_with(changes, latest.files.with_changes(changes.files))
    if merged_transcript(base.messages, latest.messages, messages, fold) is None:
        paths.append(MESSAGES_PATH)
    paths += [entry_name(*k) for k in changes.entries if ext_item(base, *k) != ext_item(latest, *k)]
    return sorted(set(paths))


def _clashes_with(changes: Changes, files: Files) -> list[str]:
    """Paths we write that, merged with a concurrent save, are a file and a directory at once (the parts
    around each written path are loaded: `Files.need`). O(changes x depth) lookups: the directories of
    every changed file are found once, not searched again for each written path."""
    written = [p for p, r in changes.files.items() if r is not None]
    changed_dirs = directories_of(p for p, e in files.changes.items() if e is not None)
    return sorted(
        p
        for p in written
        if p in changed_dirs or _checkpoint_has_under(files, p) or any(d in files for d in parent_dirs(p))
    )


def _checkpoint_has_under(files: Files, prefix: str) -> bool:
    """Whether a file of the checkpoint that no change deleted or replaced lies under directory `prefix`."""
    return any(p not in files.changes for p in files.base.paths_in(*range_under(prefix)))


def _ext_after(base: State, latest: State, updates: dict[str, Any]) -> dict[str, Any]:
    """The store-level extensions after our commit: `latest`'s, with ours set, each only if no commit
    since `base` changed it (`ConcurrencyError` otherwise)."""
    for key in updates:
        if key == READ_ONLY:
            refuse_concurrent_change(base.ext, latest.ext)
        elif base.ext.get(key) != latest.ext.get(key):
            raise ConcurrencyError(f"(store setting {key!r})", expected_sha="", actual_sha="")
    return {**latest.ext, **updates}


def rebase(
    base: State,
    latest: State,
    changes: Changes,
    messages: list[dict[str, Any]],
    commit_id: str,
    about: About = PLAIN_SAVE,
    fold: Fold | None = None,
    *,
    trusted: bool = False,
) -> State:
    """The state our commit would create on top of `latest`, carrying its extensions; raises
    `ConcurrencyError` on conflicts, and `StoreFormatTooNew` if `latest` holds data this version must
    not write over. A `trusted` commit (a trusted handle accepting a proposal) may write read-only paths."""
    latest.check_can_write("save", "this store")
    if not trusted:  # paths made read-only by a commit since the base are refused here, before our commit
        refuse_read_only(changes.files, latest.ext)
    conflicting = conflicts(base, latest, changes, messages, fold)
    if conflicting:
        first = conflicting[0]
        # an `ext` item's name (absolute) sorts first, and is no file: look up only what the changes loaded
        expected, actual = (base.files.get(first), latest.files.get(first)) if first in changes.files else (None, None)
        raise ConcurrencyError(
            first,
            expected_sha=expected.sha256 if expected else "",
            actual_sha=actual.sha256 if actual else "",
            paths=tuple(conflicting),
        )
    seq = latest.seq + 1
    transcript, change = _landing(base.messages, latest.messages, messages, fold)
    info = commit_info(about, changes.files, changes.audit, (latest, base), change, changes.links)
    return State(
        seq=seq,
        checkpoint=latest.checkpoint,
        files=latest.files.with_changes(stamp(changes.files, seq)),
        messages=transcript or [],
        audit_total=latest.audit_total + len(changes.audit),
        recent_audit=latest.recent_audit + changes.audit,
        recent_commits=[*latest.recent_commits, commit_id],
        info=info,
        ext=with_deletes(with_entries(_ext_after(base, latest, changes.ext), changes.entries), info, seq),
        min_reader=latest.min_reader,
        written_by=latest.written_by,
    )
