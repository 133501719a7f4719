"""An open's second round trip: everything the head hint names, asked for at once (decision 0147).

`for_open` reads, in one `read_many`, the log slots an open probes past the hint, the hinted record (needed
only when nothing follows it), the hinted checkpoint and the parts the head names (`_rules.open_hint`).
`Fetched` hands those answers to the reads that would otherwise make them one after the other
(`_journal.log_reads`), and feeds the parts to the file index they belong to. A guess that proves wrong
(the hint was stale, the checkpoint moved, a part was rewritten) is simply not used: the ordinary read follows.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from .._rules.entries import PartRef
from .._rules.index import CheckpointFiles, load_part
from .._rules.journal_objects import Head
from .._rules.layout import checkpoint_name, log_name, part_name
from .._rules.open_hint import read_hint
from .._rules.state import State
from ..errors import MemoryStoreError
from ..storage._contract import ObjectStorage

__all__ = ["PROBE_SLOTS", "Fetched", "for_open"]

#: Log slots past the hint read at once: a hint one commit behind (a small save's) then costs no wave.
PROBE_SLOTS = 2


@dataclass
class Fetched:
    """Objects read ahead, by logical name: those `asked` for, and of them those `found`."""

    asked: set[str] = field(default_factory=set)
    found: dict[str, bytes] = field(default_factory=dict)

    def answer(self, name: str) -> tuple[bool, bytes | None]:
        """Whether `name` was read ahead, and what it held (None: it did not exist)."""
        return name in self.asked, self.found.get(name)

    def feed_parts(self, index: CheckpointFiles) -> None:
        """Keep the read-ahead parts that `index` references (same sha256), verified like any part; one
        that does not check out is left for the ordinary load, which reports it."""
        for i, ref in enumerate(index.refs):
            name = part_name(ref.sha256)
            if i not in index.loaded and name in self.found:
                _keep(index, i, ref, self.found[name], name)


def _keep(index: CheckpointFiles, i: int, ref: PartRef, data: bytes, name: str) -> None:
    # one that does not check out: the load that needs it reads it again and raises what it finds
    with contextlib.suppress(MemoryStoreError, ValueError):
        index.keep(i, load_part(data, ref, name))


async def for_open(remote: ObjectStorage, head: Head, known: State | None) -> Fetched:
    """Read what an open from `head` needs next, in one round trip (see the module docstring)."""
    hint = read_hint(head)
    names = [log_name(head.seq + i) for i in range(1, PROBE_SLOTS + 1)]
    if head.seq != head.checkpoint:
        names.append(log_name(head.seq))
    has_checkpoint = known is not None and known.checkpoint.seq == head.checkpoint
    stored = hint.checkpoint_stored if hint.checkpoint_stored is not None else head.checkpoint > 0
    if stored and not has_checkpoint:
        names.append(checkpoint_name(head.checkpoint))
        names += [part_name(sha) for sha in hint.parts]
    return Fetched(set(names), await remote.read_many(names))
