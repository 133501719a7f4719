"""The Upsonic storage adapter (``adapters.upsonic``), on local disk and moto S3.

Upsonic cannot be installed beside flyte (it pins protobuf<6), so most of this file tests the contract as
Upsonic documents it (``upsonic.storage.base.Storage``) over plain dicts: sessions with their runs, user
memories, cultural knowledge, knowledge rows, models, usage entries, what lands in storage (read through
the backend itself), bad input, users that never mix, and two processes writing one key. The slow tests
at the end drive the real Upsonic 0.77 in `.venv-upsonic/` (``make upsonic-venv``): an agent pauses on an
external tool in one process and another process resumes the run from the store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import fcntl
import json
import pathlib
import subprocess
import textwrap
import threading

import pytest

from flyteplugins_memory import ConcurrencyError, InvalidArgument, MemoryStore, UnsavedChanges
from flyteplugins_memory.adapters.upsonic import AsyncFlyteStorage, FlyteStorage, SessionOfAnotherUser
from helpers import race_children, run_python
from repo import REPO, SUPPORT

HOSTILE_IDS = ["../bob", "a/b", "..", ".", "%2e%2e", "x\x00y", "ALICE", " ", "a" * 300, "~/x", "sessions"]


def rows(backend, key: str) -> dict[str, dict]:
    """The adapter's row files as the backend itself holds them."""
    return {n: json.loads(d) for n, d in backend.objects(key).items() if n.startswith("upsonic/")}


def session(session_id: str, user_id: str | None = "ada", *, runs: dict | None = None, **fields) -> dict:
    return {"session_id": session_id, "user_id": user_id, "agent_id": "helper", "runs": runs or {}, **fields}


def run(run_id: str, status: str = "completed", text: str = "") -> dict:
    return {"output": {"run_id": run_id, "status": status, "output": text}}


