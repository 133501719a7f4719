"""Pure: the commit info a save records: when, who, why, which paths, how many messages.

Who and why come from ``save(actor=..., reason=...)`` when given, else from the writes the commit holds
(their sidecars and audit events): one actor is named as it is, several are sorted and joined (bounded
by `MAX_SUMMARY`), none is ``"agent"``, upstream's default actor. Each changed path is linked to the commit
that changed it before, which lets `store.log(path=...)` follow a path's history one read per commit: the
one that wrote the file the commit lands on, or, for a path that is not a file there, the commit that
deleted it, as the landing state's map of recently deleted paths says (`DELETED_EXT`, carried in every
record and checkpoint), else when the landing state or the handle's base was made by that delete (see
`previous_change`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidMessage
from .journal_objects import CommitInfo, FileEntry
from .operations import Import, Purge
from .paths import is_unicode
from .state import State

#: Longest actor or reason summary made from several writes (an explicit one is kept whole).
MAX_SUMMARY = 200
DEFAULT_ACTOR = "agent"


@dataclass(frozen=True)
class About:
    """What a save says about itself before it knows where it lands: its kind, and the actor and reason
    passed to ``save()`` (None: taken from its writes)."""

    kind: str = "save"
    actor: str | None = None
    reason: str | None = None


def check_note(name: str, value: object) -> None:
    """Refuse an actor or reason for ``save()`` that is neither None nor a str of valid Unicode."""
    if value is not None and (not isinstance(value, str) or not is_unicode(value)):
        raise InvalidMessage(f"{name} must be None or a str of valid Unicode, got {value!r}")


def now() -> str:
    """UTC ISO-8601 with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def summary(values: Iterable[str], separator: str) -> str:
    """Distinct non-empty `values`, sorted and joined, at most about `MAX_SUMMARY` characters."""
    distinct = sorted({v for v in values if v})
    out: list[str] = []
    for index, value in enumerate(distinct):
        if len(separator.join([*out, value])) > MAX_SUMMARY:
            taken = index
            if not out:  # one value alone too long: keep its start rather than nothing
                out, taken = [shortened(value)], 1
            rest = len(distinct) - taken
            return separator.join(out) + (f" (+{rest} more)" if rest else "")
        out.append(value)
    return separator.join(out)


def shortened(value: str) -> str:
    """`value`, cut to `MAX_SUMMARY` characters (with an ellipsis) if it is longer."""
    return value if len(value) <= MAX_SUMMARY else value[: MAX_SUMMARY - 1] + "\u2026"


def _written(files: Mapping[str, FileEntry | None]) -> list[FileEntry]:
    return [r for r in files.values() if r is not None]


def actor_of(files: Mapping[str, FileEntry | None], audit: list[dict[str, Any]]) -> str:
    events = [e.get("actor") for e in audit]
    actors = [r.updated_by for r in _written(files)] + [a for a in events if isinstance(a, str)]
    return summary(actors, ", ") or DEFAULT_ACTOR


def reason_of(files: Mapping[str, FileEntry | None], audit: list[dict[str, Any]]) -> str:
    events = [e.get("reason") for e in audit]
    return summary([r.reason for r in _written(files)] + [x for x in events if isinstance(x, str)], "; ")


