"""The records a store persists, and their strict codecs: sidecars, the transcript and audit events.

Decoding treats bytes as untrusted: anything malformed raises `CorruptStore` rather than being read as
empty, so a damaged object can never be silently saved over good data.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from flyte.ai.agents import MemoryMeta as UpstreamMemoryMeta
from pydantic import TypeAdapter, ValidationError

from ..errors import CorruptStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryMeta(UpstreamMemoryMeta):
    """Per-file metadata sidecar (sha256, actor, timestamp, ...) for a memory entry.

    Upstream's ``MemoryMeta`` with the same fields (``path``, ``sha256``, ``updated_at``, ``updated_by``,
    ``reason``, ``bytes``), so code that checks for upstream's type, or is typed against it, accepts ours.

    ``metadata`` is the file's user metadata (see `write_text`), kept in our journal only: it is not part
    of the sidecar upstream reads (`encode_meta` writes upstream's fields alone), nor of equality and
    hashing, which compare the sidecar."""

    metadata: dict[str, str | int | float | bool] = field(default_factory=dict, compare=False)


#: The sidecar's fields: upstream's, in upstream's order (our `metadata` is never written there).
SIDECAR_FIELDS = tuple(f.name for f in fields(UpstreamMemoryMeta))
_META_ADAPTER = TypeAdapter(UpstreamMemoryMeta)
_MESSAGES_ADAPTER = TypeAdapter(list[dict[str, Any]])


def utc_timestamp() -> str:
    """Second-resolution UTC ISO-8601 timestamp, the format upstream writes."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode_meta(meta: MemoryMeta) -> bytes:
    return json.dumps({name: getattr(meta, name) for name in SIDECAR_FIELDS}, indent=2).encode("utf-8")


def decode_meta(data: bytes, *, expected_path: str) -> MemoryMeta:
    """Parse a sidecar; its ``path`` must be the path it is stored for."""
    try:
        parsed = _META_ADAPTER.validate_json(data, strict=True)
    except ValidationError as exc:
        raise CorruptStore(f"Metadata sidecar for {expected_path!r} is malformed: {exc}") from exc
    meta = MemoryMeta(*(getattr(parsed, name) for name in SIDECAR_FIELDS))
    if meta.path != expected_path:
        raise CorruptStore(f"Metadata sidecar for {expected_path!r} describes {meta.path!r}")
    if meta.bytes < 0:
        raise CorruptStore(f"Metadata sidecar for {expected_path!r} has a negative size")
    if not is_sha256(meta.sha256):  # a hand-edited sidecar: refused here, where it is still a corrupt sidecar
        raise CorruptStore(f"Metadata sidecar for {expected_path!r} has a malformed sha256")
    return meta


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def is_sha256(value: str) -> bool:
    """Whether `value` is a sha256 hex digest as the store writes it (64 lowercase hex digits)."""
    return _SHA256_HEX.fullmatch(value) is not None  # every write and every loaded entry checks one


def encode_messages(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps(messages, default=str, indent=2).encode("utf-8")


def decode_messages(data: bytes) -> list[dict[str, Any]]:
    """Parse ``messages.json``: a JSON array of objects, nothing else."""
    try:
        return _MESSAGES_ADAPTER.validate_json(data, strict=True)
    except ValidationError as exc:
        raise CorruptStore(f"messages.json is not a JSON array of objects: {exc}") from exc


def encode_audit_event(event: dict[str, Any]) -> bytes:
    return (json.dumps(event, sort_keys=True, default=str) + "\n").encode("utf-8")


def decode_audit_lines(data: bytes) -> list[dict[str, Any]]:
    """Parse an audit log; a malformed line (say, torn by a crash) is skipped with a warning."""
    events: list[dict[str, Any]] = []
    for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not raw.strip():
            continue
        event = _audit_event(raw)
        if event is not None:
            events.append(event)
        else:
            logger.warning("Skipping malformed audit line %d", number)
    return events


def lines_holding(lines: list[bytes], events: int) -> list[bytes] | None:
    """The shortest prefix of audit-log `lines` that holds `events` well-formed events (malformed lines
    in between kept as they are), or None if there are fewer; counts as `decode_audit_lines` does."""
    if events == 0:
        return []
    found = 0
    for index, line in enumerate(lines):
        found += _audit_event(line.decode("utf-8", errors="replace")) is not None
        if found == events:
            return lines[: index + 1]
    return None


def _audit_event(line: str) -> dict[str, Any] | None:
    try:
        event = json.loads(line.strip())
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


def write_event(
    *, op: str, path: str, old_sha: str, new_sha: str, actor: str, reason: str, ts: str, version_file: str
) -> dict[str, Any]:
    """Build one audit event with exactly upstream's fields."""
    return {
        "ts": ts,
        "op": op,
        "path": path,
        "old_sha": old_sha,
        "new_sha": new_sha,
        "actor": actor,
        "reason": reason,
        "version_file": version_file,
    }
