"""Planning one path write or delete: precondition, metadata, version name and audit event.

Pure, except `plan_write_off_loop`, which moves the encoding and hashing of large content to a thread.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..errors import ConcurrencyError, CorruptStore, InvalidContent, InvalidMessage
from .codecs import MemoryMeta, sha256_bytes, write_event
from .journal_objects import FileEntry
from .layout import version_name
from .metadata import Scalar
from .offload import off_loop
from .paths import is_unicode


@dataclass(frozen=True)
class WritePlan:
    """Everything one change records: the path, its new record (None: deleted), bytes, version, event."""

    path: str
    record: FileEntry | None
    data: bytes
    meta: MemoryMeta | None
    version: str
    event: dict[str, Any] | None


def _check_expected(current: FileEntry | None, rel: str, expected_sha: str | None) -> str:
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
    #: the written file's user metadata (checked by `_rules.metadata.check_metadata`); a write replaces it
    metadata: dict[str, Scalar] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("actor", "reason"):
            value = getattr(self, name)
            if not isinstance(value, str) or not is_unicode(value):
                raise InvalidMessage(f"{name} must be a str of valid Unicode, got {value!r}")

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
    current: FileEntry | None, rel: str, content: str, options: ChangeOptions, taken_versions: Collection[str] = ()
) -> WritePlan:
    """Decide what writing `content` to `rel` records; raises `ConcurrencyError` on a stale `expected_sha`."""
    return plan_encoded_write(current, rel, encode_text(content), options, taken_versions)


async def plan_write_off_loop(
    current: FileEntry | None,
    rel: str,
    content: str | bytes,
    options: ChangeOptions,
    taken_versions: Collection[str] = (),
) -> WritePlan:
    """`plan_write` of text (a str) or binary content (bytes, stored as they are), encoding and hashing
    large content in a thread (a 100 MB write takes about half a second of CPU, which would otherwise
    stop every other coroutine of the package)."""
    size = len(content) if isinstance(content, str | bytes) else 0  # anything else: refused inline
    if isinstance(content, bytes):
        encoded = await off_loop(size, encode_binary, content)
    else:
        encoded = await off_loop(size, encode_text, content)
    return plan_encoded_write(current, rel, encoded, options, taken_versions)


def encode_binary(data: bytes) -> tuple[bytes, str]:
    """`data` (binary content is stored byte for byte) and its sha256."""
    return data, sha256_bytes(data)


def binary_content(data: object) -> bytes:
    """`data` as immutable bytes (a ``bytearray`` or ``memoryview`` copied now, so a later change of the
    caller's buffer cannot change what is saved); `InvalidContent` for anything else (a str included)."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidContent(f"Binary content must be bytes, got {type(data).__name__} (use write_text for a str)")


def text_content(content: object) -> str:
    """`content` if it is a str (text writes refuse bytes: `write_bytes` takes them); else `InvalidContent`."""
    if not isinstance(content, str):
        raise InvalidContent(f"File content must be a str, got {type(content).__name__}")
    return content


def encode_text(content: str) -> tuple[bytes, str]:
    """The UTF-8 bytes of `content` and their sha256; `InvalidContent` if it has none."""
    if not isinstance(content, str):
        raise InvalidContent(f"File content must be a str, got {type(content).__name__}")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidContent(f"File content is not valid Unicode: {exc}") from exc
    return data, sha256_bytes(data)


def plan_encoded_write(
    current: FileEntry | None,
    rel: str,
    encoded: tuple[bytes, str],
    options: ChangeOptions,
    taken_versions: Collection[str] = (),
) -> WritePlan:
    """`plan_write` of content already encoded (bytes and sha256, from `encode_text`)."""
    old_sha = _check_expected(current, rel, options.expected_sha)
    data, sha = encoded
    now = datetime.now(UTC)
    meta = MemoryMeta(rel, sha, _seconds(now), options.actor, options.reason, len(data), options.metadata)
    version = _version(rel, now, meta.sha256, taken_versions) if options.keep_versions else ""
    event = options.event("update" if old_sha else "create", rel, old_sha, meta.sha256, meta.updated_at, version)
    return WritePlan(rel, FileEntry.from_meta(meta), data, meta, version, event)


def plan_delete(
    current: FileEntry, rel: str, options: ChangeOptions, taken_versions: Collection[str] = ()
) -> WritePlan:
    """Decide what deleting `rel` records: a tombstone version (empty, ``..._deleted.txt``) and an event."""
    old_sha = _check_expected(current, rel, options.expected_sha)
    now = datetime.now(UTC)
    version = _version(rel, now, "deleted", taken_versions) if options.keep_versions else ""
    return WritePlan(rel, None, b"", None, version, options.event("delete", rel, old_sha, "", _seconds(now), version))


def _seconds(now: datetime) -> str:
    """Second-resolution UTC ISO-8601, the timestamp upstream writes."""
    return now.isoformat(timespec="seconds")


#: The snapshot token: microsecond (6 digits), counter (2), random hex (4).
_TOKEN_BYTES = 12


def longest_version_name(rel: str) -> str:
    """The longest snapshot name a write of `rel` can get (`_rules.limits` checks it fits everywhere)."""
    return version_name(rel, "0000-00-00T00:00:00+00:00", f"{'0' * 64}_{'0' * _TOKEN_BYTES}")


#: Breaks ties between snapshots taken within one microsecond by this process.
_TIE_BREAK = itertools.count()


def _version(rel: str, now: datetime, sha: str, taken: Collection[str]) -> str:
    """A snapshot name no other write can take: upstream's ``<ts>_<sha>`` plus a token that orders
    snapshots within their second (microsecond, then a process counter) and keeps two writers (or one
    writer before and after a save) of the same bytes in the same second apart (random part)."""
    while True:
        token = f"{now.microsecond:06d}{next(_TIE_BREAK) % 100:02d}{secrets.token_hex(2)}"
        name = version_name(rel, _seconds(now), f"{sha}_{token}")
        if name not in taken:
            return name
