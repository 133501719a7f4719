"""The store's retention policy applied to ``versions/`` snapshots: which go, from one listing of
``versions/`` (a paged listing, no reads), ranked per path by `_journal.versions.version_order`. The rules
themselves are in `_rules.retention_policy`."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._rules.journal_objects import FileEntry
from .._rules.layout import VERSIONS_DIR, Kind, classify, versions_dir_name
from .._rules.retention_policy import RetentionPolicy, doomed
from .._rules.state import State
from ..errors import UnsafeStoreContent
from ..storage._contract import Listed, ObjectStorage
from .versions import version_order


@dataclass(frozen=True)
class Expired:
    """What gc's expiry pass does under ``versions/`` before the policy runs: the files it deletes, the
    snapshots it removes, and the tombstones (name -> when written) its commit adds. A real gc's policy
    pass finds all of it done; a dry run's must be told (`snapshot_removal`), or it counts the removed
    snapshots twice and ranks the rest as if the files still lived."""

    paths: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    tombstones: dict[str, float] = field(default_factory=dict)


async def snapshot_removal(
    remote: ObjectStorage,
    newest: State,
    policy: RetentionPolicy,
    now: float,
    floor: float,
    expired: Expired | None = None,
) -> dict[str, int]:
    """The snapshots no rule of `policy` keeps (name -> size); never the live content's newest one, nor
    one written at or after `floor`. `expired`: what an expiry pass not run yet (a dry run's) will have done."""
    if policy.keeps_everything:
        return {}
    expired = expired or Expired()
    by_path = _by_path(_after(await remote.stat(VERSIONS_DIR), expired))
    await newest.files.need(by_path)
    removed: dict[str, int] = {}
    for path, found in by_path.items():
        ordered = sorted(found, key=version_order, reverse=True)
        current = _current(ordered, None if path in expired.paths else newest.files.get(path))
        versions = [(name, found[name].modified) for name in ordered]
        removed.update({name: found[name].size for name in doomed(versions, policy, now, floor, current)})
    return removed


def _after(listing: dict[str, Listed], expired: Expired) -> dict[str, Listed]:
    """`listing` as it will be once `expired` is done (its tombstones are not stored yet: size 0)."""
    kept = {name: found for name, found in listing.items() if name not in expired.removed}
    return {**kept, **{name: Listed(0, when) for name, when in expired.tombstones.items()}}


def _by_path(listing: dict[str, Listed]) -> dict[str, dict[str, Listed]]:
    """Snapshots by the path they belong to; a name that is not a snapshot's is left alone (gc removes
    nothing it does not understand)."""
    by_path: dict[str, dict[str, Listed]] = {}
    for name, found in listing.items():
        try:
            stored = classify(name)
        except UnsafeStoreContent:
            continue
        if stored.kind is Kind.VERSION:
            by_path.setdefault(stored.path, {})[name] = found
    return by_path


def _current(newest_first: list[str], entry: FileEntry | None) -> str:
    """The newest snapshot holding the live content (its name carries the content's sha256)."""
    if entry is None:
        return ""
    return next((name for name in newest_first if _holds(name, entry.sha256)), "")


async def expired_snapshots(remote: ObjectStorage, expired: dict[str, str]) -> dict[str, int]:
    """The snapshots holding the content of files whose ttl ran out (path -> sha256 of that content):
    one listing of each path's version directory. Tombstones and other contents of the path stay."""
    found: dict[str, int] = {}
    for path, sha in sorted(expired.items()):
        listing = await remote.stat(versions_dir_name(path))
        found.update({name: f.size for name, f in listing.items() if _holds(name, sha)})
    return found


def _holds(name: str, sha: str) -> bool:
    stem = name.rsplit("/", 1)[-1].removesuffix(".txt")
    return stem.partition("_")[2].startswith(sha)
