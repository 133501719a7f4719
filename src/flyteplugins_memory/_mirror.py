"""The working root in upstream's layout: what a handle writes or reads is there as upstream has it.

Upstream's doc promises that ``store.root`` holds the files, ``meta/`` sidecars, ``audit/log.jsonl`` and
``versions/`` as they are written, and agents run code tools in that directory. So every write and delete
lands here at once (file, sidecar, version snapshot, audit line), and every committed file a handle reads
is cached here with its sidecar. What a handle never touched is fetched by ``prefetch()``.

Every function blocks (the state runs them in a thread); every file is replaced atomically (temp file,
then rename) and the audit line is one ``write`` call, so a reader of the root never sees half of one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping

from ._layout import AUDIT_LOG_PATH, sidecar_name
from ._records import MemoryMeta, encode_audit_event, encode_meta
from ._workdir import WorkDir
from ._writes import WritePlan

logger = logging.getLogger(__name__)


#: Given a path about to be written, the locally cached files no longer in the store that may stand in
#: its way (a file where one of its directories goes, or files below where it goes).
StaleAround = Callable[[str], Collection[str]]


def record_change(workdir: WorkDir, plan: WritePlan, stale: StaleAround) -> None:
    """Mirror one write or delete: the file (or its removal) first, so a failure records nothing else."""
    if plan.record is None:
        workdir.remove(plan.path)
        workdir.remove(sidecar_name(plan.path))
    else:
        _replace(workdir, plan.path, plan.data, stale)
        if plan.meta is not None:
            workdir.write(sidecar_name(plan.path), encode_meta(plan.meta))
    if plan.version:
        workdir.write(plan.version, plan.data)
    if plan.event:
        workdir.append(AUDIT_LOG_PATH, encode_audit_event(plan.event))


def cache_committed(
    workdir: WorkDir, contents: Mapping[str, bytes], metas: Mapping[str, MemoryMeta | None], stale: StaleAround
) -> list[str]:
    """Cache verified committed files and their sidecars, best effort (the bytes reach the reader either
    way); returns the paths cached."""
    stored = []
    for path, data in contents.items():
        try:
            _replace(workdir, path, data, stale)
            if (meta := metas.get(path)) is not None:
                workdir.write(sidecar_name(path), encode_meta(meta))
        except OSError as exc:
            logger.warning("Could not cache %r locally (it is fetched again when read): %s", path, exc)
            continue
        stored.append(path)
    return stored


def forget(workdir: WorkDir, paths: Collection[str]) -> None:
    """Remove the local copies (file and sidecar) of `paths`, best effort."""
    for path in paths:
        try:
            workdir.remove(path)
            workdir.remove(sidecar_name(path))
        except OSError as exc:
            logger.warning("Could not remove the local copy of %r: %s", path, exc)


def write_text_file(workdir: WorkDir, name: str, data: bytes) -> None:
    """Replace one bookkeeping file of the root (``messages.json``, ``audit/log.jsonl``)."""
    workdir.write(name, data)


def _replace(workdir: WorkDir, path: str, data: bytes, stale: StaleAround) -> None:
    """Write `path`; if cached files that are no longer part of the store stand in the way (``x``
    where ``x/y`` goes, or ``x/y`` where ``x`` goes), remove them and try once more."""
    try:
        workdir.write(path, data)
    except OSError:
        blocking = [p for p in stale(path) if workdir.exists(p)]
        if not blocking:
            raise
        for name in blocking:
            workdir.remove(name)
        workdir.write(path, data)
