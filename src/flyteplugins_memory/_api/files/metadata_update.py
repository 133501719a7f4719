"""A metadata-only update (`MemoryStore.set_metadata`): the file's bytes written again with new metadata.

It is an ordinary write (audited, versioned, merged and conflicting like any other), so releases that do not know
metadata see nothing new. The content is read first and the write is pinned to it: if the file changes
in between (another coroutine of this handle), the update raises `ConcurrencyError` rather than write
back stale bytes. Only the labels change: every other per-file extension of the entry (its ttl's
``expires_at`` above all) is carried over, so relabelling a file never makes a temporary file permanent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..._handle.checkout import Checkout, TranscriptHolder
from ..._handle.working_copy import WorkingCopy
from ..._rules.codecs import MemoryMeta, sha256_bytes
from ..._rules.metadata import EXT_KEY
from ..._rules.writes import ChangeOptions
from ...errors import ConcurrencyError


async def set_metadata(
    holder: TranscriptHolder, session: Checkout, rel: str, options: ChangeOptions
) -> MemoryMeta | None:
    """Rewrite `rel` with `options.metadata`, keeping its other extensions; None if there is no such file."""
    data = await session.read(holder, rel)
    if data is None:
        return None
    sha = sha256_bytes(data)
    if options.expected_sha is not None and options.expected_sha != sha:
        raise ConcurrencyError(rel, expected_sha=options.expected_sha, actual_sha=sha)
    kept = await session.look(holder, lambda view: kept_ext(view, rel, sha), paths=[rel])
    # the same bytes go back as they are: a text file stays its UTF-8, a binary file (`write_bytes`) its bytes
    return await session.write(holder, rel, data, replace(options, expected_sha=sha), kept)


def kept_ext(view: WorkingCopy, rel: str, sha: str) -> dict[str, Any]:
    """The extensions of `rel`'s entry a relabelling keeps: all but its labels (none if the entry no longer
    holds `sha`: the pinned write then refuses anyway)."""
    entry = view.entry(rel)
    if entry is None or entry.sha256 != sha:
        return {}
    return {k: v for k, v in entry.ext.items() if k != EXT_KEY}