def test_sessions_end_to_end_and_what_lands_in_storage(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    storage = FlyteStorage(key)
    stored = storage.upsert_session(session("s1", runs={"r1": run("r1", "paused")}, summary="hi"), deserialize=False)
    assert stored["runs"] == {"r1": run("r1", "paused")} and stored["session_type"] == "agent"
    storage.upsert_session(session("s2", "bob", created_at=5))
    storage.upsert_session(session("s1", runs={"r2": run("r2")}, summary="later"))  # r1 is kept

    files = rows(backend, key)
    assert sorted(files) == [
        "upsonic/sessions/s1/runs/r1.json",
        "upsonic/sessions/s1/runs/r2.json",
        "upsonic/sessions/s1/session.json",
        "upsonic/sessions/s2/session.json",
    ]
    assert files["upsonic/sessions/s1/session.json"]["row"]["summary"] == "later"
    assert "runs" not in files["upsonic/sessions/s1/session.json"]["row"]
    assert files["upsonic/sessions/s1/runs/r1.json"]["row"] == run("r1", "paused")

    fresh = FlyteStorage(MemoryStore.open(key=key))  # another handle reads what the first committed
    got = fresh.get_session("s1", deserialize=False)
    assert list(got["runs"]) == ["r1", "r2"] and got["summary"] == "later"
    assert fresh.get_session("s1", user_id="bob") is None  # a user filter never crosses users
    assert fresh.get_session("s2", agent_id="other") is None
    assert fresh.get_session("s1", session_type="team") is None
    assert fresh.get_session(user_id="bob", deserialize=False)["session_id"] == "s2"
    assert fresh.get_session(deserialize=False)["session_id"] == "s1"  # the latest created
    assert fresh.get_session("nope") is None

    listed, total = fresh.get_sessions(sort_by="created_at", sort_order="asc", deserialize=False)
    assert [s["session_id"] for s in listed] == ["s2", "s1"] and total == 2
    listed, total = fresh.get_sessions(limit=1, offset=1, deserialize=False)
    assert [s["session_id"] for s in listed] == ["s2"] and total == 2
    assert fresh.get_sessions(session_ids=[]) == []
    assert [s["session_id"] for s in fresh.get_sessions(session_ids=["s2", "zz"])] == ["s2"]
    assert [s["session_id"] for s in fresh.get_sessions(user_id="ada")] == ["s1"]

    assert fresh.delete_session("s1") is True and fresh.delete_session("s1") is False
    assert sorted(rows(backend, key)) == ["upsonic/sessions/s2/session.json"]  # its runs went with it
    assert fresh.delete_sessions(["s2", "s9"]) == 1 and rows(backend, key) == {}
    assert MemoryStore.open(key=key).log(limit=1)[0].actor == "upsonic"


def test_created_at_stays_and_updated_at_moves(local_backend, key):
    storage = FlyteStorage(key)
    first = storage.upsert_session(session("s", created_at=100), deserialize=False)
    again = storage.upsert_session(session("s", created_at=999), deserialize=False)
    assert first["created_at"] == again["created_at"] == 100 and again["updated_at"] >= 100
    memory = storage.upsert_user_memory({"user_id": "ada", "user_memory": {"a": 1}, "created_at": 7})
    memory = storage.upsert_user_memory({"user_id": "ada", "user_memory": {"a": 2}})
    assert memory["created_at"] == 7 and memory["user_memory"] == {"a": 2}


def test_user_memories(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    storage = FlyteStorage(key)
    storage.upsert_user_memories(
        [
            {"user_id": "ada", "user_memory": {"likes": "rust"}, "agent_id": "a1"},
            {"user_id": "bob", "user_memory": {"likes": "go"}, "team_id": "t"},
        ]
    )
    files = rows(backend, key)
    assert files["upsonic/users/ada.json"]["row"]["user_memory"] == {"likes": "rust"}
    assert files["upsonic/users/bob.json"]["row"]["team_id"] == "t"

    assert storage.get_user_memory("ada")["user_memory"] == {"likes": "rust"}
    assert storage.get_user_memory("ada", team_id="t") is None
    assert storage.get_user_memory(team_id="t")["user_id"] == "bob"
    assert storage.get_user_memory("carol") is None
    found, total = storage.get_user_memories(limit=1, deserialize=False)
    assert len(found) == 1 and total == 2
    assert storage.get_user_memories(user_ids=[]) == []
    assert [m["user_id"] for m in storage.get_user_memories(user_ids=["bob"])] == ["bob"]
    assert storage.delete_user_memory("ada") is True and storage.delete_user_memory("ada") is False
    assert storage.delete_user_memories(["bob", "zed"]) == 1 and rows(backend, key) == {}


def test_culture_knowledge_models_usage_and_clear_all(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    storage = FlyteStorage(key)
    made = storage.upsert_cultural_knowledge({"name": "tone", "content": "be brief", "agent_id": "a"})
    assert made["id"] and storage.get_cultural_knowledge(made["id"])["content"] == "be brief"
    storage.upsert_cultural_knowledge({"id": "c2", "name": "tone", "content": "cite", "created_at": 1})
    everything, total = storage.get_all_cultural_knowledge(name="tone", sort_by="created_at", sort_order="asc",
                                                           deserialize=False)  # fmt: skip
    assert [c["id"] for c in everything] == ["c2", made["id"]] and total == 2
    assert [c["id"] for c in storage.get_all_cultural_knowledge(limit=1, page=2, sort_by="created_at")] == ["c2"]
    assert storage.get_all_cultural_knowledge(agent_id="a")[0]["id"] == made["id"]
    storage.delete_cultural_knowledge("c2")
    assert storage.get_cultural_knowledge("c2") is None

    storage.upsert_knowledge_content({"id": "d1", "name": "doc", "knowledge_base_id": "kb"})
    storage.upsert_knowledge_content({"id": "d2", "name": "doc2", "knowledge_base_id": "other"})
    found, total = storage.get_knowledge_contents(knowledge_base_id="kb")
    assert [r["id"] for r in found] == ["d1"] and total == 1
    assert storage.get_knowledge_content("d2")["name"] == "doc2"
    assert storage.delete_knowledge_contents(["d1", "d2", "d3"]) == 2 and storage.delete_knowledge_contents([]) == 0
    assert storage.delete_knowledge_content("d1") is False

    class Point(dict):
        def __init__(self, **fields):
            super().__init__(fields)

    storage.upsert_model("p1", {"x": 1}, collection="points")
    storage.upsert_model("p2", {"x": 2}, collection="points")
    assert storage.get_model("p1", Point, collection="points") == {"x": 1}
    assert storage.list_models(Point, collection="points") == [{"x": 1}, {"x": 2}]
    assert storage.delete_model("p1", collection="points") and storage.get_model("p1", Point, "points") is None

    storage.upsert_usage_entry({"entry_id": "e9", "run_id": "r", "kind": "llm", "timestamp": 1.0})
    storage.upsert_usage_entry({"entry_id": "e2", "run_id": "r", "kind": "tool", "timestamp": 2.0})
    assert [e["entry_id"] for e in storage.query_usage_entries(run_id="r")] == ["e9", "e2"]  # oldest first
    assert [e["entry_id"] for e in storage.query_usage_entries(run_id="r", kind="llm")] == ["e9"]
    assert len(storage.query_usage_entries(run_id="r", limit=1)) == 1
    with pytest.raises(InvalidArgument):
        storage.query_usage_entries(colour="red")
    assert storage.delete_usage_entries(kind="tool") == 1

    storage.upsert_session(session("s", runs={"r": run("r")}))
    storage.upsert_user_memory({"user_id": "ada", "user_memory": {"likes": "tea"}})
    storage.upsert_knowledge_content({"id": "d3", "name": "doc3"})
    storage.clear_all()  # Upsonic's kinds: sessions, user memories, knowledge; culture, models, usage stay
    assert sorted(rows(backend, key)) == [
        f"upsonic/culture/{made['id']}.json",
        "upsonic/models/points/p2.json",
        "upsonic/usage/e9.json",
    ]
    assert storage.get_session("s") is None and storage.get_user_memory("ada") is None


def test_clear_all_clears_its_own_tables_only(durable_backend, key):
    mine, theirs = FlyteStorage(key), FlyteStorage(key, session_table="agent_sessions")
    mine.upsert_session(session("mine"))
    mine.upsert_user_memory({"user_id": "ada", "user_memory": {"likes": "tea"}})
    theirs.upsert_session(session("theirs"))
    mine.clear_all()
    left = rows(durable_backend, key)
    assert [n.split("/")[1] for n in left] == ["sessions.agent_sessions"], left  # storage holds theirs only
    assert theirs.get_session("theirs") is not None and mine.get_session("mine") is None


def fill_every_kind(storage: FlyteStorage, tag: str) -> None:
    storage.upsert_session(session(f"s-{tag}", runs={"r": run("r")}))
    storage.upsert_user_memory({"user_id": f"u-{tag}", "user_memory": {"tag": tag}})
    storage.upsert_cultural_knowledge({"id": f"c-{tag}", "name": "tone", "content": tag})
    storage.upsert_knowledge_content({"id": f"k-{tag}", "name": "doc"})
    storage.upsert_model(f"m-{tag}", {"tag": tag}, collection="prefs")
    storage.upsert_usage_entry({"entry_id": f"e-{tag}", "run_id": "r", "kind": "llm", "timestamp": 1.0})


def test_clear_all_clears_what_upsonic_clears_of_its_own_tables_only(durable_backend, key):
    """Found by review: ``clear_all`` deleted every directory of the storage's tables, ``models`` (one per
    key: Upsonic's models have no table name) and ``usage`` (shared under the default name) included.
    Upsonic's JSON, in-memory and SQLite storages clear sessions, user memories and knowledge only; so does
    ours, of its own table directories: another storage's rows of every kind stay."""
    names = ("session_table", "user_memory_table", "cultural_knowledge_table", "knowledge_table")
    a = FlyteStorage(key, **{n: f"a_{n}" for n in names})
    b = FlyteStorage(key, **{n: f"b_{n}" for n in names})  # usage under its default name, as A's
    fill_every_kind(a, "A")
    fill_every_kind(b, "B")
    before = rows(durable_backend, key)

    b.clear_all()
    left = rows(durable_backend, key)
    cleared = {n for n in before if n.split("/")[1].split(".")[0] in ("sessions", "users", "knowledge")
               and ".b_" in n.split("/")[1]}  # fmt: skip
    assert len(cleared) == 4  # B's session, its run, its user memory, its knowledge row
    assert set(left) == set(before) - cleared, sorted(set(before) - set(left))
    kept = sorted(n.split("/")[1] for n in left if '"B"' in json.dumps(left[n]) or "-B" in json.dumps(left[n]))
    assert kept == ["culture.b_cultural_knowledge_table", "models", "usage"], kept  # B's kinds Upsonic keeps
    assert b.get_session("s-B") is None and b.get_user_memory("u-B") is None
    assert b.get_knowledge_content("k-B") is None and b.get_cultural_knowledge("c-B")["content"] == "B"
    assert a.get_session("s-A") is not None and a.get_user_memory("u-A") is not None
    assert a.get_model("m-A", dict, collection="prefs") == {"tag": "A"}
    assert b.get_model("m-B", dict, collection="prefs") == {"tag": "B"}
    assert {e["entry_id"] for e in a.query_usage_entries(run_id="r")} == {"e-A", "e-B"}


def test_bad_input_raises_value_errors_and_changes_nothing(local_backend, key):
    storage = FlyteStorage(key)
    storage.upsert_session(session("kept"))
    before = rows(local_backend, key)
    bad_calls = [
        lambda: storage.upsert_session({"user_id": "ada"}),
        lambda: storage.upsert_session(session("")),
        lambda: storage.upsert_session(session("s", runs=["not", "a", "mapping"])),
        lambda: storage.upsert_session(session("s", runs={"": run("x")})),
        lambda: storage.upsert_session(session("s", created_at="yesterday")),
        lambda: storage.upsert_session(session("s", created_at=float("nan"))),
        lambda: storage.upsert_session(session("s", created_at="1969-12-31T00:00:00")),
        lambda: storage.upsert_session(session("s", user_id=5)),
        lambda: storage.upsert_sessions([session("fine"), {"summary": "no id"}]),  # none of them lands
        lambda: storage.upsert_session(42),
        lambda: storage.upsert_user_memory({"user_memory": {}}),
        lambda: storage.upsert_user_memory({"user_id": "ada", "user_memory": "not a dict"}),
        lambda: storage.upsert_user_memory({"user_id": "ada", "user_memory": {}, "created_at": True}),
        lambda: storage.delete_session(""),
        lambda: storage.delete_sessions([]),
        lambda: storage.delete_user_memory(""),
        lambda: storage.delete_user_memories([]),
        lambda: storage.get_sessions(limit=-1),
        lambda: storage.get_all_cultural_knowledge(limit=2, page=0),
        lambda: storage.upsert_knowledge_content({"name": "no id"}),
        lambda: storage.upsert_usage_entry({"kind": "no id"}),
    ]
    for call in bad_calls:
        with pytest.raises(ValueError):  # the contract's error; ours is InvalidArgument, a ValueError
            call()
    assert rows(local_backend, key) == before
    assert storage.get_session("fine") is None


def test_users_never_mix_and_sessions_never_change_owner(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    storage = FlyteStorage(key)
    storage.upsert_session(session("s", "ada", summary="ada's"))
    for other in ("bob", None):
        with pytest.raises(SessionOfAnotherUser):
            storage.upsert_session(session("s", other, summary="stolen"))
    assert rows(backend, key)["upsonic/sessions/s/session.json"]["row"]["summary"] == "ada's"
    assert storage.get_sessions(user_id="bob") == []
    storage.upsert_user_memory({"user_id": "ada", "user_memory": {"secret": 1}})
    assert storage.get_user_memory("bob") is None and storage.get_user_memories(user_ids=["bob"]) == []


def test_hostile_ids_stay_in_their_own_directory(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    storage = FlyteStorage(key)
    for i, hostile in enumerate(HOSTILE_IDS):
        storage.upsert_session(session(hostile, f"user{i}", runs={hostile: run(hostile, text=str(i))}))
        storage.upsert_user_memory({"user_id": hostile, "user_memory": {"i": i}})
    files = rows(backend, key)
    assert len(files) == 3 * len(HOSTILE_IDS)
    assert all(n.startswith(("upsonic/sessions/", "upsonic/users/")) and n.count("/") <= 4 for n in files)
    for i, hostile in enumerate(HOSTILE_IDS):
        got = storage.get_session(hostile, deserialize=False)
        assert got["user_id"] == f"user{i}" and got["runs"][hostile]["output"]["output"] == str(i)
        assert storage.get_user_memory(hostile)["user_memory"] == {"i": i}


def test_long_filter_values_are_found_without_labels(local_backend, key):
    storage = FlyteStorage(key)
    long_user = "u" * 2000  # beyond a label: filtered by reading the row
    storage.upsert_session(session("s", long_user))
    storage.upsert_session(session("t", "short"))
    assert [s["session_id"] for s in storage.get_sessions(user_id=long_user)] == ["s"]
    assert storage.get_session("s", user_id=long_user, deserialize=False)["user_id"] == long_user


def test_two_handles_running_one_session_keep_both_runs_and_never_undo_a_newer_run(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint
    first, second = FlyteStorage(key), FlyteStorage(MemoryStore.get_or_create(key=key))
    first.upsert_session(session("s", runs={"r1": run("r1", "paused")}))
    seen = second.get_session("s", deserialize=False)  # the second task reads r1 while it is paused
    first.upsert_session(session("s", runs={"r1": run("r1", "completed", "done")}))  # the first resumes it
    second.upsert_session(session("s", runs={**seen["runs"], "r2": run("r2")}))  # stale r1 beside its own r2
    got = FlyteStorage(key).get_session("s", deserialize=False)
    assert got["runs"] == {"r1": run("r1", "completed", "done"), "r2": run("r2")}
    assert rows(backend, key)["upsonic/sessions/s/runs/r1.json"]["row"]["output"]["status"] == "completed"


def test_the_async_storage(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint

    async def main() -> None:
        storage = AsyncFlyteStorage(key)
        assert await storage.table_exists("upsonic_sessions") and not await storage.table_exists("anything")
        await storage.aupsert_session(session("s", runs={"r": run("r", "error")}))
        await storage.aupsert_user_memory({"user_id": "ada", "user_memory": {"k": "v"}})
        assert (await storage.aget_session("s"))["runs"]["r"]["output"]["status"] == "error"
        assert (await storage.aget_sessions(agent_id="helper", deserialize=False))[1] == 1
        assert (await storage.aget_user_memory("ada"))["user_memory"] == {"k": "v"}
        with pytest.raises(ValueError):
            await storage.adelete_sessions([])
        assert await storage.adelete_session("s")
        await storage.close()

    asyncio.run(main())
    assert sorted(rows(backend, key)) == ["upsonic/users/ada.json"]


def test_an_adapter_over_an_open_handle_commits_each_call(local_backend, key):
    store = MemoryStore.create(key=key)
    storage = FlyteStorage(store, prefix="agents/upsonic", actor="planner")
    storage.upsert_session(session("s"))
    assert storage.store is store and not store.has_unsaved_changes()
    assert MemoryStore.open(key=key).list_paths("agents/upsonic") == ["agents/upsonic/sessions/s/session.json"]
    assert MemoryStore.open(key=key).log(limit=1)[0].actor == "planner"


RACE_WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, {tests!r})
    from workers import setup
    config = json.loads(sys.argv[1])
    setup(config)
    from flyteplugins_memory.adapters.upsonic import FlyteStorage

    storage = FlyteStorage(config["key"])
    me = config["worker"]
    while not os.path.exists(config["go"]):
        time.sleep(0.01)
    for i in range(config["n"]):
        # both workers add runs to one shared session, and each keeps its own session and user memory
        shared = storage.get_session("shared", deserialize=False) or {{"session_id": "shared", "user_id": "ada"}}
        runs = {{**shared.get("runs", {{}}), f"w{{me}}-{{i}}": {{"output": {{"run_id": f"w{{me}}-{{i}}"}}}}}}
        storage.upsert_session({{**shared, "runs": runs, "summary": f"w{{me}}"}})
        storage.upsert_session({{"session_id": f"own-{{me}}-{{i}}", "user_id": f"user{{me}}"}})
        storage.upsert_user_memory({{"user_id": f"user{{me}}", "user_memory": {{"last": i}}}})
    storage.close()
    """
)


def test_two_processes_writing_one_key_lose_nothing(durable_backend_and_endpoint, key, tmp_path):
    backend, endpoint = durable_backend_and_endpoint
    MemoryStore.create(key=key)
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key, "go": str(tmp_path / "go"), "n": 5}
    race_children(RACE_WORKER.format(tests=str(SUPPORT)), config, timeout=240)
    storage = FlyteStorage(key)
    shared = storage.get_session("shared", deserialize=False)
    assert sorted(shared["runs"]) == sorted(f"w{w}-{i}" for w in range(2) for i in range(5))
    assert len(storage.get_sessions(user_id="user0")) == len(storage.get_sessions(user_id="user1")) == 5
    assert [storage.get_user_memory(f"user{w}")["user_memory"] for w in range(2)] == [{"last": 4}] * 2
    assert len([n for n in rows(backend, key) if "/runs/" in n]) == 10


# -- the real framework, in .venv-upsonic ----------------------------------------------------------------

VENV = REPO / ".venv-upsonic"
REAL_AGENT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    from workers import setup
    config = json.loads(sys.argv[1])
    setup(config)
    from upsonic import Agent, Task
    from upsonic.messages.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from upsonic.models import Model
    from upsonic.run.base import RunStatus
    from upsonic.session.agent import AgentSession
    from upsonic.storage.base import Storage
    from upsonic.storage.memory import Memory
    from upsonic.tools import tool
    from flyteplugins_memory.adapters.upsonic import FlyteStorage


    class Scripted(Model):
        # An offline model: calls `lookup` when offered it, answers from its result, else counts messages.
        @property
        def model_name(self):
            return "scripted"

        @property
        def system(self):
            return "scripted"

        async def request(self, messages, model_settings, model_request_parameters):
            for part in getattr(messages[-1], "parts", []):
                if isinstance(part, ToolReturnPart):
                    return ModelResponse(parts=[TextPart(content=f"the answer is {{part.content}}")])
            if any(t.name == "lookup" for t in model_request_parameters.function_tools):
                return ModelResponse(parts=[ToolCallPart(tool_name="lookup", args={{"q": "x"}}, tool_call_id="c1")])
            return ModelResponse(parts=[TextPart(content=f"I have seen {{len(messages)}} messages")])


    @tool(external_execution=True)
    def lookup(q: str) -> str:
        "Look something up (the caller runs it, outside the agent)."
        raise AssertionError("an external tool is never run by the agent")


    storage = FlyteStorage(config["key"])
    assert isinstance(storage, Storage)
    memory = Memory(storage=storage, session_id="s1", user_id="ada", full_session_memory=True)
    agent = Agent(model=Scripted(), memory=memory, name="researcher")
    if config["stage"] == "pause":
        assert agent.do(Task("hello")) == "I have seen 1 messages"
        assert agent.do(Task("again")) == "I have seen 3 messages"  # the history came back from the store
        paused = agent.do(Task("use the tool", tools=[lookup]), return_output=True)
        assert paused.status == RunStatus.paused, paused.status
        print("RUN", paused.run_id)
    else:  # another process: only the store knows the paused run
        found = memory.load_resumable_run(config["run_id"])
        assert found is not None and found.output.status == RunStatus.paused
        for requirement in found.output.requirements:
            requirement.tool_execution.result = "forty-two"
        done = agent.continue_run(run_id=config["run_id"], requirements=found.output.requirements, return_output=True)
        assert done.status == RunStatus.completed and done.output == "the answer is forty-two", done.output
        assert memory.load_resumable_run(config["run_id"]) is None
        assert agent.do(Task("after")) == "I have seen 7 messages"  # as through Upsonic's own JSONStorage
        stored = storage.get_session("s1")
        assert isinstance(stored, AgentSession) and len(stored.runs) == 4 and len(stored.messages) == 10
        assert all(r.output.status == RunStatus.completed for r in stored.runs.values())
    print("ok")
    """
)

REAL_TABLES = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.path.insert(0, {tests!r})
    from workers import setup
    config = json.loads(sys.argv[1])
    setup(config)
    from pydantic import BaseModel
    from upsonic.culture.cultural_knowledge import CulturalKnowledge
    from upsonic.session.agent import AgentSession
    from upsonic.storage.base import AsyncStorage
    from upsonic.storage.memory import Memory
    from upsonic.storage.schemas import KnowledgeRow, UserMemory
    from flyteplugins_memory.adapters.upsonic import AsyncFlyteStorage


    class Note(BaseModel):
        text: str


    async def main():
        storage = AsyncFlyteStorage(config["key"])
        assert isinstance(storage, AsyncStorage)
        memory = Memory(storage=storage, session_id="s2", user_id="bob")
        made = await storage.aupsert_session(AgentSession(session_id="s2", user_id="bob"))
        assert isinstance(made, AgentSession) and made.user_id == "bob"
        await memory.set_metadata_async({{"topic": "tea"}})
        assert (await memory.get_metadata_async()) == {{"topic": "tea"}}
        assert [s.session_id for s in await memory.list_sessions_async(user_id="bob")] == ["s2"]
        saved = await storage.aupsert_user_memory(UserMemory(user_memory={{"likes": "tea"}}, user_id="bob"))
        assert isinstance(saved, UserMemory) and saved.user_memory == {{"likes": "tea"}}
        assert (await storage.aget_user_memory("bob")).user_memory == {{"likes": "tea"}}
        knowledge = await storage.aupsert_cultural_knowledge(CulturalKnowledge(name="tone", content="brief"))
        assert isinstance(knowledge, CulturalKnowledge) and knowledge.id
        assert (await storage.aget_cultural_knowledge(knowledge.id)).content == "brief"
        assert await storage.adelete_cultural_knowledges([knowledge.id]) == 1  # Upsonic's default, over ours
        row = await storage.aupsert_knowledge_content(KnowledgeRow(id="d1", name="doc", knowledge_base_id="kb"))
        assert isinstance(row, KnowledgeRow) and (await storage.aget_knowledge_contents("kb"))[1] == 1
        await storage.aupsert_model("n1", Note(text="hi"), collection="notes")
        assert await storage.aget_model("n1", Note, collection="notes") == Note(text="hi")
        assert isinstance(await storage.aget_session("s2"), AgentSession)
        assert await memory.delete_session_async() is True and await storage.aget_session("s2") is None
        # Upsonic's default name is the table of no name; sessions named after our user memories'
        # directory stay sessions
        same = AsyncFlyteStorage(config["key"], user_memory_table="upsonic_user_memories")
        assert (await same.aget_user_memory("bob")).user_memory == {{"likes": "tea"}}
        sessions_in_users = AsyncFlyteStorage(config["key"], session_table="users")
        assert await sessions_in_users.table_exists("users") and not await storage.table_exists("users")
        await sessions_in_users.aupsert_session(AgentSession(session_id="s3", user_id="bob"))
        assert [m.user_id for m in await storage.aget_user_memories()] == ["bob"]
        assert isinstance(await sessions_in_users.aget_session("s3"), AgentSession)
        assert await storage.aget_session("s3") is None

    asyncio.run(main())
    print("ok")
    """
)


def _upsonic_python() -> pathlib.Path:
    """`.venv-upsonic/` (``make upsonic-venv``: this package, Upsonic's requirements, upsonic --no-deps),
    made by one test worker at a time."""
    with open(REPO / ".venv-upsonic.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(["make", "-s", "upsonic-venv"], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"`make upsonic-venv` failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    return VENV / "bin" / "python"


def _in_upsonic(script: str, config: dict) -> str:
    return run_python(str(_upsonic_python()), script.format(tests=str(SUPPORT)), config)


@pytest.mark.slow
def test_the_real_upsonic_resumes_a_paused_run_in_another_process(durable_backend_and_endpoint, key):
    backend, endpoint = durable_backend_and_endpoint
    config = {"raw": backend.raw_data_path, "endpoint": endpoint, "key": key}
    paused = _in_upsonic(REAL_AGENT, {**config, "stage": "pause"})
    run_id = next(line.split()[1] for line in paused.splitlines() if line.startswith("RUN "))

    files = rows(backend, key)  # this side (no Upsonic) reads what Upsonic stored: the paused run
    assert files[f"upsonic/sessions/s1/runs/{run_id}.json"]["row"]["output"]["status"].lower() == "paused"
    assert files["upsonic/sessions/s1/session.json"]["row"]["user_id"] == "ada"

    _in_upsonic(REAL_AGENT, {**config, "stage": "resume", "run_id": run_id})
    files = rows(backend, key)
    assert files[f"upsonic/sessions/s1/runs/{run_id}.json"]["row"]["output"]["status"].lower() == "completed"
    assert len([n for n in files if "/runs/" in n]) == 4


@pytest.mark.slow
def test_the_real_upsonic_tables_through_the_async_storage(local_backend, key):
    _in_upsonic(REAL_TABLES, {"raw": local_backend.raw_data_path, "endpoint": None, "key": key})
    files = rows(local_backend, key)
    assert files["upsonic/users/bob.json"]["row"]["user_memory"] == {"likes": "tea"}
    assert files["upsonic/knowledge/d1.json"]["row"]["knowledge_base_id"] == "kb"
    assert files["upsonic/models/notes/n1.json"]["row"]["model_data"] == {"text": "hi"}
    assert files["upsonic/sessions.users/s3/session.json"]["row"]["user_id"] == "bob"
    assert [n for n in files if n.startswith("upsonic/users/")] == ["upsonic/users/bob.json"]
    assert not any(n.startswith(("upsonic/sessions/", "upsonic/culture/")) for n in files)


def test_a_refused_batch_leaves_nothing_for_a_later_commit(local_backend, key):
    storage = FlyteStorage(key)
    storage.upsert_session(session("owned", "bob"))
    with pytest.raises(SessionOfAnotherUser):  # the first session is written before the second is refused
        storage.upsert_sessions([session("fine", runs={"r": run("r")}), session("owned", "ada")])
    storage.upsert_user_memory({"user_id": "ada", "user_memory": {}})  # the next commit of the handle
    assert sorted(rows(local_backend, key)) == ["upsonic/sessions/owned/session.json", "upsonic/users/ada.json"]
    assert storage.get_session("fine") is None and not storage.store.has_unsaved_changes()


def test_a_run_the_caller_edits_in_a_returned_session_is_saved(local_backend, key):
    storage = FlyteStorage(key)
    storage.upsert_session(session("s", runs={"r": run("r", "paused")}))
    got = storage.get_session("s", deserialize=False)
    got["runs"]["r"]["output"]["status"] = "completed"  # edited in place, as a caller's object would be
    storage.upsert_session(got)
    assert rows(local_backend, key)["upsonic/sessions/s/runs/r.json"]["row"]["output"]["status"] == "completed"


def test_concurrent_calls_on_one_adapter_lose_nothing(durable_backend_and_endpoint, key):
    backend, _ = durable_backend_and_endpoint

    async def main() -> None:
        storage = AsyncFlyteStorage(key)

        async def one(i: int) -> None:
            await storage.aupsert_session(session(f"s{i}", f"user{i % 3}", runs={f"r{i}": run(f"r{i}")}))
            assert (await storage.aget_session(f"s{i}", deserialize=False))["runs"] == {f"r{i}": run(f"r{i}")}
            await storage.aupsert_user_memory({"user_id": f"user{i}", "user_memory": {"i": i}})

        await asyncio.gather(*(one(i) for i in range(8)))

    asyncio.run(main())
    storage = FlyteStorage(MemoryStore.open(key=key))  # opened here: pool threads lack flyte's task context
    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # the sync adapter from several threads
        list(pool.map(lambda i: storage.upsert_session(session(f"t{i}", runs={"r": run("r")})), range(8)))
    files = rows(backend, key)
    assert len([n for n in files if n.endswith("/session.json")]) == 16
    assert len([n for n in files if n.startswith("upsonic/users/")]) == 8


def test_a_retry_after_a_refused_batch_saves_the_runs_change(local_backend, key):
    storage = FlyteStorage(key)
    storage.upsert_session(session("fine", runs={"r": run("r", "paused")}))
    storage.upsert_session(session("owned", "bob"))
    with pytest.raises(SessionOfAnotherUser):
        storage.upsert_sessions([session("fine", runs={"r": run("r", "completed")}), session("owned", "ada")])
    storage.upsert_session(session("fine", runs={"r": run("r", "completed")}))  # the retry, alone
    assert rows(local_backend, key)["upsonic/sessions/fine/runs/r.json"]["row"] == run("r", "completed")


def test_a_completed_run_is_final_whoever_holds_a_stale_copy(local_backend, key):
    storage = FlyteStorage(key)  # one adapter shared by two callers
    storage.upsert_session(session("s", runs={"r1": run("r1", "paused")}))
    first, second = (storage.get_session("s", deserialize=False) for _ in range(2))
    storage.upsert_session({**second, "runs": {"r1": run("r1", "completed", "done")}})
    storage.upsert_session({**first, "runs": {**first["runs"], "r3": run("r3")}})  # r1 still paused here
    stored = rows(local_backend, key)
    assert stored["upsonic/sessions/s/runs/r1.json"]["row"] == run("r1", "completed", "done")
    assert stored["upsonic/sessions/s/runs/r3.json"]["row"] == run("r3")


def test_a_session_without_a_user_keeps_none_as_its_owner(local_backend, key):
    storage = FlyteStorage(key)
    storage.upsert_session(session("s", None, summary="nobody's"))
    with pytest.raises(SessionOfAnotherUser):
        storage.upsert_session(session("s", "mallory", summary="taken"))
    assert rows(local_backend, key)["upsonic/sessions/s/session.json"]["row"]["summary"] == "nobody's"


@pytest.mark.parametrize("prefix", ["a/", "/team/runs/x", "x"])
def test_runs_come_back_whatever_the_session_id_or_prefix(local_backend, key, prefix):
    storage = FlyteStorage(key, prefix=prefix)
    for session_id in ("runs", "sessions", "s"):
        storage.upsert_session(session(session_id, runs={"r": run("r", text=session_id)}))
    for found in [storage.get_session(i, deserialize=False) for i in ("runs", "sessions", "s")]:
        assert found["runs"] == {"r": run("r", text=found["session_id"])}
    assert all(len(s["runs"]) == 1 for s in storage.get_sessions(deserialize=False)[0])


def test_a_bad_prefix_is_refused_up_front(local_backend, key):
    for bad in ("", "/", "../evil", "a//b", "a/./b", 7):
        with pytest.raises(InvalidArgument):
            FlyteStorage(key, prefix=bad)


def test_the_async_storage_from_several_threads_each_with_its_own_loop(local_backend, key):
    storage = AsyncFlyteStorage(MemoryStore.open(key=MemoryStore.create(key=key).key))

    def worker(w: int) -> None:  # as Upsonic's sync Memory calls an AsyncStorage: asyncio.run per call
        for i in range(6):
            asyncio.run(storage.aupsert_session(session(f"w{w}-{i}", runs={"r": run("r")})))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))
    assert len([n for n in rows(local_backend, key) if n.endswith("/session.json")]) == 24


def test_two_adapters_over_one_handle_take_turns(local_backend, key):
    shared = MemoryStore.create(key=key)
    first, second = AsyncFlyteStorage(shared, prefix="a"), AsyncFlyteStorage(shared, prefix="b")
    other = AsyncFlyteStorage(MemoryStore.open(key=key), prefix="a")  # another task
    real_save = shared.save

    async def main() -> dict:
        committed = asyncio.Event()

        class OtherCommitsFirst:  # another task commits the same row just before the first adapter saves
            async def aio(self, **kwargs):
                shared.save = real_save
                await other.aupsert_user_memory({"user_id": "ada", "user_memory": {"v": "other"}})
                committed.set()
                await asyncio.sleep(0.2)  # the second adapter's read (and refresh) would run now
                return await real_save.aio(**kwargs)

        async def read_meanwhile() -> None:
            await committed.wait()
            await second.aget_sessions()

        shared.save = OtherCommitsFirst()  # pyright: ignore[reportAttributeAccessIssue]
        mine = first.aupsert_user_memory({"user_id": "ada", "user_memory": {"v": "mine"}}, deserialize=False)
        returned, _ = await asyncio.gather(mine, read_meanwhile())
        return returned

    returned = asyncio.run(main())
    stored = json.loads(local_backend.objects(key)["a/users/ada.json"])["row"]["user_memory"]
    assert stored == returned["user_memory"] == {"v": "mine"}  # retried after the conflict, not dropped


def test_a_filtered_read_fetches_only_the_rows_it_chose(local_backend, key, io_counter):
    storage = FlyteStorage(key)
    for i in range(10):
        storage.upsert_session(session(f"bob-{i}", "bob", runs={f"r{j}": run(f"r{j}") for j in range(3)}))
    storage.upsert_session(session("ada-1", "ada", runs={"r": run("r")}))
    io_counter.reset()
    found = FlyteStorage(MemoryStore.open(key=key)).get_sessions(user_id="ada", deserialize=False)[0]
    assert [s["session_id"] for s in found] == ["ada-1"] and list(found[0]["runs"]) == ["r"]
    assert not [n for n in io_counter.names("get") if "/bob-" in n]


TABLES = {
    "session_table": "agent_sessions",
    "user_memory_table": "profiles",
    "cultural_knowledge_table": "culture_v2",
    "knowledge_table": "kb rows",  # not a plain name: one encoded segment
    "usage_entry_table": "ledger",
}


def test_table_names_given_to_the_constructor_are_the_tables_directories(durable_backend_and_endpoint, key):
    """Every Upsonic ``Storage`` takes its tables' names; ours keeps them as Upsonic's base does and keeps
    each named table in a directory of its kind and name (``sessions.agent_sessions``), so two storages
    with different names over one prefix never see each other's rows."""
    backend, _ = durable_backend_and_endpoint
    named = FlyteStorage(key, **TABLES)
    assert (named.session_table_name, named.user_memory_table_name) == ("agent_sessions", "profiles")
    assert (named.cultural_knowledge_table_name, named.knowledge_table_name) == ("culture_v2", "kb rows")
    assert named.usage_entry_table_name == "ledger"
    named.upsert_session(session("s1", runs={"r1": run("r1", "paused")}))
    named.upsert_user_memory({"user_id": "ada", "user_memory": {"k": "v"}})
    named.upsert_cultural_knowledge({"id": "c1", "name": "tone", "content": "brief"})
    named.upsert_knowledge_content({"id": "k1", "name": "doc", "knowledge_base_id": "kb"})
    named.upsert_usage_entry({"entry_id": "u1", "run_id": "r", "kind": "llm", "timestamp": 1.0})

    plain = FlyteStorage(key)  # the default tables, over the same prefix
    assert plain.session_table_name == "upsonic_sessions"
    assert plain.get_session("s1") is None and plain.get_user_memory("ada") is None
    plain.upsert_session(session("s1", "bob"))  # another table: no clash with the named storage's session

    directories = {name.split("/")[1] for name in rows(backend, key)}
    kb = named.table_names()["kb rows"]
    assert kb.startswith("knowledge._") and "/" not in kb  # the name as one encoded segment
    assert directories == {
        "sessions.agent_sessions",
        "users.profiles",
        "culture.culture_v2",
        kb,
        "usage.ledger",
        "sessions",
    }
    assert "upsonic/sessions.agent_sessions/s1/runs/r1.json" in rows(backend, key)
    assert rows(backend, key)["upsonic/users.profiles/ada.json"]["row"]["user_memory"] == {"k": "v"}

    again = FlyteStorage(key, **TABLES)  # a new handle with the same names reads everything back
    assert again.get_session("s1", deserialize=False)["runs"]["r1"]["output"]["status"] == "paused"
    assert again.get_session("s1", deserialize=False)["user_id"] == "ada"
    assert again.get_user_memory("ada")["user_memory"] == {"k": "v"}
    assert again.get_cultural_knowledge("c1")["content"] == "brief"
    assert again.delete_session("s1")
    assert "upsonic/sessions.agent_sessions/s1/session.json" not in rows(backend, key)
    assert "upsonic/sessions/s1/session.json" in rows(backend, key)


def test_table_exists_tells_which_tables_the_storage_has(local_backend, key):
    named = FlyteStorage(key, session_table="agent_sessions")
    assert named.table_exists("agent_sessions") and named.table_exists("upsonic_user_memories")
    assert not named.table_exists("upsonic_sessions") and not named.table_exists("anything")
    assert named.table_names()["agent_sessions"] == "sessions.agent_sessions"
    assert named.table_names()["upsonic_user_memories"] == "users"

    async def main() -> None:
        storage = AsyncFlyteStorage(key, usage_entry_table="ledger")
        assert await storage.table_exists("ledger") and not await storage.table_exists("upsonic_usage_entries")

    asyncio.run(main())


@pytest.mark.parametrize(
    "names",
    [
        {"session_table": "t", "user_memory_table": "t"},
        {"session_table": "upsonic_user_memories"},  # the user memories' name when not named
        {"usage_entry_table": 7},
        {"session_table": b"sessions"},
    ],
)
def test_table_names_that_would_clash_or_are_not_names_are_refused_up_front(local_backend, key, names):
    with pytest.raises(InvalidArgument):
        FlyteStorage(key, **names)
    assert local_backend.objects(key) == {}  # nothing opened, nothing written


def test_none_sessions_are_skipped_as_upsonics_storages_skip_them(durable_backend, key):
    storage = FlyteStorage(key)
    assert storage.upsert_session(None) is None
    stored = storage.upsert_sessions([session("s1"), None, session("s2")], deserialize=False)
    assert [s["session_id"] for s in stored] == ["s1", "s2"]
    assert sorted(rows(durable_backend, key)) == [f"upsonic/sessions/{s}/session.json" for s in ("s1", "s2")]
    with pytest.raises(InvalidArgument):  # a session without an id is still refused
        storage.upsert_session({"user_id": "ada"})


# -- a handle the caller gave: reads never drop its work, writes never commit it (the shared-handle policy) --


def _call(storage, name: str, *args, **kwargs):
    """`name` on either storage: the sync call, or the async one run to completion (``close`` has no ``a``)."""
    if isinstance(storage, AsyncFlyteStorage):
        return asyncio.run(getattr(storage, name if name == "close" else "a" + name)(*args, **kwargs))
    return getattr(storage, name)(*args, **kwargs)


@pytest.mark.parametrize("kind", [FlyteStorage, AsyncFlyteStorage])
@pytest.mark.parametrize(
    "read",
    [
        lambda s: _call(s, "get_user_memory", "u"),
        lambda s: _call(s, "get_session", "s1"),
        lambda s: _call(s, "get_sessions"),
        lambda s: _call(s, "get_cultural_knowledge", "c1"),
        lambda s: _call(s, "query_usage_entries"),
    ],
    ids=["get_user_memory", "get_session", "get_sessions", "get_cultural_knowledge", "query_usage_entries"],
)
def test_a_read_through_the_callers_handle_keeps_its_unsaved_edit(durable_backend, key, kind, read):
    """The reviewer's shape: the caller's handle holds an unsaved edit that another task's commit conflicts
    with; a read through the adapter must leave it (no refresh while the handle holds unsaved changes), so
    the caller's save fails as it would without the adapter."""
    mine = MemoryStore.create(key=key)
    mine.write_text("notes/plan.md", "v1")
    mine.save()
    mine.write_text("notes/plan.md", "caller's unsaved v2")
    other = MemoryStore.open(key=key)
    other.write_text("notes/plan.md", "other task's v2")
    other.save()

    read(kind(mine))

    assert mine.has_unsaved_changes() and mine.read_text("notes/plan.md") == "caller's unsaved v2"
    with pytest.raises(ConcurrencyError):
        mine.save()
    assert durable_backend.objects(key)["notes/plan.md"] == b"other task's v2"


WRITES = {
    "upsert_user_memory": lambda s: _call(s, "upsert_user_memory", {"user_id": "u1", "user_memory": {}}),
    "upsert_session": lambda s: _call(s, "upsert_session", session("s1")),
    "delete_session": lambda s: _call(s, "delete_session", "s1"),
    "upsert_cultural_knowledge": lambda s: _call(s, "upsert_cultural_knowledge", {"id": "c1", "name": "tone"}),
    "upsert_usage_entry": lambda s: _call(s, "upsert_usage_entry", {"entry_id": "e1", "kind": "llm"}),
    "clear_all": lambda s: _call(s, "clear_all"),
}


@pytest.mark.parametrize("kind", [FlyteStorage, AsyncFlyteStorage])
@pytest.mark.parametrize("write", [*WRITES, "close"])
def test_a_write_through_the_callers_handle_never_commits_its_unsaved_changes(durable_backend, key, kind, write):
    """The caller's unrelated unsaved write, then an adapter write: `UnsavedChanges` before anything lands
    (storage and its log as they were), the caller's change still unsaved and then saved as the caller's.
    ``close()`` saves nothing of the caller's either (it returns: it has nothing of its own to save)."""
    mine = MemoryStore.create(key=key)
    FlyteStorage(key).upsert_session(session("s1"))  # a row for the delete to find
    mine.refresh()
    mine.write_text("mine/draft.md", "half-done, not for saving", actor="alice")
    before = durable_backend.stored(key)

    storage = kind(mine)
    if write == "close":
        _call(storage, "close")
    else:
        with pytest.raises(UnsavedChanges, match=r"save\(\) or revert\(\) them first.*its own handle"):
            WRITES[write](storage)
    assert durable_backend.stored(key) == before  # nothing new in storage, the log included
    assert mine.has_unsaved_changes() and mine.read_text("mine/draft.md") == "half-done, not for saving"

    mine.save()  # the caller's change is the caller's commit
    last = MemoryStore.open(key=key).log(limit=1)[0]
    assert last.actor == "alice" and list(last.wrote) == ["mine/draft.md"]
    _call(storage, "upsert_user_memory", {"user_id": "u1", "user_memory": {"k": 1}})  # saved: writes go through
    assert json.loads(durable_backend.objects(key)["upsonic/users/u1.json"])["row"]["user_memory"] == {"k": 1}
    assert MemoryStore.open(key=key).log(limit=1)[0].actor == "upsonic"


# -- table names as Upsonic means them: a default name is the table of no name; a directory is one kind's --

DEFAULT_NAMES = {
    "session_table": "upsonic_sessions",
    "user_memory_table": "upsonic_user_memories",
    "cultural_knowledge_table": "upsonic_cultural_knowledge",
    "knowledge_table": "upsonic_knowledge",
    "usage_entry_table": "upsonic_usage_entries",
}


def _one_of_each(storage: FlyteStorage, tag: str) -> None:
    storage.upsert_session(session(f"s-{tag}", runs={"r": run("r")}))
    storage.upsert_user_memory({"user_id": f"u-{tag}", "user_memory": {"tag": tag}})
    storage.upsert_cultural_knowledge({"id": f"c-{tag}", "name": "tone", "content": tag})
    storage.upsert_knowledge_content({"id": f"k-{tag}", "name": "doc", "knowledge_base_id": "kb"})
    storage.upsert_usage_entry({"entry_id": f"e-{tag}", "kind": "llm", "timestamp": 1.0})


def _sees(storage: FlyteStorage, tag: str) -> bool:
    found = [
        storage.get_session(f"s-{tag}", deserialize=False),
        storage.get_user_memory(f"u-{tag}", deserialize=False),
        storage.get_cultural_knowledge(f"c-{tag}", deserialize=False),
        storage.get_knowledge_content(f"k-{tag}"),
        [e for e in storage.query_usage_entries() if e["entry_id"] == f"e-{tag}"] or None,
    ]
    assert all(f is None for f in found) or all(f is not None for f in found), found
    return found[0] is not None


@pytest.mark.parametrize("names", [DEFAULT_NAMES, dict.fromkeys(DEFAULT_NAMES, "")], ids=["default names", "empty"])
def test_upsonics_default_names_are_the_tables_of_no_name(durable_backend, key, names):
    """Upsonic's base names a table it was given no name for (``None``, or ``""``: ``name or default``)
    ``upsonic_sessions`` and so on, so naming it that is the same table, as in Upsonic's own storages:
    the same directory as no name, where rows stored before table names were honoured already live."""
    plain, named = FlyteStorage(key), FlyteStorage(key, **names)
    assert (
        named.table_names()
        == plain.table_names()
        == {
            "upsonic_sessions": "sessions",
            "upsonic_user_memories": "users",
            "upsonic_cultural_knowledge": "culture",
            "upsonic_knowledge": "knowledge",
            "upsonic_usage_entries": "usage",
        }
    )
    _one_of_each(plain, "plain")
    assert _sees(named, "plain")
    _one_of_each(named, "named")
    assert _sees(plain, "named")
    directories = {name.split("/")[1] for name in rows(durable_backend, key)}
    assert directories == {"sessions", "users", "culture", "knowledge", "usage"}
    assert named.delete_user_memory("u-plain") and plain.get_user_memory("u-plain") is None


def test_a_table_named_after_another_kinds_directory_never_reads_its_rows(durable_backend, key):
    """The reviewer's shape: sessions named ``users`` (a legal, distinct Upsonic table name) and a storage
    of default names over the same key, whose user memories live in ``users``: each sees only its own kind,
    because a named table's directory is its kind's (``sessions.users``), never another kind's."""
    sessions_in_users = FlyteStorage(key, session_table="users", user_memory_table="people")
    plain = FlyteStorage(key)
    sessions_in_users.upsert_session(session("s1", "alice", summary="keep me"))
    assert plain.get_user_memory("alice") is None and plain.get_user_memories() == []
    assert plain.delete_user_memory("alice") is False
    assert sessions_in_users.get_session("s1", deserialize=False)["summary"] == "keep me"
    assert plain.get_session("s1") is None
    assert sorted(rows(durable_backend, key)) == ["upsonic/sessions.users/s1/session.json"]

    # two named tables of one name and different kinds, in two storages over one key
    first = FlyteStorage(key, session_table="x", cultural_knowledge_table="y")
    second = FlyteStorage(key, user_memory_table="x", knowledge_table="y")
    first.upsert_session(session("bob", "bob"))
    second.upsert_user_memory({"user_id": "bob", "user_memory": {"kind": "user"}})
    first.upsert_cultural_knowledge({"id": "i1", "name": "tone", "content": "culture"})
    second.upsert_knowledge_content({"id": "i1", "name": "doc", "knowledge_base_id": "kb"})
    assert first.get_sessions(deserialize=False)[1] == 1
    assert first.get_session("bob", deserialize=False)["user_id"] == "bob"
    assert second.get_user_memories(deserialize=False)[1] == 1
    assert second.get_user_memory("bob")["user_memory"] == {"kind": "user"}
    assert first.get_cultural_knowledge("i1")["content"] == "culture"
    assert second.get_knowledge_content("i1")["knowledge_base_id"] == "kb"
    assert {n for n in rows(durable_backend, key) if ".x/" in n or ".y/" in n} == {
        "upsonic/sessions.x/bob/session.json",
        "upsonic/users.x/bob.json",
        "upsonic/culture.y/i1.json",
        "upsonic/knowledge.y/i1.json",
    }


def test_names_of_our_directories_are_plain_names_of_their_own_kind(durable_backend, key):
    """A name that is our directory of another kind (``sessions``, ``models``) can no longer clash: it is
    a table of its own kind, beside the table that directory holds."""
    odd = FlyteStorage(key, user_memory_table="sessions", knowledge_table="models", session_table="users")
    assert odd.table_names() == {
        "users": "sessions.users",
        "sessions": "users.sessions",
        "upsonic_cultural_knowledge": "culture",
        "models": "knowledge.models",
        "upsonic_usage_entries": "usage",
    }
    odd.upsert_user_memory({"user_id": "ada", "user_memory": {"odd": True}})
    odd.upsert_knowledge_content({"id": "k1", "name": "doc", "knowledge_base_id": "kb"})
    odd.upsert_model("k1", {"text": "a model"}, collection="k1")
    plain = FlyteStorage(key)
    plain.upsert_session(session("ada", "ada"))
    assert plain.get_user_memory("ada") is None and plain.get_knowledge_content("k1") is None
    assert odd.get_session("ada") is None and odd.get_user_memory("ada")["user_memory"] == {"odd": True}
    assert sorted(rows(durable_backend, key)) == [
        "upsonic/knowledge.models/k1.json",
        "upsonic/models/k1/k1.json",
        "upsonic/sessions/ada/session.json",
        "upsonic/users.sessions/ada.json",
    ]


@pytest.mark.parametrize("kind", [FlyteStorage, AsyncFlyteStorage])
def test_a_storage_made_in_a_task_writes_there_when_first_used_from_any_thread(durable_backend, key, kind):
    """Found by review: a storage given a key opened it at first use, which may run in a thread without the
    task's Flyte context (Upsonic's ``run_awaitable_sync`` worker): locally the rows landed under the default
    root (``/tmp/flyte/raw_data``), in a task pod it was a `ContextError`. It keeps the context it is made
    in when that names the task's storage (as LangGraph's ``FlyteStore``, decision 0137)."""
    storage = kind(key)  # made here, where the backend's raw-data path is bound; not used yet
    errors: list[BaseException] = []

    def work() -> None:  # a plain thread: no Flyte context at all
        try:
            _call(storage, "upsert_user_memory", {"user_id": "ada", "user_memory": {"likes": "tea"}})
            _call(storage, "upsert_session", session("s1"))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert errors == []
    assert sorted(rows(durable_backend, key)) == ["upsonic/sessions/s1/session.json", "upsonic/users/ada.json"]
    assert not list(pathlib.Path("/tmp/flyte/raw_data/agents").rglob(key))  # nothing under the default root
    assert FlyteStorage(key).get_user_memory("ada", deserialize=False)["user_memory"] == {"likes": "tea"}

    # made where no storage is named (a module's top level): its first use decides, as before
    later = contextvars.Context().run(kind, key)
    _call(later, "upsert_session", session("s2"))
    assert "upsonic/sessions/s2/session.json" in rows(durable_backend, key)
