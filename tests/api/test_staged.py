"""Staged memories (`propose`, `proposals`, `accept`, `discard`): a proposal touches nothing at its path,
lives in the journal (surviving reopens, task I/O and the previous release's saves), is accepted as one
audited write in a commit of its own, follows only the allowed transitions, and of concurrent decisions
(threads and processes) exactly one lands. Local disk and S3 (moto)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from flyteplugins_memory import (
    ConcurrencyError,
    InvalidArgument,
    InvalidContent,
    InvalidMessage,
    InvalidMetadata,
    InvalidPath,
    InvalidTransition,
    MemoryStore,
    Proposal,
    ProposalConflict,
    ProposalNotFound,
    ReadOnlyPath,
    ReservedPath,
)
from flyteplugins_memory._api import staged as _staged
from flyteplugins_memory._rules.proposals import MAX_CONTENT_BYTES
from released import ISSUE_9_RELEASE, released_source, run_released
from repo import SUPPORT

WORKERS = str(SUPPORT / "workers.py")
TAGS = {"user": "alice", "turn": 3, "pinned": True}


def proposed(key: str, path: str = "memory/tea.md", content: str = "likes green tea", **kwargs) -> Proposal:
    """A new store holding one saved draft (and a file `other.md`)."""
    store = MemoryStore.create(key=key)
    store.write_text("other.md", "other")
    found = store.propose(path, content, actor="agent-1", reason="heard it", metadata=TAGS, **kwargs)
    store.save()
    return found


def stored_proposals(backend, key: str) -> dict:
    """The proposals the newest journal record holds (read from storage, not through a store)."""
    journal = backend.journal(key)
    logs = sorted(name for name in journal if name.startswith("meta/.journal/log/"))
    return json.loads(journal[logs[-1]]).get("ext", {}).get("proposals", {})


def test_propose_touches_nothing_at_its_path_and_lands_in_the_journal(durable_backend, key):
    draft = proposed(key)
    assert draft.status == "draft" and draft.content == "likes green tea" and draft.metadata == TAGS
    assert "memory/tea.md" not in durable_backend.upstream_view(key)
    assert not any("tea" in name for name in durable_backend.objects(key))  # no file, sidecar or version
    on_disk = stored_proposals(durable_backend, key)[draft.id]
    assert on_disk["path"] == "memory/tea.md" and on_disk["status"] == "draft" and on_disk["content"] == draft.content
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.list_paths() == ["other.md"] and not fresh.exists("memory/tea.md")
    assert fresh.proposal(draft.id) == draft
    audit = fresh.audit_tail(0)
    assert [(e["op"], e.get("proposal")) for e in audit if e["path"] == "memory/tea.md"] == [("propose", draft.id)]


def test_proposals_filter_by_status_and_prefix(local_backend, key):
    store = MemoryStore.create(key=key)
    a = store.propose("memory/a.md", "a")
    b = store.propose("memory/b.md", "b")
    c = store.propose("notes/c.md", "c")
    assert {p.id for p in store.proposals()} == {a.id, b.id, c.id}  # unsaved ones are listed too
    store.save()
    store.accept(a.id)
    store.discard(b.id)
    fresh = MemoryStore.get_or_create(key=key)
    assert [p.id for p in fresh.proposals("draft")] == [c.id]
    assert [p.id for p in fresh.proposals("accepted")] == [a.id]
    assert [p.id for p in fresh.proposals("discarded")] == [b.id]
    assert {p.id for p in fresh.proposals(prefix="memory")} == {a.id, b.id}
    assert fresh.proposals("draft", prefix="memory") == []


def test_accept_is_one_audited_write_with_the_metadata(durable_backend, key):
    draft = proposed(key)
    reviewer = MemoryStore.get_or_create(key=key)  # another handle than the proposer's
    accepted = reviewer.accept(draft.id, actor="reviewer", reason="checked")
    assert accepted.status == "accepted" and accepted.decided_by == "reviewer" and accepted.content is None
    before = len(reviewer.log(limit=100))
    reviewer.compact()  # brings audit/log.jsonl up to date for upstream's readers
    assert len(reviewer.log(limit=100)) == before  # the accept was already committed: nothing new to save

    upstream = durable_backend.upstream_view(key)
    assert upstream["memory/tea.md"] == b"likes green tea"
    sidecar = json.loads(upstream["meta/memory%2Ftea.md.json"])
    assert sidecar["updated_by"] == "reviewer" and sidecar["reason"] == "checked"
    events = [json.loads(line) for line in upstream["audit/log.jsonl"].splitlines()]
    ops = [(e["op"], e["actor"]) for e in events if e["path"] == "memory/tea.md"]
    assert ops == [("propose", "agent-1"), ("create", "reviewer"), ("accept", "reviewer")]
    assert stored_proposals(durable_backend, key)[draft.id]["status"] == "accepted"
    assert "content" not in stored_proposals(durable_backend, key)[draft.id]  # the file holds it now

    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("memory/tea.md") == "likes green tea"
    assert fresh.get_meta("memory/tea.md").metadata == TAGS
    newest = fresh.log(limit=1)[0]
    assert newest.wrote == ("memory/tea.md",) and newest.actor == "reviewer" and newest.reason == "checked"


def test_accept_saves_the_handles_own_changes_first(local_backend, key):
    draft = proposed(key)
    store = MemoryStore.get_or_create(key=key)
    store.write_text("mine.md", "mine")
    store.append({"role": "user", "content": "hi"})
    store.records("events").append({"n": 1})
    store.accept(draft.id, actor="reviewer")
    assert not store.has_unsaved_changes()
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("mine.md") == "mine" and fresh.messages[-1]["content"] == "hi"
    assert fresh.records("events").read() == [{"n": 1}]
    own, decision = fresh.log(limit=2)[::-1]  # two commits: the handle's changes, then the decision
    assert "mine.md" in own.wrote and own.actor != "reviewer" and list(decision.wrote) == ["memory/tea.md"]
    assert fresh.read_text("memory/tea.md") == "likes green tea"


def test_discard_leaves_the_path_alone(durable_backend, key):
    draft = proposed(key)
    store = MemoryStore.get_or_create(key=key)
    discarded = store.discard(draft.id, actor="reviewer", reason="not true")
    assert discarded.status == "discarded" and discarded.decision_reason == "not true"
    assert "memory/tea.md" not in durable_backend.upstream_view(key)
    assert stored_proposals(durable_backend, key)[draft.id]["status"] == "discarded"
    fresh = MemoryStore.get_or_create(key=key)
    assert not fresh.exists("memory/tea.md") and fresh.proposal(draft.id).status == "discarded"
    assert [e["op"] for e in fresh.audit_tail(0) if e.get("proposal") == draft.id] == ["propose", "discard"]


def test_a_handle_opened_before_a_proposal_was_saved_can_decide_it(local_backend, key):
    MemoryStore.create(key=key, read_only_prefixes=("memory/",))
    untrusted = MemoryStore.get_or_create(key=key, read_only_prefixes=("memory/",))
    trusted = MemoryStore.get_or_create(key=key, read_only_prefixes=("memory/",), trusted=True)
    untrusted.list_paths(), trusted.list_paths()  # both loaded before the proposal exists
    agent = MemoryStore.get_or_create(key=key)
    draft = agent.propose("memory/tea.md", "tea")
    agent.save()
    with pytest.raises(ReadOnlyPath):  # admitted at the newest commit, where the proposal is
        untrusted.accept(draft.id)
    assert untrusted.proposal(draft.id).status == "draft" and not untrusted.has_unsaved_changes()
    assert trusted.accept(draft.id).status == "accepted"
    assert MemoryStore.get_or_create(key=key).read_text("memory/tea.md") == "tea"


def test_discarding_an_accepted_proposal_keeps_its_file(local_backend, key):
    draft = proposed(key)
    store = MemoryStore.get_or_create(key=key)
    store.accept(draft.id)
    assert store.discard(draft.id).status == "discarded"
    assert MemoryStore.get_or_create(key=key).read_text("memory/tea.md") == "likes green tea"


def test_every_other_transition_is_refused_and_changes_nothing(durable_backend, key):
    draft = proposed(key)
    other = MemoryStore.get_or_create(key=key).propose("memory/x.md", "x")
    store = MemoryStore.get_or_create(key=key)
    store.accept(draft.id)
    commits = len(store.log(limit=100))
    with pytest.raises(InvalidTransition, match="accepted"):
        store.accept(draft.id)
    store.discard(draft.id)
    with pytest.raises(InvalidTransition):
        store.accept(draft.id)
    with pytest.raises(InvalidTransition):
        store.discard(draft.id)
    assert len(store.log(limit=100)) == commits + 1  # only the one allowed discard committed
    assert not store.has_unsaved_changes()
    with pytest.raises(ProposalNotFound):
        store.accept(other.id)  # never saved by its handle: no such proposal in the store


def test_unknown_ids_and_bad_input_raise_typed_errors(local_backend, key):
    store = MemoryStore.create(key=key)
    for call in (store.accept, store.discard, store.proposal):
        with pytest.raises(ProposalNotFound) as caught:
            call("no-such-id")
        assert isinstance(caught.value, KeyError) and "no-such-id" in str(caught.value)
    with pytest.raises(InvalidArgument):
        store.accept(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.proposals("pending")
    with pytest.raises(InvalidContent):
        store.propose("a.md", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidContent):
        store.propose("a.md", "x" * (MAX_CONTENT_BYTES + 1))
    with pytest.raises(InvalidMetadata):
        store.propose("a.md", "x", metadata={"k": [1]})  # type: ignore[dict-item]
    with pytest.raises(ReservedPath):
        store.propose("meta/a.md", "x")
    with pytest.raises(InvalidPath):
        store.propose("../a.md", "x")
    with pytest.raises(InvalidMessage):
        store.propose("a.md", "x", actor=3)  # type: ignore[arg-type]
    assert store.proposals() == [] and not store.has_unsaved_changes()


def test_a_read_only_prefix_takes_proposals_and_only_a_trusted_handle_accepts_them(durable_backend, key):
    store = MemoryStore.create(key=key, read_only_prefixes=("memory/",))
    with pytest.raises(ReadOnlyPath):
        store.write_text("memory/tea.md", "direct")
    draft = store.propose("memory/tea.md", "likes green tea")
    store.save()
    with pytest.raises(ReadOnlyPath):
        store.accept(draft.id)
    with pytest.raises(ReadOnlyPath):
        store.discard(draft.id)
    assert "memory/tea.md" not in durable_backend.upstream_view(key)
    trusted = MemoryStore.get_or_create(key=key, read_only_prefixes=("memory/",), trusted=True)
    trusted.accept(draft.id, actor="reviewer")
    assert durable_backend.upstream_view(key)["memory/tea.md"] == b"likes green tea"
    assert stored_proposals(durable_backend, key)[draft.id]["status"] == "accepted"


def test_concurrent_accepts_in_threads_exactly_one_wins(durable_backend, key):
    draft = proposed(key)
    handles = [MemoryStore.get_or_create(key=key) for _ in range(4)]
    for handle in handles:
        handle.proposals()  # every handle saw the draft before the race
    outcomes: list[object] = [None] * len(handles)
    start = threading.Barrier(len(handles))

    def accept(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = handles[i].accept(draft.id, actor=f"w{i}")
        except (ProposalConflict, InvalidTransition) as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=accept, args=(i,)) for i in range(len(handles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if isinstance(o, Proposal)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, ConcurrencyError | InvalidTransition) for o in outcomes if o is not winners[0])
    assert all(not h.has_unsaved_changes() for h in handles)  # the losers hold nothing to save
    _one_accept_landed(durable_backend, key, draft, winners[0].decided_by)


def _one_accept_landed(backend, key: str, draft: Proposal, winner: str | None) -> None:
    fresh = MemoryStore.get_or_create(key=key)
    accepts = [e for e in fresh.audit_tail(0) if e["op"] == "accept"]
    writes = [e for e in fresh.audit_tail(0) if e["path"] == draft.path and e["op"] in ("create", "write")]
    assert [e["actor"] for e in accepts] == [winner] and [e["actor"] for e in writes] == [winner]
    assert len([c for c in fresh.log(limit=100) if draft.path in c.wrote]) == 1
    assert backend.upstream_view(key)[draft.path] == draft.content.encode()
    assert stored_proposals(backend, key)[draft.id]["decided_by"] == winner


def test_concurrent_accepts_in_processes_exactly_one_wins(durable_backend, key, request, tmp_path):
    draft = proposed(key)
    endpoint = request.getfixturevalue("moto_endpoint") if durable_backend.name == "s3" else None
    go = tmp_path / "go"
    config = {"raw": durable_backend.raw_data_path, "endpoint": endpoint, "key": key, "id": draft.id, "go": str(go)}
    procs = [
        subprocess.Popen(
            [sys.executable, WORKERS, "accept_proposal", json.dumps({**config, "worker": w})],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(2)
    ]
    go.touch()
    errors = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        errors.append(json.loads(out.strip().splitlines()[-1])["error"])
    assert errors.count("") == 1, errors
    assert set(errors) - {""} <= {"ProposalConflict", "InvalidTransition"}
    winner = f"w{errors.index('')}"
    _one_accept_landed(durable_backend, key, draft, winner)


def test_proposals_survive_a_task_boundary_and_merge_with_concurrent_saves(durable_backend, key):
    draft = proposed(key)
    a, b = MemoryStore.get_or_create(key=key), MemoryStore.get_or_create(key=key)
    pa = a.propose("memory/a.md", "from a")
    pb = b.propose("memory/b.md", "from b")
    b.write_text("b.md", "b")
    a.save()
    b.save()  # rebases onto a's commit: both proposals and the draft stay
    received = MemoryStore._deserialize(b._serialize())
    assert {p.id for p in received.proposals("draft")} == {draft.id, pa.id, pb.id}
    received.accept(pa.id)
    assert set(stored_proposals(durable_backend, key)) == {draft.id, pa.id, pb.id}
    assert MemoryStore.get_or_create(key=key).proposal(pa.id).status == "accepted"


def test_a_conflicting_write_to_the_path_keeps_the_decision_unmade(local_backend, key):
    draft = proposed(key)
    store = MemoryStore.get_or_create(key=key)
    store.write_text("memory/tea.md", "mine", expected_sha="")
    other = MemoryStore.get_or_create(key=key)
    other.write_text("memory/tea.md", "theirs")
    other.save()
    with pytest.raises(ConcurrencyError):
        store.accept(draft.id)  # saving its own write first conflicts: nothing is decided
    assert MemoryStore.get_or_create(key=key).proposal(draft.id).status == "draft"


# -- the deployed previous release ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    return released_source(ISSUE_9_RELEASE, tmp_path_factory.mktemp("previous"))


@pytest.mark.slow
def test_the_previous_release_saves_a_store_with_proposals_without_losing_them(durable_backend, key, previous, request):
    draft = proposed(key)
    endpoint = request.getfixturevalue("moto_endpoint") if durable_backend.name == "s3" else None
    config = {"key": key, "raw": durable_backend.raw_data_path, "endpoint": endpoint}
    run_released(previous, "write", config | {"writes": {"old.md": "old"}})
    fresh = MemoryStore.get_or_create(key=key)
    assert fresh.read_text("old.md") == "old" and fresh.proposal(draft.id) == draft
    fresh.accept(draft.id)
    seen = run_released(previous, "read", config)
    assert seen["error"] == "" and seen["result"]["memory/tea.md"] == "likes green tea"


# -- the CLI -------------------------------------------------------------------------------------------------


def cli(*args: str):
    from click.testing import CliRunner

    from flyteplugins_memory.cli import memory

    return CliRunner().invoke(memory, list(args))


def test_cli_lists_accepts_and_discards_proposals(tmp_path):
    uri = str(tmp_path / "store")
    store = MemoryStore("cli", remote_path=uri, read_only_prefixes=("memory/",))
    hostile = store.propose("memory/a.md", "tea \x1b[31mred", reason="heard \x1b]0;x\x07")
    other = store.propose("notes/b.md", "b")
    store.save()

    listed = cli("proposals", "--uri", uri)
    assert listed.exit_code == 0 and hostile.id[:8] in listed.stdout and "\x1b" not in listed.stdout  # shown, not run
    drafts = json.loads(cli("proposals", "--uri", uri, "--status", "draft", "--json").stdout)["proposals"]
    assert {p["id"] for p in drafts} == {hostile.id, other.id}

    accepted = cli("accept", hostile.id, "--uri", uri, "--trusted", "--actor", "rev", "--reason", "ok", "--json")
    assert accepted.exit_code == 0, accepted.stderr
    assert json.loads(accepted.stdout)["proposal"]["status"] == "accepted"
    assert (tmp_path / "store" / "memory" / "a.md").read_text() == "tea \x1b[31mred"  # landed in storage
    again = cli("accept", hostile.id, "--uri", uri)
    assert again.exit_code == 1 and again.stderr.startswith("error: ") and "accepted" in again.stderr
    assert cli("discard", "nope", "--uri", uri).exit_code == 1
    assert cli("proposals", "--uri", uri, "--status", "pending").exit_code == 2

    discarded = cli("discard", other.id, "--uri", uri, "--reason", "no")
    assert discarded.exit_code == 0 and "discarded" in discarded.stdout
    fresh = MemoryStore.open(remote_path=uri)
    assert fresh.proposal(other.id).status == "discarded" and not fresh.exists("notes/b.md")
    assert [p["id"] for p in json.loads(cli("proposals", "--uri", uri, "--json").stdout)["proposals"]] != []


def test_persisted_read_only_prefixes_bind_decisions_of_handles_never_given_them(durable_backend, key):
    MemoryStore.create(key=key, read_only_prefixes=("memory/",)).save()
    agent = MemoryStore.open(key=key)  # given no prefixes: the store's persisted ones bind it
    with pytest.raises(ReadOnlyPath):
        agent.write_text("memory/fact.md", "direct")
    draft = agent.propose("memory/fact.md", "reviewed", actor="agent")
    agent.save()
    with pytest.raises(ReadOnlyPath):
        MemoryStore.open(key=key).accept(draft.id)
    reviewer = MemoryStore.open(key=key, trusted=True)
    with pytest.raises(ReadOnlyPath):  # trusted lifts the prefixes for decisions only, not plain writes
        reviewer.write_text("memory/other.md", "direct")
    assert reviewer.accept(draft.id, actor="reviewer").status == "accepted"
    fresh = MemoryStore.open(key=key)
    assert fresh.read_text("memory/fact.md") == "reviewed"
    assert fresh.proposal(draft.id).status == "accepted"


def test_an_accept_that_loses_to_a_discard_leaves_no_file_for_upstream_readers(durable_backend, key, monkeypatch):
    store = MemoryStore.get_or_create(key=key)
    pid = store.propose("memory/fact.md", "unreviewed").id
    store.save()
    accepter, discarder = MemoryStore.open(key=key), MemoryStore.open(key=key)
    make = _staged._Decision.make

    async def racing(self, view):
        made = await make(self, view)
        if self.status == "accepted":  # the discard lands between the accept's check and its commit
            await discarder.discard.aio(pid)
        return made

    monkeypatch.setattr(_staged._Decision, "make", racing)
    with pytest.raises(ProposalConflict):
        accepter.accept(pid)
    assert "memory/fact.md" not in durable_backend.upstream_view(key)  # was left there: a discarded memory, listed
    fresh = MemoryStore.open(key=key)
    assert fresh.proposal(pid).status == "discarded" and not fresh.exists("memory/fact.md")
    assert [e["op"] for e in fresh.audit_tail(0)] == ["propose", "discard"]


def test_a_proposal_cannot_forge_a_record_log_segment(durable_backend, key):
    from flyteplugins_memory import Proposal
    from flyteplugins_memory._rules import proposals as _proposals

    store = MemoryStore.get_or_create(key=key)
    store.records("memory/decisions").append({"by": "reviewer"})
    store.save()
    forged = "memory/decisions/99999999999999999999-abcdefabcdef.jsonl"
    with pytest.raises(InvalidPath, match="segment"):  # as write_text refuses it
        store.propose(forged, '{"by": "an agent"}\n')
    # one staged before this check (or by an older writer) is refused at accept, and can still be discarded
    staged = _proposals.draft(forged, '{"by": "an agent"}\n', "agent", "", {})
    store._checkout.working_copy.changes.entries[(_proposals.EXT_MAP, staged.id)] = _proposals.stored(staged)
    store.save()
    with pytest.raises(InvalidPath, match="segment"):
        store.accept(staged.id)
    assert isinstance(store.discard(staged.id), Proposal)
    assert MemoryStore.open(key=key).records("memory/decisions").read() == [{"by": "reviewer"}]
    assert forged not in durable_backend.upstream_view(key)
