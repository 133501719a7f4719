"""Pure: read-only prefixes persisted with the store, so every handle enforces them.

They live in the store-level extensions of the journal (``State.ext["read_only_prefixes"]``, a sorted
list of prefixes), which every record and checkpoint carries forward, those written by the previous
release (issue 9's) included: that release keeps the setting when it saves, but does not enforce it.
Being part of a commit, a change is linearized with every save: a save rebasing onto a commit that made
one of its paths read-only fails (`ReadOnlyPath`) before its own commit, and two concurrent changes of
the setting are a compare-and-swap (the second raises `ConcurrencyError`). See docs/decisions/0060,
"Persisted read-only prefixes".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConcurrencyError, InvalidArgument, InvalidPath, NotTrusted, ReadOnlyPath
from .arguments import check_prefixes
from .codecs import write_event
from .paths import normalize_path

#: The key of the setting in the store-level ``ext`` (what `_journal.store_deletion` reads too).
SETTING = "read_only_prefixes"
#: What a `ConcurrencyError` of two concurrent changes of the setting names as its path.
SETTING_CONFLICT = "(read-only prefixes)"
#: The audit ``op`` of a change of the setting.
AUDIT_OP = "set_read_only_prefixes"


def persisted(ext: Mapping[str, Any]) -> tuple[str, ...]:
    """The persisted prefixes in a state's `ext`, read leniently (remote data: anything that is not a
    non-empty str is ignored, so a hostile value can only fail to protect, never break an open)."""
    value = ext.get(SETTING)
    if not isinstance(value, list | tuple):
        return ()
    return tuple(sorted({v for v in value if isinstance(v, str) and v}))


def canonical(prefixes: object) -> tuple[str, ...]:
    """Prefixes a caller asks to persist, checked (`InvalidArgument`, `InvalidPath`) and sorted.

    Each is a string prefix, as upstream's ``read_only_prefixes`` are (``"memory/"`` protects
    ``memory/x``, ``"mem"`` protects ``memory/x`` and ``mem.txt`` too): the relative-path rules apply
    (no ``..``, not absolute, no control characters), and a trailing ``/`` is kept."""
    checked = check_prefixes(prefixes)
    for prefix in checked:
        if not prefix:
            raise InvalidArgument("A read-only prefix must not be empty (it would make the whole store read-only)")
        normalize_path(prefix)  # the same rules as any path
        segments = prefix.split("/")  # a trailing "/" leaves one empty last segment, which is kept
        if "." in segments or "" in segments[:-1]:  # a path never holds them: the prefix would protect nothing
            raise InvalidPath(
                f"A read-only prefix must be in canonical form (no '.' or empty segments), got {prefix!r}"
            )
    return tuple(sorted(set(checked)))


def with_setting(ext: Mapping[str, Any], prefixes: tuple[str, ...]) -> dict[str, Any]:
    """`ext` with the setting replaced. Cleared is ``[]``, never an absent key: a record without an
    ``ext`` of its own reads its checkpoint's, which may still hold the old prefixes."""
    return {**ext, SETTING: list(prefixes)}


def refuse_untrusted(trusted: bool) -> None:
    if not trusted:
        raise NotTrusted("Changing the read-only prefixes of a store needs a handle opened with trusted=True")


def under_read_only(paths: Iterable[str], prefixes: Iterable[str]) -> list[str]:
    """The paths of `paths` that lie under one of `prefixes`, sorted."""
    held = tuple(prefixes)
    return sorted(p for p in paths if any(p.startswith(prefix) for prefix in held))


def refuse_read_only(paths: Iterable[str], ext: Mapping[str, Any]) -> None:
    """Raise `ReadOnlyPath` if a save would change a path under a prefix persisted in `ext`."""
    held = under_read_only(paths, persisted(ext))
    if held:
        raise ReadOnlyPath(
            f"Writes to {held[0]!r} are not allowed: the store's persisted read-only prefixes "
            f"{list(persisted(ext))!r} cover it (changed by another handle since this one loaded?)"
        )


def refuse_concurrent_change(base: Mapping[str, Any], latest: Mapping[str, Any]) -> None:
    """Raise `ConcurrencyError` if another commit changed the setting since `base` (compare-and-swap)."""
    before, now = persisted(base), persisted(latest)
    if before != now:
        raise ConcurrencyError(SETTING_CONFLICT, expected_sha=repr(list(before)), actual_sha=repr(list(now)))


def audit_event(before: tuple[str, ...], after: tuple[str, ...], actor: str, reason: str, ts: str) -> dict[str, Any]:
    """The audit event of a change: upstream's fields (no path: it is not a file) plus both settings."""
    event = write_event(
        op=AUDIT_OP, path="", old_sha="", new_sha="", actor=actor, reason=reason, ts=ts, version_file=""
    )
    return {**event, "previous": list(before), "prefixes": list(after)}
