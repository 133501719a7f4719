"""Pending expiries: what a gc whose expiry commit may have landed still has to remove.

gc removes upstream's copies of an expired file (its file, its sidecar, the ``versions/`` snapshots of the
expired content) only once its commit deleting the file has won: removed earlier, a concurrent rewrite that
makes that commit lose would lose its upstream copy with it. Before committing, gc writes one of these
markers (``expiring/<token>.json`` in the journal), naming each path with the sha256 of its expired
content, and removes it when done. A gc that died in between leaves it behind, and the next gc finishes the
job for every path its newest state no longer holds; a path it holds is left alone: either that commit never
landed (the file is still expired, and found again) or a later save wrote the path (what upstream shows
of it is that save's).

Like any journal object the marker carries the evolution fields; one this version cannot read (malformed,
a newer major, a higher ``min_reader``) is left where it is, and nothing is removed on its say-so.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Annotated

from pydantic import Field, ValidationError

from .._base.version import READER_REVISION
from .._rules.entries import SafePath
from .._rules.formats import Evolving
from .._rules.index import Files
from .._rules.layout import JOURNAL_DIR, sidecar_name
from .._rules.markers import _Lenient, encode_marker
from ..storage._contract import ObjectStorage

logger = logging.getLogger(__name__)

PENDING_DIR = f"{JOURNAL_DIR}/expiring"

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class PendingExpiry(_Lenient, Evolving):
    """The files one gc is deleting as expired: path -> sha256 of the expired content."""

    paths: dict[SafePath, Sha256]


def pending_name() -> str:
    return f"{PENDING_DIR}/{uuid.uuid4().hex}.json"


async def write_pending(remote: ObjectStorage, expired: dict[str, str]) -> str:
    """Record that the expiry of `expired` (path -> sha256) is under way; returns the marker's name."""
    name = pending_name()
    await remote.write_many({name: encode_marker(PendingExpiry(paths=expired))})
    return name


async def read_pending(remote: ObjectStorage) -> dict[str, PendingExpiry]:
    """The pending expiries this version can act on, by marker name."""
    names = sorted(await remote.list(under=PENDING_DIR))
    found = await remote.read_many(names) if names else {}
    return {name: marker for name, data in found.items() if (marker := _parse(name, data)) is not None}


def _parse(name: str, data: bytes) -> PendingExpiry | None:
    try:
        marker = PendingExpiry.model_validate_json(data)
    except ValidationError as exc:
        logger.warning("gc() leaves %s alone: not a pending expiry it can read (%s)", name, exc)
        return None
    if marker.min_reader > READER_REVISION:
        logger.warning("gc() leaves %s alone: written by %s for newer readers", name, marker.writer)
        return None
    return marker


def unfinished(markers: Iterable[PendingExpiry], files: Files) -> dict[str, str]:
    """The paths of `markers` that `files` (all loaded) no longer holds: their expiry committed, and what
    upstream's layout holds of them may still be there."""
    return {p: sha for m in markers for p, sha in m.paths.items() if p not in files}


def upstream_copies(paths: Iterable[str]) -> list[str]:
    """What upstream's layout holds of `paths` outside ``versions/``: each file and its sidecar."""
    return [name for path in sorted(paths) for name in (path, sidecar_name(path))]
