"""Each commit carries one typed operation (issue 24, item 3): what the commit path does with it, and the
``kind`` its commit info records, which is the stored format and stays as it was."""

from __future__ import annotations

import pytest

from flyteplugins_memory import MemoryStore
from flyteplugins_memory._journal.save_job import SaveJob
from flyteplugins_memory._rules.fold import Fold
from flyteplugins_memory._rules.journal_objects import Checkpoint
from flyteplugins_memory._rules.merge import Changes
from flyteplugins_memory._rules.operations import (
    ChangeSettings,
    Create,
    Decision,
    Expire,
    FoldTranscript,
    Import,
    Operation,
    Purge,
    Save,
    Settings,
    is_trusted,
    leaves_no_strays,
    merges_whole_index,
    settings_of,
    transcript_event,
)
from flyteplugins_memory._rules.state import State

FOLD = Fold(prefix=("x",), summary={"role": "system", "content": "folded"})
SETTINGS = Settings({"k": 1}, [{"op": "settings"}])


@pytest.mark.parametrize(
    ("operation", "kind", "exclusive", "no_strays", "trusted"),
    [
        (Save(), "save", False, False, False),
        (Create(), "create", True, True, False),
        (Create(SETTINGS), "create", True, True, False),
        (ChangeSettings(SETTINGS), "settings", False, False, False),
        (Decision(), "save", False, True, False),
        (Decision(trusted=True), "save", False, True, True),
        (Expire(), "save", False, False, True),
        (Purge(), "purge", False, True, False),
        (FoldTranscript(FOLD, {"op": "compact"}), "save", False, False, False),
    ],
)
def test_an_operation_decides_the_commit_path_and_the_recorded_kind(
    operation: Operation, kind, exclusive, no_strays, trusted
):
    job = SaveJob(State.at_checkpoint(Checkpoint(seq=0)), Changes(), [], {}, operation=operation, actor="a", reason="r")
    assert job.about().kind == kind and job.about().actor == "a"
    assert job.exclusive is exclusive
    assert job.leaves_no_strays is no_strays is leaves_no_strays(operation)
    assert job.trusted is trusted is is_trusted(operation)
    assert job.fold is (FOLD if isinstance(operation, FoldTranscript) else None)
    # only a purge's and gc's expiry commit merge every search segment: their state must name none they remove
    assert job.whole_index is merges_whole_index(operation) is isinstance(operation, (Purge, Expire))


def test_settings_and_events_travel_with_their_operation():
    assert settings_of(Create(SETTINGS)) is SETTINGS and settings_of(ChangeSettings(SETTINGS)) is SETTINGS
    assert settings_of(Create()) is None and settings_of(Save()) is None
    assert transcript_event(Purge({"op": "purge"})) == {"op": "purge"} and transcript_event(Purge()) is None
    assert transcript_event(FoldTranscript(FOLD, {"op": "compact"})) == {"op": "compact"}
    assert transcript_event(Decision()) is None
    assert Import.kind == "import"


def test_a_job_saves_by_default():
    job = SaveJob(State.at_checkpoint(Checkpoint(seq=0)), Changes(), [], {})
    assert isinstance(job.operation, Save) and job.about().kind == "save"


def test_recorded_kinds_are_unchanged(memory_backend, key):
    store = MemoryStore.create(key=key, trusted=True)
    store.write_text("a.txt", "a")
    store.save()
    store.set_read_only_prefixes(["rules/"])
    store.write_text("b.txt", "b")
    store.save()
    store.purge("b.txt", actor="me", reason="test")
    assert [c.kind for c in reversed(store.log())] == ["create", "save", "settings", "save", "purge"]
