"""A commit's archive, in OpenRath's own shape: each `MemoryOpCommit` writes its messages, as given, as
JSON to ``memory://session/<id>/commits/<stamp>/messages.json`` (``<stamp>`` the UTC time,
``%Y%m%dT%H%M%S%f``, as OpenRath's local backend names it; a later microsecond if that one is taken), so
two commits of one session are two archives, each readable back as JSON through `MemoryOpRead`.

An archive is an entry like any other (listed, read, kept in the store's history and audit), except that
only a commit writes it (a `MemoryOpWrite` there is ``unauthorized``, like a transcript) and `MemoryOpFind`
does not return it (the local backend searches only its markdown memories; the messages stay searchable
through the session's transcript in our store, ``store.session("openrath-<id>")``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from flyteplugins_memory import MemoryStore

from .uris import path_of

__all__ = ["ARCHIVE_NAME", "COMMITS", "STAMP_FORMAT", "archive_json", "archive_uri", "is_archive", "new_archive"]

COMMITS = "commits"
ARCHIVE_NAME = "messages.json"
STAMP_FORMAT = "%Y%m%dT%H%M%S%f"


def archive_uri(session_id: str, stamp: str) -> str:
    return f"memory://session/{session_id}/{COMMITS}/{stamp}/{ARCHIVE_NAME}"


def is_archive(scope: str, segments: Sequence[str]) -> bool:
    """Whether a parsed URI is a commit's archive, which only `MemoryOpCommit` writes."""
    return scope == "session" and len(segments) == 4 and segments[1] == COMMITS and segments[3] == ARCHIVE_NAME


def new_archive(store: MemoryStore, session_id: str, now: datetime | None = None) -> tuple[str, str]:
    """``(uri, store path)`` of a new archive of `session_id`: stamped `now` (UTC), one microsecond later
    for each stamp this handle already holds an archive at."""
    moment = now or datetime.now(UTC)
    while True:
        uri = archive_uri(session_id, moment.strftime(STAMP_FORMAT))
        path = path_of(uri)
        if store.get_meta(path) is None:
            return uri, path
        moment += timedelta(microseconds=1)


def archive_json(messages: Sequence[Any]) -> str:
    """The archive's text: the messages as given (a mapping copied; another object by its ``role``,
    ``content`` and ``parts``, as the local backend), as a JSON array (indent 2, non-ASCII kept)."""
    return json.dumps([_archived(m) for m in messages], indent=2, ensure_ascii=False, default=str) + "\n"


def _archived(message: Any) -> dict[str, Any]:
    if isinstance(message, Mapping):
        return {str(k): v for k, v in message.items()}
    return {
        name: getattr(message, name)
        for name in ("role", "content", "parts")
        if getattr(message, name, None) is not None
    }
