"""Large objects read as parallel ranged GETs: the parts of one object, fetched side by side.

Why: one GET of a 100 MB object is one TCP stream, bounded by one connection's throughput and, through
botocore, buffered whole before the first byte is handed over. Object stores serve byte ranges of one
object in parallel at full speed each, so a large read costs one round trip of `PART_SIZE` parts instead
of one long stream (`read_in_parts`: at most `MAX_PARTS` parts, so they fit the client's connection
pool), and a streaming reader (`storage._byte_stream`) holds only the
parts it reads ahead. Objects of at most `PART_SIZE` bytes keep their single GET: splitting them buys
nothing and costs requests.

The sizes are module attributes read at each call, so tests make "large" small by patching them.
"""

from __future__ import annotations

from typing import Protocol

from ._fsio import gather_all

__all__ = ["MAX_PARTS", "PART_SIZE", "RangedReader", "is_large", "part_bounds", "read_in_parts"]

#: Bytes per ranged GET. 8 MiB: S3's and GCS's own guidance for parallel range reads (8-16 MiB), and
#: small enough that a streaming read holding a few parts stays far below a 100 MB file.
PART_SIZE = 8 * 1024 * 1024
#: Parts of one whole-object read at most: larger objects take larger parts. s3fs's client holds 10
#: connections (botocore's ``max_pool_connections``), and parts beyond them wait for one: a second round
#: trip (a 100 MB object in 13 parts of 8 MiB took two; in 8 parts of 12.5 MiB it takes one).
MAX_PARTS = 8


class RangedReader(Protocol):
    """What a ranged read needs of storage (`storage.ObjectStorage.read_range`)."""

    async def read_range(self, name: str, start: int, end: int) -> bytes | None: ...


def is_large(size: int) -> bool:
    """Whether an object of `size` bytes is read in parts (more than one `PART_SIZE`)."""
    return size > PART_SIZE


def part_bounds(size: int, part: int | None = None) -> list[tuple[int, int]]:
    """``[start, end)`` of each part of an object of `size` bytes (`PART_SIZE` each, the last shorter);
    one empty range for an empty object, so it is still fetched (and found missing) once."""
    step = part or PART_SIZE
    return [(start, min(start + step, size)) for start in range(0, size, step)] or [(0, 0)]


async def read_in_parts(storage: RangedReader, name: str, size: int) -> bytes | None:
    """Object `name`, expected to be `size` bytes, fetched as at most `MAX_PARTS` parallel ranged GETs of
    at least `PART_SIZE` each, and joined; None if it does not exist. An object of another size comes back
    with its own length (short), or cut at `size`: callers verify the content's hash, which then fails.

    Peak memory is the parts plus the joined copy: twice the object, as one GET's buffer and its copy."""
    step = max(PART_SIZE, -(-size // MAX_PARTS))
    parts = await gather_all(storage.read_range(name, start, end) for start, end in part_bounds(size, step))
    if any(part is None for part in parts):
        return None
    return b"".join(part for part in parts if part is not None)
