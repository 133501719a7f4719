"""Planning and applying one path write: precondition, sidecar, version name and audit event.

`plan_write` is pure (it decides everything a write will record); `apply_write` performs the plan on the
local working directory and blocks, so the store runs it in a thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ._errors import ConcurrencyError, CorruptStore
from ._layout import AUDIT_LOG_PATH, sidecar_name, version_name
from ._manifest import FileEntry
from ._records import MemoryMeta, encode_audit_event, encode_meta, sha256_bytes, utc_timestamp, write_event
from ._workdir import WorkDir


@dataclass(frozen=True)
class WritePlan:
    """Everything one write records: content, sidecar, optional version snapshot and audit event."""

    data: bytes
    meta: MemoryMeta
    version: str
    event: dict[str, Any] | None

    @property
    def entry(self) -> FileEntry:
        return FileEntry(self.meta.path, self.meta.sha256, self.meta.bytes, self.meta)


def plan_write(
    current: FileEntry | None,
    rel: str,
    content: str,
    *,
    actor: str,
    reason: str,
    expected_sha: str | None,
    keep_versions: bool,
    audit: bool,
    taken_versions: Collection[str] = (),
) -> WritePlan:
    """Decide what writing `content` to `rel` records; raises `ConcurrencyError` on a stale `expected_sha`."""
    if current is not None and current.meta_error and expected_sha is not None:
        raise CorruptStore(f"Cannot check expected_sha of {rel!r}: {current.meta_error}")
    old_sha = current.sha256 if current else ""
    if expected_sha is not None and expected_sha != old_sha:
        raise ConcurrencyError(rel, expected_sha=expected_sha, actual_sha=old_sha)
    data = content.encode("utf-8")
    meta = MemoryMeta(rel, sha256_bytes(data), utc_timestamp(), actor, reason, len(data))
    version = _version_for(meta, taken_versions) if keep_versions else ""
    event = None
    if audit:
        event = write_event(
            op="update" if old_sha else "create",
            path=rel,
            old_sha=old_sha,
            new_sha=meta.sha256,
            actor=actor,
            reason=reason,
            ts=meta.updated_at,
            version_file=version,
        )
    return WritePlan(data, meta, version, event)


def _version_for(meta: MemoryMeta, taken: Collection[str]) -> str:
    name = version_name(meta.path, meta.updated_at, meta.sha256)
    if name in taken:  # the same content twice within one second
        name = version_name(meta.path, meta.updated_at, meta.sha256, salt=uuid.uuid4().hex[:8])
    return name


def apply_write(workdir: WorkDir, plan: WritePlan) -> None:
    """Write the content, sidecar, version snapshot and audit line of `plan` locally (blocking)."""
    workdir.write(plan.meta.path, plan.data)
    workdir.write(sidecar_name(plan.meta.path), encode_meta(plan.meta))
    if plan.version:
        workdir.write(plan.version, plan.data)
    if plan.event is not None:
        workdir.append(AUDIT_LOG_PATH, encode_audit_event(plan.event))
