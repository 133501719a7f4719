"""Keeping the bytes of upstream-written files readable after a save changes them.

A store imported from upstream's layout records its files as ``legacy``: their bytes are at the file's
own path, not in the content-addressed blobs. A save that rewrites or deletes such a path replaces those
bytes (after its commit point), so every older state that still names them would read something else.
Before the commit point, therefore, the old bytes are copied into the blob store (read and checked
against their sha256); readers of a legacy record fall back to that blob when the path no longer holds
the bytes (`_journal.contents`). Each legacy file is copied at most once: after the save its record is ours.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .._rules.codecs import sha256_bytes
from .._rules.journal_objects import FileEntry
from .._rules.layout import blob_name
from ..storage._contract import ObjectStorage

logger = logging.getLogger(__name__)


async def preserve_legacy(
    remote: ObjectStorage,
    base: Mapping[str, FileEntry],
    changes: Mapping[str, FileEntry | None],
    held: Mapping[str, bytes] | None = None,
) -> list[str]:
    """Copy into blobs the upstream-written bytes that `changes` is about to replace or delete; those the
    handle `held` (read from its working root before it changed them) are not fetched again when they
    match the record's sha256. Returns the sha256s copied."""
    wanted = {p: base[p] for p in changes if p in base and base[p].legacy and changes[p] != base[p]}
    if not wanted:
        return []
    local = {p: d for p, d in (held or {}).items() if p in wanted and sha256_bytes(d) == wanted[p].sha256}
    found = {**local, **await remote.read_many([p for p in wanted if p not in local])}
    blobs = {}
    for path, record in wanted.items():
        data = found.get(path)
        if data is not None and sha256_bytes(data) == record.sha256:
            blobs[blob_name(record.sha256)] = data
        else:  # already replaced (a concurrent save copied it first) or changed behind our back
            logger.info("Upstream-written bytes of %r are no longer at their path; not copied", path)
    await remote.write_many(blobs)
    return [name.rsplit("/", 1)[-1] for name in blobs]
