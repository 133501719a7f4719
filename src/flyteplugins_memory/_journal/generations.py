"""A key's generations: the new store a key takes after `delete_store`, and finding the newest one.

A deleted store leaves its deletion record in its journal (``head.json`` and log slot ``k``, see
`_journal.store_deletion`). The first ``create`` of the key after that claims slot ``k+1`` of the same journal,
create-only, with a `Successor` marker naming generation ``g+1``, whose journal lives apart and starts
empty (`_rules.journal_location.generation_root`); the create then commits there as every create does (its
exclusive ``log/1``). So:

- concurrent creators agree on the generation (one claim wins, the others read it back) and then race on
  its ``log/1`` as creators always do: exactly one new store;
- a stale handle of the deleted generation never names the new journal: its save meets the deletion record
  in its own (head or slot) and raises `StoreDeleted`, as versions before this one do (they refuse the
  record as a newer format);
- nothing of the deleted store is readable through the new one: its journal was swept but for the record,
  the new journal starts empty, and the store prefix (upstream's layout) was swept by the deletion.

Opening follows the chain only when it meets a deletion record (a key never deleted pays nothing): two
reads per deleted generation, the head and the slot after its record.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import ValidationError

from .._rules.journal_location import generation_of, generation_root
from .._rules.journal_objects import Head
from .._rules.layout import HEAD_NAME, log_name
from .._rules.markers import Deleted, Successor, encode_marker, parse_deleted, parse_successor
from ..errors import CorruptStore
from .journal_storage import JournalStorage

#: A hostile journal could chain successors forever; no real key is deleted this often.
MAX_GENERATIONS = 100_000


def at_generation(remote: JournalStorage, generation: int) -> JournalStorage:
    """`remote` (any generation's view of the store) with its journal names mapped to `generation`'s."""
    if generation_of(remote.journal_root) == generation:
        return remote
    return remote.with_journal_root(generation_root(remote.prefix, generation))


async def newest_generation(remote: JournalStorage, generation: int = 0) -> tuple[JournalStorage, int, Deleted | None]:
    """The newest generation of the key, following successors from `generation`: its view, its number,
    and its deletion record if it was deleted too (None: it stands, or was never created)."""
    current = at_generation(remote, generation)
    for _ in range(MAX_GENERATIONS):
        deleted = await _deletion_record(current)
        if deleted is None:
            return current, generation, None
        successor = parse_successor(await current.read(log_name(deleted.seq + 1)))
        if successor is None:
            return current, generation, deleted
        if successor.generation <= generation:
            raise CorruptStore(f"Generation {generation} of {remote.uri} names an older successor")
        current, generation = at_generation(remote, successor.generation), successor.generation
    raise CorruptStore(f"The generations of {remote.uri} do not end")


async def generation_to_create(remote: JournalStorage, generation: int = 0) -> tuple[JournalStorage, int]:
    """Where a create of the key commits: the newest generation, or, if that one was deleted, the one
    after it (claimed here, or by a concurrent creator that got there first)."""
    current, generation, deleted = await newest_generation(remote, generation)
    if deleted is None:
        return current, generation
    slot = log_name(deleted.seq + 1)
    claim = encode_marker(Successor(successor=True, generation=generation + 1, at=_now()))
    await current.create_exclusive(slot, claim)  # lost: another creator claimed it; read what it claimed
    claimed = parse_successor(await current.read(slot))
    if claimed is None or claimed.generation <= generation:
        raise CorruptStore(f"The slot after the deletion record of {current.uri} holds no successor")
    return at_generation(remote, claimed.generation), claimed.generation


async def _deletion_record(journal: JournalStorage) -> Deleted | None:
    """The deletion record of `journal`'s store, if it was deleted: in its head, or in the slot after the
    commit its head names (a save that committed just before the deletion may write its head hint after
    the deletion wrote the record there; the record then sits in the slot after that save's commit)."""
    data = await journal.read(HEAD_NAME)
    deleted = parse_deleted(data)
    if deleted is not None or data is None:
        return deleted
    try:
        head = Head.model_validate_json(data)
    except (ValidationError, ValueError):
        return None  # not a head this version reads: opening it says what it is
    return parse_deleted(await journal.read(log_name(head.seq + 1)))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