def commit_info(
    about: About,
    changes: Mapping[str, FileEntry | None],
    audit: list[dict[str, Any]],
    states: tuple[State, State],
    transcript: tuple[int, bool],
    hints: Mapping[str, int] | None = None,
) -> CommitInfo:
    """The info of a commit of `changes` (and `audit`); `states` are the state it lands on and the
    handle's base, `transcript` the number of messages it appends and whether it rewrote committed ones.
    `hints`: for paths the handle knows the previous change of though neither state says it (a restore of
    a path deleted before its base), that change; used where `previous_change` knows none."""

    def links(deleted: bool) -> dict[str, int | None]:
        chosen = [p for p, r in sorted(changes.items()) if (r is None) == deleted]
        return {p: _link(previous_change(p, *states), (hints or {}).get(p)) for p in chosen}

    appended, rewrote = transcript
    actor = shortened(about.actor) if about.actor is not None else actor_of(changes, audit)
    reason = shortened(about.reason) if about.reason is not None else reason_of(changes, audit)
    by = deleted_by(changes, audit, actor, reason)
    extensions: dict[str, Any] = {BY_KEY: by} if by else {}
    held = {*(hints or {}), *deleted_paths(states[0].ext)}
    if about.kind == Purge.kind and (gone := purged_deleted(changes, audit, held)):
        extensions[PURGED_KEY] = gone
    return CommitInfo(
        kind=about.kind,
        time=now(),
        actor=actor,
        reason=reason,
        wrote=links(deleted=False),
        deleted=links(deleted=True),
        appended=appended,
        rewrote=rewrote,
        ext=extensions,
    )


def _link(known: int | None, hint: int | None) -> int | None:
    return known if known is not None else hint


#: The key of a purge commit's info ``ext`` listing the paths it purged that were deleted before it: the
#: commit changes no file there, yet it belongs to each path's history (`_journal.commit_log`). A path the store
#: never held (no retained commit changed it) is not listed: its purge is no version of it.
PURGED_KEY = "purged"


def purged_deleted(
    changes: Mapping[str, FileEntry | None], audit: list[dict[str, Any]], held: Iterable[str]
) -> list[str]:
    """The paths a purge commit's audit events name (op ``purge``) that its changes do not touch and that
    were `held` before (deleted: the landing state's map of deleted paths, or the purge found the delete)."""
    named = {e.get("path") for e in audit if e.get("op") == "purge"}
    known = set(held)
    return sorted(p for p in named if isinstance(p, str) and p not in changes and p in known)


#: The key of a commit info's ``ext`` naming who deleted each path and why, where that is not the
#: commit's own actor and reason (a save committing deletes of several actors): path -> [actor, reason].
#: A write's own actor and reason are in its file entry (its sidecar fields), so only deletes need it.
BY_KEY = "by"


def deleted_by(
    changes: Mapping[str, FileEntry | None], audit: list[dict[str, Any]], actor: str, reason: str
) -> dict[str, list[str]]:
    """Who deleted each deleted path of `changes` and why (from the last audit event of that path), for
    those where it is not `actor` and `reason`; without an event (``audit=False``) the commit's stand."""
    events = {e.get("path"): e for e in audit if isinstance(e.get("path"), str)}
    out: dict[str, list[str]] = {}
    for path in sorted(p for p, r in changes.items() if r is None):
        event = events.get(path)
        who, why = (event.get("actor"), event.get("reason")) if event is not None else (actor, reason)
        if isinstance(who, str) and isinstance(why, str) and (who, why) != (actor, reason):
            out[path] = [who, why]
    return out


def attribution(info: CommitInfo | None, path: str, entry: FileEntry | None) -> tuple[str, str]:
    """Who made a commit's change of `path` and why: a write's own (its entry's sidecar fields), a
    delete's from the info's `BY_KEY` map; else the commit's actor and reason."""
    if entry is not None and entry.has_meta and not entry.meta_error and entry.updated_by:
        return entry.updated_by, entry.reason
    found = info.ext.get(BY_KEY) if info is not None else None
    pair = found.get(path) if isinstance(found, dict) and entry is None else None
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair):
        return pair[0], pair[1]
    return (info.actor, info.reason) if info is not None else ("", "")


def import_info(files: Mapping[str, FileEntry], messages: list[dict[str, Any]]) -> CommitInfo:
    """The info of the import commit: the history of a store written without a journal, taken as one
    commit (its paths are the checkpoint's files, not repeated here)."""
    return CommitInfo(kind=Import.kind, time=now(), actor=actor_of(files, []), appended=len(messages))


