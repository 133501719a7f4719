"""Acting as a version of this package from before the journal moved out of the store prefix.

Such a version kept its journal in ``meta/.journal/`` inside the store prefix, never fenced anything and
knew no markers: it parses a fence, a moved head or a tombstone with its strict record models, and so
refuses them (as `CorruptStore`: it had no loose look at a newer ``format`` either). `old_version()`
makes this process behave exactly so (the record models themselves only grew fields such a version never
meets in an old journal); `python tests/support/oldversion.py writer '<json>'` runs an older writer as a child
process. `tests/support/released.py` runs the released code of an exact commit instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator


@contextlib.contextmanager
def old_version() -> Iterator[None]:
    """While inside, every store of this process uses the old journal location and knows no markers."""
    import pytest

    from flyteplugins_memory._journal import journal_storage, log_reads
    from flyteplugins_memory._rules import journal_objects as _journal
    from flyteplugins_memory._rules.journal_location import old_journal_root

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(journal_storage, "journal_root", old_journal_root)
        patch.setattr(log_reads, "parse_marker", lambda data: None)
        patch.setattr(_journal, "refuse_newer_format", lambda data, name, known: None)
        yield


def writer(config: dict) -> None:
    """An older writer with one long-lived handle: `rounds` saves of one new file and one message each,
    refreshing on conflicts; prints one JSON line per round: the round and the error it got, if any."""
    sys.path.insert(0, os.path.dirname(__file__))
    from workers import setup

    setup(config)
    with old_version():
        from flyteplugins_memory import ConcurrencyError, MemoryStore, MemoryStoreError

        store = MemoryStore.get_or_create(key=config["key"])
        open(config["ready"] + f".{config['worker']}", "w").close()
        for round_ in range(config["rounds"]):
            store.write_text(f"old{config['worker']}/r{round_}.txt", str(round_))
            store.append({"role": "user", "content": f"old{config['worker']}:{round_}"})
            error = ""
            try:
                try:
                    store.save()
                except ConcurrencyError:
                    store.refresh()
                    store.save()
            except MemoryStoreError as exc:
                error = type(exc).__name__
            print(json.dumps({"round": round_, "error": error}), flush=True)
            if error:
                return
            time.sleep(config.get("pause", 0.0))


if __name__ == "__main__":
    {"writer": writer}[sys.argv[1]](json.loads(sys.argv[2]))
