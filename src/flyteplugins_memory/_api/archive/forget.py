"""What an export leaves out of its archive, or archives redacted: nothing expired travels (DESIGN.md 5b).

Before gc() runs, a file whose ttl ran out is still stored: its content (blobs, ``versions/`` snapshots,
search segments, upstream's copy) and its labels, inline in the commit records and checkpoints (and index
parts) that wrote or carried its entry. An export archives neither (`_journal.gc.expired_now` says which):

- the objects holding expired content are left out (`Forgetting.select`);
- records and checkpoints are archived as gc() would leave them: redacted with purge's redaction
  (`_journal.redact.redact_object`), the expired entries' labels gone, their expiry kept, so the imported store
  reads those entries as expired, as `at()` and `history()` of the source do;
- an index part holding such labels is left out, and the part cut again without them (the one each
  redacted checkpoint names) goes in its place, at the end of the archive (`Forgetting.cut_parts`).

Each object is redacted as it is read, so what a purge or gc rewrote meanwhile is archived as rewritten.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from ..._journal.export_state import Read, Source
from ..._journal.gc import ExpiredNow, expired_now
from ..._journal.journal_storage import JournalStorage
from ..._journal.old_journal import old_view
from ..._journal.redact import Rewritten, part_holds, redact_object
from ..._rules.archive_format import journal_member, store_member
from ..._rules.codecs import sha256_bytes
from ..._rules.layout import JOURNAL_DIR, part_name

__all__ = ["Forgetting", "forgetting"]

PARTS = f"{JOURNAL_DIR}/parts/"


async def forgetting(remote: JournalStorage) -> Forgetting:
    """What an export of the store at `remote` leaves out or redacts, now."""
    return Forgetting(remote, await expired_now(remote))


@dataclass
class Forgetting:
    """See the module docstring. Sources by whether they are in the (moved) journal: the objects named
    ``meta/.journal/...`` under the prefix are a journal too (the store's own before it moved, or an old
    one left behind), whose parts are read there."""

    remote: JournalStorage
    expired: ExpiredNow
    #: per journal (in the moved journal or under the prefix): the parts cut again
    done: dict[bool, Rewritten] = field(default_factory=lambda: {False: Rewritten(), True: Rewritten()})

    def select(self, names: dict[str, Source]) -> dict[str, Source]:
        """`names` without the objects that hold expired content: no archive carries content whose ttl
        ran out, whether or not gc() has run (the records that name it say it expired)."""
        left_out = self.expired.objects
        if not left_out:
            return names
        return {m: s for m, s in names.items() if not (s[1] in left_out and self._current(s))}

    def _current(self, source: Source) -> bool:
        """Whether `source` is an object of the store's current journal or upstream layout (`expired_now`
        names those), not of an old journal a moved store left under its prefix."""
        in_journal, name, _ = source
        if not _in_journal(name):
            return not in_journal
        return in_journal or not self.remote.journal_moved

    async def redact(self, reads: list[Read]) -> list[Read]:
        """`reads` with their records and checkpoints redacted, and the parts holding labels of expired
        entries emptied (None: left out, as an object gone when read)."""
        redaction = self.expired.labels
        if redaction is None:
            return reads
        out: list[Read] = []
        for read in reads:
            member, (in_journal, name, _), data, _ = read
            if data is None or not _is_journal(in_journal, name):
                out.append(read)
            elif name.startswith(PARTS):
                out.append(read if not part_holds(data, redaction) else (member, read[1], None, ""))
            else:
                view = self.remote if in_journal else old_view(self.remote)
                redacted = await redact_object(view, name, data, redaction, self.done[in_journal])
                out.append(read if redacted is None else (member, read[1], redacted, ""))
        return out

    def cut_parts(self, archived: Container[str]) -> list[Read]:
        """The parts the redacted checkpoints name instead of the ones left out, less those `archived`
        already holds (by member name)."""
        out: list[Read] = []
        for in_journal, done in self.done.items():
            for sha, data in sorted(done.cut.items()):
                name = part_name(sha)
                member = journal_member(name) if in_journal else store_member(name)
                if member not in archived:
                    out.append((member, (in_journal, name, len(data)), data, sha256_bytes(data)))
        return out


def _in_journal(name: str) -> bool:
    return name.startswith(JOURNAL_DIR + "/")


def _is_journal(in_journal: bool, name: str) -> bool:
    """Whether object `name` is a journal's (the moved one, or one under the prefix)."""
    return in_journal or _in_journal(name)
