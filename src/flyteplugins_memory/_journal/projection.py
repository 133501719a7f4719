"""Step 3 of a save (`_journal.commit`): bring upstream's layout up to date after the commit point, then the
head hint. Upstream reads only this layout (files, sidecars, versions, ``messages.json``), never the journal;
a projection that fails leaves the commit standing and is owed until the next save (`Checkout._repair_projections`).
"""

from __future__ import annotations

from .._rules.codecs import encode_messages, encode_meta
from .._rules.journal_objects import encode
from .._rules.layout import HEAD_NAME, sidecar_name
from .._rules.open_hint import head_for
from .._rules.paths import MESSAGES_PATH
from .._rules.state import State
from .journal_storage import JournalStorage
from .log_reads import read_record
from .opening import latest_state
from .save_job import SaveJob
from .settle import settled

__all__ = ["head_object", "update_upstream_layout", "write_head"]

#: A save changing at most this many files may leave the head hint one commit behind (`write_head`).
SMALL_SAVE_FILES = 4


async def update_upstream_layout(remote: JournalStorage, job: SaveJob, committed: State) -> None:
    """Bring upstream's layout up to date with what this save changed, and the head hint with it (one wave:
    neither depends on the other, both on the commit only), unless a checkpoint follows (``job.checkpointing``),
    which writes the hint itself."""
    objects: dict[str, bytes] = dict(job.versions)
    removed: list[str] = []
    for path, record in job.changes.files.items():
        if record is None:
            removed += [path, sidecar_name(path)]
            continue
        if not record.legacy:  # a file placed in place is at its path already
            objects[path] = job.contents[path]
        if (meta := record.meta(path)) is not None:
            objects[sidecar_name(path)] = encode_meta(meta)
    if job.messages != job.base.messages or job.base.seq == 0:  # messages.json marks the store as existing
        objects[MESSAGES_PATH] = encode_messages(committed.messages)
    await remote.remove_many(removed)  # first: a deleted `x` may be where `x/y` now goes, and vice versa
    small = len(job.changes.files) <= SMALL_SAVE_FILES
    hint = {} if job.checkpointing else head_object(committed, small)
    # upstream's objects and the journal's hint live under two prefixes (`JournalStorage` writes one after the
    # other within one batch): two batches, at once
    await settled(remote.write_many(objects), remote.write_many(hint))  # neither outlives the save
    if hint:
        committed.head_hint = committed.seq
    if MESSAGES_PATH in objects:
        await _newest_transcript_last(remote, committed)


def head_object(committed: State, small: bool = False) -> dict[str, bytes]:
    """The head hint naming `committed`, to write; none if this is a `small` save and the hint names the
    commit just before (`State.head_hint`): a hint one commit behind costs an open nothing (its first probe
    reads the newest record, `_journal.opening`), so a small save after one that wrote the hint leaves it (one
    request of about six), and the next save brings it up to date. The hint never lags by more than one
    commit this way."""
    if small and committed.head_hint == committed.seq - 1 and committed.checkpoint.seq < committed.seq:
        return {}
    return {HEAD_NAME: encode(head_for(committed.seq, committed.checkpoint))}


async def write_head(remote: JournalStorage, committed: State, small: bool = False) -> None:
    """Point the head hint at `committed` (`head_object` says when a small save leaves it)."""
    if hint := head_object(committed, small):
        await remote.write_many(hint)
        committed.head_hint = committed.seq


async def _newest_transcript_last(remote: JournalStorage, committed: State) -> None:
    """Every save that appends rewrites ``messages.json``, so two saves projecting in the opposite order
    of their commits would leave the older transcript there. After writing ours, look past our commit:
    if a newer one exists (its projection may have landed before ours), write the newest transcript.
    A save that commits later projects later, so the last write is always the newest one's."""
    while await read_record(remote, committed.seq + 1) is not None:  # one probe when nothing is newer
        newer = await latest_state(remote, committed) or committed
        await remote.write_many({MESSAGES_PATH: encode_messages(newer.messages)})
        committed = newer
