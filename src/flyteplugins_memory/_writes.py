"""Pure: planning one path write or delete: precondition, metadata, version name and audit event."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ._errors import ConcurrencyError, CorruptStore
from ._journal import FileRecord
from ._layout import version_name
from ._records import MemoryMeta, sha256_bytes, utc_timestamp, write_event


@dataclass(frozen=True)
class WritePlan:
    """Everything one change records: the path, its new record (None: deleted), bytes, version, event."""

    path: str
    record: FileRecord | None
    data: bytes
    meta: MemoryMeta | None
    version: str
    event: dict[str, Any] | None


def _check_expected(current: FileRecord | None, rel: str, expected_sha: str | None) -> str:
    """The current sha (``""`` if none); raises if `expected_sha` is given and differs."""
    if current is not None and current.meta_error and expected_sha is not None:
        raise CorruptStore(f"Cannot check expected_sha of {rel!r}: {current.meta_error}")
    old_sha = current.sha256 if current else ""
    if expected_sha is not None and expected_sha != old_sha:
        raise ConcurrencyError(rel, expected_sha=expected_sha, actual_sha=old_sha)
    return old_sha


@dataclass(frozen=True)
class ChangeOptions:
    """How one write or delete is recorded: who and why, its precondition, and the store's options."""

    actor: str
    reason: str
    expected_sha: str | None
    keep_versions: bool
    audit: bool

    def event(self, op: str, rel: str, old_sha: str, new_sha: str, ts: str, version: str) -> dict[str, Any] | None:
        if not self.audit:
            return None
        return write_event(
            op=op,
            path=rel,
            old_sha=old_sha,
            new_sha=new_sha,
            actor=self.actor,
            reason=self.reason,
            ts=ts,
            version_file=version,
        )


def plan_write(
    current: FileRecord | None, rel: str, content: str, options: ChangeOptions, taken_versions: Collection[str] = ()
) -> WritePlan:
    """Decide what writing `content` to `rel` records; raises `ConcurrencyError` on a stale `expected_sha`."""
    old_sha = _check_expected(current, rel, options.expected_sha)
    data = content.encode("utf-8")
    meta = MemoryMeta(rel, sha256_bytes(data), utc_timestamp(), options.actor, options.reason, len(data))
    version = _version_for(meta, taken_versions) if options.keep_versions else ""
    event = options.event("update" if old_sha else "create", rel, old_sha, meta.sha256, meta.updated_at, version)
    return WritePlan(rel, FileRecord.from_meta(meta), data, meta, version, event)


def plan_delete(
    current: FileRecord, rel: str, options: ChangeOptions, taken_versions: Collection[str] = ()
) -> WritePlan:
    """Decide what deleting `rel` records: a tombstone version (empty, ``..._deleted.txt``) and an event."""
    old_sha = _check_expected(current, rel, options.expected_sha)
    ts = utc_timestamp()
    version = _unique(version_name(rel, ts, "deleted"), taken_versions) if options.keep_versions else ""
    return WritePlan(rel, None, b"", None, version, options.event("delete", rel, old_sha, "", ts, version))


def _version_for(meta: MemoryMeta, taken: Collection[str]) -> str:
    return _unique(version_name(meta.path, meta.updated_at, meta.sha256), taken)


def _unique(name: str, taken: Collection[str]) -> str:
    if name in taken:  # the same content twice within one second
        stem = name.removesuffix(".txt")
        name = f"{stem}_{uuid.uuid4().hex[:8]}.txt"
    return name