def previous_change(path: str, landing: State, base: State) -> int | None:
    """The commit that changed `path` last before a commit landing on `landing` (None: none known).

    A file there names the commit that wrote it. A path that is not a file there was deleted, or never
    written: the landing state's map of recently deleted paths (`DELETED_EXT`) names the commit that
    deleted it (or purged it after), across any number of checkpoints and whatever base the handle has;
    for a state written without that map (an older version's), when the landing state or the handle's
    base is the delete's own commit, that commit (a save that rebases onto a concurrent delete of the same
    path, or a write after a delete the handle saw), so neither a merged delete nor the write after it
    cuts the path's history short. Otherwise nothing in memory says which commit deleted it; `store.log`
    reads back to a deleted path's previous change, and a write with no link starts a new history there."""
    entry = landing.files.get(path)
    if entry is not None:
        return entry.last_commit()
    known = deleted_paths(landing.ext, before=landing.seq + 1).get(path)
    if known is not None:
        return known
    for state in (landing, base):
        if state.info is not None and path in state.info.deleted:
            return state.seq
    return None


def stamp(changes: Mapping[str, FileEntry | None], seq: int) -> dict[str, FileEntry | None]:
    """`changes` with every written file marked as last written by commit `seq`."""
    return {p: (r.model_copy(update={"commit": seq}) if r is not None else None) for p, r in changes.items()}


#: The store-level ``ext`` key mapping each recently deleted path to the commit that deleted it (or that
#: purged it after its delete): ``{path: seq}``. Every commit carries it from the state it lands on (a
#: write takes its path out, a delete or a purge of a deleted path puts it in), so every record and
#: checkpoint holds it and it goes on from checkpoint to checkpoint: a write of a path deleted any number
#: of checkpoints back links to its delete (`previous_change`). Older versions ignore it and carry it as
#: they carry any store-level extension. Bounded (`DELETED_MAX_BYTES`): newest deletes first.
DELETED_EXT = "deleted"
#: About the most bytes the map takes in each record and checkpoint (JSON); older deletes past it are
#: left out (their next write falls back to what the journal says otherwise: see docs/sync.md).
DELETED_MAX_BYTES = 4096


def deleted_paths(ext: Mapping[str, Any], before: int | None = None) -> dict[str, int]:
    """The well-formed entries of the map of deleted paths in the store-level `ext` (untrusted input:
    entries that are not a path and a commit number, before commit `before` if given, are ignored)."""
    found = ext.get(DELETED_EXT)
    if not isinstance(found, dict):
        return {}
    return {
        p: s
        for p, s in found.items()
        if isinstance(p, str) and type(s) is int and s > 0 and (before is None or s < before)
    }


def with_deletes(ext: dict[str, Any], info: CommitInfo, seq: int) -> dict[str, Any]:
    """The store-level `ext` after commit `seq` (whose info is `info`): its map of deleted paths without
    the paths the commit wrote, with those it deleted or purged (a delete that repeated the one the map
    names, linked to it, changed nothing: the map keeps that one), newest first within `DELETED_MAX_BYTES`.
    A map emptied stays as ``{}``: a record with an empty ``ext`` would read its checkpoint's (docs/sync.md),
    and that map may name paths written since."""
    known = deleted_paths(ext, before=seq)
    for path in info.wrote:
        known.pop(path, None)
    for path, link in info.deleted.items():
        if link is None or known.get(path) != link:  # else it repeated the delete the map names: that stays
            known[path] = seq
    purged = info.ext.get(PURGED_KEY)
    for path in purged if isinstance(purged, list) else []:
        known[path] = seq
    if not known and DELETED_EXT not in ext:
        return ext
    return {**ext, DELETED_EXT: _bounded(known)}


def _bounded(known: dict[str, int]) -> dict[str, int]:
    """The newest entries of `known` (then by path) whose JSON fits `DELETED_MAX_BYTES`, sorted by path."""
    budget = DELETED_MAX_BYTES - 2  # read at call time: tests lower it
    kept: dict[str, int] = {}
    for path, seq in sorted(known.items(), key=lambda item: (-item[1], item[0])):
        budget -= len(json.dumps(path)) + len(str(seq)) + 4  # '"path": seq, '
        if budget < 0:
            break
        kept[path] = seq
    return dict(sorted(kept.items()))
