"""Opening stores that have no journal: written by upstream, or an existing local directory.

Such a store is read once in full (a listing plus its sidecars, transcript and audit log) and becomes
checkpoint 0 of a journal; the journal is written by the first save. Its files stay where upstream put
them (records marked ``legacy``) until they are written again. Checkpoint 0 records the import as a
commit of kind ``import``, the oldest entry of `store.log()`.
"""

from __future__ import annotations

import logging

from .._rules.codecs import decode_audit_lines, decode_messages
from .._rules.commit_info import import_info
from .._rules.inventory import files_needing_content, index_files, take_inventory
from .._rules.journal_objects import Checkpoint
from .._rules.layout import AUDIT_LOG_PATH
from .._rules.paths import MESSAGES_PATH
from ..errors import CorruptStore, StorageError
from ..storage._contract import ObjectStorage
from ..storage._workdir import WorkDir

logger = logging.getLogger(__name__)


async def import_remote(remote: ObjectStorage) -> Checkpoint:
    """Checkpoint 0 describing an upstream-written store, with its files left in place."""
    listing = await remote.list()
    inventory = take_inventory(listing)
    contents = await remote.read_many(inventory.present_sidecars() + inventory.bookkeeping())
    contents.update(await remote.read_many(files_needing_content(inventory, contents)))
    _check_sizes(listing, contents)
    messages = decode_messages(contents[MESSAGES_PATH]) if MESSAGES_PATH in contents else []
    events = len(decode_audit_lines(contents.get(AUDIT_LOG_PATH, b"")))
    files = index_files(inventory, contents, legacy=True)
    return Checkpoint(
        seq=0,
        files=files,
        messages=messages,
        audit_total=events,
        legacy_audit_lines=events,
        info=import_info(files, messages),
    )


def _check_sizes(listing: dict[str, int], contents: dict[str, bytes]) -> None:
    """Refuse to import from reads that disagree with the listing (short reads, or a writer in between):
    checkpoint 0 would otherwise pin hashes and transcripts of bytes that are not what is stored."""
    for name, data in contents.items():
        if name in listing and len(data) != listing[name]:
            raise StorageError(f"{name!r} read {len(data)} bytes but is listed with {listing[name]}; try again")


def scan_local(workdir: WorkDir) -> tuple[Checkpoint, list[dict]]:
    """Index an existing local root (blocking): its files as unsaved records, and its transcript."""
    inventory = take_inventory(dict(workdir.scan()))
    names = list(inventory.files) + inventory.present_sidecars() + inventory.bookkeeping()
    contents = {name: data for name in names if (data := workdir.read(name)) is not None}
    return Checkpoint(seq=0, files=index_files(inventory, contents, legacy=False)), _local_transcript(contents)


def _local_transcript(contents: dict[str, bytes]) -> list[dict]:
    """The transcript of a local root, read as upstream reads it: a corrupt one is ignored with a warning.
    (Safe here, unlike for a remote store: an empty local transcript only appends nothing on save.)"""
    if MESSAGES_PATH not in contents:
        return []
    try:
        return decode_messages(contents[MESSAGES_PATH])
    except CorruptStore as exc:
        logger.warning("Ignoring the local transcript: %s", exc)
        return []
