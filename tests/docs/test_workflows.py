"""Examples are documentation that runs: every ``workflows/NN_*.py`` script runs, locally and against S3.

Each workflow runs as a subprocess, as a user runs it; the test then checks what it printed and opens the
store it wrote with a new handle (and reads its objects directly) to check what landed: files, messages,
audit events and commits. The S3 runs use the suite's moto server (``--s3-endpoint``), so the bucket can
be inspected afterwards; one run starts its own moto server, as ``--s3`` alone does for a user.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

import fsspec
import pytest

from flyteplugins_memory import MemoryStore, ReadOnlyPath, __version__
from flyteplugins_memory._rules.location import LOCAL_RAW_DATA_ROOT
from repo import REPO

FOLDER = REPO / "workflows"
WORKFLOWS = sorted(FOLDER.glob("[0-9][0-9]_*.py"))
NAMESPACE = {"org": "local", "project": "default", "domain": "development"}  # a local run's defaults
STORES = "agents/memory-store"


#: every run the tests check: (script, target, extra arguments); "s3" is the suite's moto server, "s3-own"
#: the script's own. They start together, once per module: each is a process importing flyte, mostly waiting.
RUNS = {
    "quickstart-local": ("01_quickstart.py", "local", ()),
    "quickstart-s3": ("01_quickstart.py", "s3", ()),
    "quickstart-s3-own": ("01_quickstart.py", "s3-own", ()),
    "chat-local": ("02_agent_chat.py", "local", ()),
    "chat-s3": ("02_agent_chat.py", "s3", ()),
    "chat-first-question": ("02_agent_chat.py", "local", ("What is my name?",)),
    "subagents-local": ("03_parallel_subagents.py", "local", ("--n", "4")),
    "subagents-s3": ("03_parallel_subagents.py", "s3", ("--n", "4")),
    "sleep-local": ("04_sleep_cycle.py", "local", ()),
    "sleep-s3": ("04_sleep_cycle.py", "s3", ()),
    "history-local": ("05_history_and_restore.py", "local", ()),
    "history-s3": ("05_history_and_restore.py", "s3", ()),
    "frameworks-local": ("06_frameworks.py", "local", ()),
    "frameworks-s3": ("06_frameworks.py", "s3", ()),
    "plugins-local": ("07_flyte_agent_plugins.py", "local", ()),
    "plugins-s3": ("07_flyte_agent_plugins.py", "s3", ()),
}


class Runs:
    """The workflow runs of this module, started at once; `output` waits for one and checks its exit."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        self.bucket, self.keys = bucket, {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in RUNS}
        targets = {"local": [], "s3": ["--s3", "--s3-endpoint", endpoint, "--s3-bucket", bucket], "s3-own": ["--s3"]}
        self.processes = {
            name: subprocess.Popen(
                [sys.executable, str(FOLDER / script), *targets[target], "--key", self.keys[name], *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, (script, target, extra) in RUNS.items()
        }

    def output(self, name: str) -> str:
        stdout, stderr = self.processes[name].communicate(timeout=240)
        assert self.processes[name].returncode == 0, stderr[-3000:]
        return stdout


@pytest.fixture(scope="module")
def runs(moto_endpoint) -> Iterator[Runs]:
    import s3fs

    bucket = f"wf-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(endpoint_url=moto_endpoint, key="testing", secret="testing", skip_instance_cache=True).mkdir(
        bucket
    )
    started = Runs(moto_endpoint, bucket)
    yield started
    for name, process in started.processes.items():
        process.kill()
        process.communicate()
        remove_local_store(started.keys[name])


@dataclass
class Where:
    """Where a workflow's stores land, and a direct view of that storage."""

    target: str
    fs: fsspec.AbstractFileSystem
    root: str  # the storage root as `fs` names it (no protocol)

    def read(self, key: str, path: str) -> str:
        return self.fs.cat_file(f"{self.root}/{STORES}/v0/local/default/development/{key}/{path}").decode()

    def blob(self, key: str, sha256: str) -> bytes:
        """The journal's stored content of that sha256 (what every version with it reads)."""
        return self.fs.cat_file(
            f"{self.root}/{STORES}/.journal/v0/local/default/development/{key}/blobs/{sha256[:2]}/{sha256}"
        )

    def reopen(self, key: str) -> MemoryStore:
        assert MemoryStore.exists(key=key, **NAMESPACE)
        return MemoryStore.get_or_create(key=key, **NAMESPACE)


@pytest.fixture(params=["local", "s3"])
def where(request, runs, moto_endpoint, raw_data_context) -> Where:
    """Flyte initialized and the raw-data path bound as the workflow's runs had them, to reopen its stores."""
    import flyte

    if request.param == "s3":
        import s3fs

        storage = flyte.storage.S3(endpoint=moto_endpoint, access_key_id="testing", secret_access_key="testing")
        flyte.init(storage=storage)
        raw_data_context(f"s3://{runs.bucket}/raw")
        fs = s3fs.S3FileSystem(endpoint_url=moto_endpoint, key="testing", secret="testing", skip_instance_cache=True)
        return Where("s3", fs, runs.bucket)
    from fsspec.implementations.local import LocalFileSystem

    flyte.init()
    raw_data_context(f"{LOCAL_RAW_DATA_ROOT}/test-run")  # the root a local flyte.run's stores share
    return Where("local", LocalFileSystem(), LOCAL_RAW_DATA_ROOT)


def remove_local_store(key: str) -> None:
    for kind in ("v0", ".journal/v0"):
        shutil.rmtree(pathlib.Path(LOCAL_RAW_DATA_ROOT, STORES, kind, "local/default/development", key), True)


@pytest.mark.parametrize("script", WORKFLOWS, ids=lambda p: p.name)
def test_each_workflow_documents_how_to_run_it(script):
    text = script.read_text()
    assert text.startswith('"""') and "\nRun: python workflows/" in text, "a docstring with a Run: line"
    assert "[--s3 | --remote]" in text and "_support.connect(" in text, "local, --s3 and --remote, one code path"


def test_the_numbered_workflows():
    assert [p.name for p in WORKFLOWS] == [
        "01_quickstart.py",
        "02_agent_chat.py",
        "03_parallel_subagents.py",
        "04_sleep_cycle.py",
        "05_history_and_restore.py",
        "06_frameworks.py",
        "07_flyte_agent_plugins.py",
    ]


def test_quickstart(where, runs):
    key, out = runs.keys[f"quickstart-{where.target}"], runs.output(f"quickstart-{where.target}")
    assert f"store {key!r}: 2 messages, files ['notes/facts.json'], 1 fact, last write by 'remember'" in out
    assert f"memory lives at {'s3://' if where.target == 's3' else ''}{where.root}/{STORES}/v0/" in out
    assert json.loads(where.read(key, "notes/facts.json")) == ["user asked: What is Flyte?"]
    store = where.reopen(key)
    assert [m["role"] for m in store.messages] == ["user", "assistant"]
    assert store.audit_tail(1)[-1]["actor"] == "remember"


def test_agent_chat_remembers_across_runs(where, runs):
    key, out = runs.keys[f"chat-{where.target}"], runs.output(f"chat-{where.target}")
    first, second = out.split("--- run 1")[1].split("--- run 2")
    assert "tools called: remember_note" in first and "Nice to meet you! I noted Ada, Rust" in first
    assert "tools called: recall_notes" in second
    assert "your name is Ada and your favourite language is Rust" in second
    assert 'Earlier you told me: "Hi! My name is Ada and my favourite language is Rust."' in second
    assert "transcript:  8 messages (2 user, 4 assistant, 2 tool)" in out
    assert f"flyte-memory messages --tail 5 --key {key}" in out
    assert "- name: Ada; favourite language: Rust" in where.read(key, "notes/user.md")
    store = where.reopen(key)
    calls = [c["function"]["name"] for m in store.messages for c in m.get("tool_calls", [])]
    assert calls == ["remember_note", "recall_notes"]
    assert [m["role"] for m in store.messages].count("tool") == 2
    assert [(e["actor"], e["path"]) for e in store.audit_tail(0)] == [("agent-chat/remember_note", "notes/user.md")]
    assert [(c.actor, c.appended, c.wrote) for c in store.log(limit=2)] == [
        ("agent-chat", 4, ()),
        ("agent-chat", 4, ("notes/user.md",)),
    ]
    # the last turn published the store into its run's Flyte report, under a "Memory" tab
    report = pathlib.Path(out.split("Memory tab (the store as a page); the last one: ")[1].split()[0])
    page = report.read_text(encoding="utf-8")
    assert "Memory" in page and "notes/user.md" in page and "What is my name" in page and "recall_notes" in page


def test_agent_chat_knows_nothing_the_store_did_not_tell_it(runs):
    out = runs.output("chat-first-question")
    assert "I don't know yet: my notes about you are empty" in out
    assert "Ada" not in out


def test_parallel_subagents_lose_nothing_and_conflicts_cost_retries(where, runs):
    key, out = runs.keys[f"subagents-{where.target}"], runs.output(f"subagents-{where.target}")
    batch = re.search(r"\(batch (\w+)\)", out).group(1)
    assert "NOTHING LOST" in out and f"batch {batch}: 4 findings files, 4 transcript messages, 4 summary lines" in out
    retries = [int(r) for r in re.findall(r"agent-\d: (\d+)", out.split("retries per subagent:")[1].splitlines()[0])]
    # all four start from one commit: whoever saves second or later must conflict, refresh and retry
    assert len(retries) == 4 and sum(retries) >= 3 and f"conflicts: {sum(retries)} retries in all" in out
    summary = where.read(key, "shared/summary.md").splitlines()
    assert sorted(line.split(" ")[1] for line in summary if batch in line) == [f"agent-{i}" for i in range(4)]
    for i in range(4):
        assert batch in where.read(key, f"findings/agent-{i}.md")
    store = where.reopen(key)
    assert sorted(m["name"] for m in store.messages if batch in m["content"]) == [f"agent-{i}" for i in range(4)]
    summary_writes = [e["actor"] for e in store.audit_tail(0) if e["path"] == "shared/summary.md"]
    assert sorted(summary_writes) == [f"agent-{i}" for i in range(4)], "a retried write is not audited twice"
    assert sorted(c.actor for c in store.log(limit=4)) == [f"agent-{i}" for i in range(4)]


def test_sleep_cycle_promotes_reviewed_proposals_and_the_next_run_recalls_them(where, runs):
    key, out = runs.keys[f"sleep-{where.target}"], runs.output(f"sleep-{where.target}")
    assert "day: 4 proposals staged by 4 agents" in out
    # the refusal the workflow demonstrates is printed, by the one agent that tried
    refused = [line for line in out.splitlines() if line.startswith("  refused: ")]
    assert refused == [
        (
            "  refused: travel-agent tried to write memory/travel-agent.md itself: ReadOnlyPath: Writes to"
            " 'memory/travel-agent.md' are not allowed (read-only prefix 'memory/')"
        )
    ]
    decided = out.split("night: the reviewer decided")[1].split("memory/ now holds")[0]
    assert "discard memory/smalltalk/weather.md (smalltalk-agent): confidence 0.2 below 0.5" in decided
    assert "accept  memory/food/diet.md (food-agent)" in decided
    # of the two window-seat proposals, whichever the reviewer meets second is a duplicate
    assert decided.count("already known as memory/travel/seat") == 1 and decided.count("accept ") == 2
    assert "A: " in out and "window seat" in out.split("Q: Which seat")[1]
    assert where.read(key, "memory/food/diet.md") == "Alice is vegetarian and avoids fish."
    store = where.reopen(key)
    paths = store.list_paths("memory")
    assert len(paths) == 2 and "memory/food/diet.md" in paths and any(p.startswith("memory/travel/seat") for p in paths)
    assert {p.status for p in store.proposals()} == {"accepted", "discarded"}
    with pytest.raises(ReadOnlyPath):  # persisted with the store: a handle given no prefixes is bound too
        store.write_text("memory/food/diet.md", "changed")
    accepts = [e for e in store.audit_tail(0) if e["op"] == "accept"]
    assert len(accepts) == 2 and {e["actor"] for e in accepts} == {"reviewer"}
    assert store.search("vegetarian", prefix="memory")[0].path == "memory/food/diet.md"


GOOD_PLAN = """# Plan: launch the docs site
- [x] write the outline
- [x] draft the pages
- [ ] review with the team
- [ ] set up the domain
- [ ] announce the launch
"""
BAD_PLAN = "- [x] write the outline\n- [x] draft the pages\n"  # what the buggy tidy tool left


def test_history_diff_and_restore_undo_a_bad_edit_that_stays_in_history(where, runs):
    key, out = runs.keys[f"history-{where.target}"], runs.output(f"history-{where.target}")
    assert "day 3: c4 by planner: pages drafted; plan the announcement (5 steps, 152 bytes)" in out
    assert "day 4: c5 by planner/tidy-tool: tidy: drop finished steps (2 steps, 46 bytes)" in out
    audited = out.split("=== The auditor")[1].split("=== Time travel")[0]
    assert re.search(r"c5 .* planner/tidy-tool .*<- the heading is gone", audited)
    assert audited.count("<- ") == 1, "only the bad edit is flagged"
    assert "last good version: c4; the edit that broke it: c5" in audited
    diff = audited.split("changed:\n")[1].split("\nrestored ")[0]
    assert diff.startswith("--- plan.md@c4\n+++ plan.md@c5\n@@ -1,6 +1,2 @@\n-# Plan: launch the docs site\n")
    assert " - [x] draft the pages\n-- [ ] review with the team\n" in diff
    assert "restored c4 as c6 by auditor: 'undo c5 by planner/tidy-tool: the heading is gone'" in audited
    assert "c5 is still there: True" in audited and "plan.md now has the content of c4: True" in audited
    travelled = out.split("=== Time travel")[1]
    assert "as of #2 (planner): 3 steps, 1 message, good" in travelled  # one message: no "(s)"
    assert "as of #5 (planner/tidy-tool): 2 steps, 4 messages, the heading is gone" in travelled
    assert "as of #6 (auditor): 5 steps, 4 messages, good" in travelled
    assert "writing to the view as of #2 is refused: ReadOnlySnapshot" in travelled

    assert where.read(key, "plan.md") == GOOD_PLAN
    good, bad = hashlib.sha256(GOOD_PLAN.encode()).hexdigest(), hashlib.sha256(BAD_PLAN.encode()).hexdigest()
    sidecar = json.loads(where.read(key, "meta/plan.md.json"))
    assert (sidecar["sha256"], sidecar["updated_by"]) == (good, "auditor")
    assert where.blob(key, bad) == BAD_PLAN.encode(), "the bad version's content is still stored"

    store = where.reopen(key)
    versions = store.history("plan.md")
    assert [(v.version_id, v.actor) for v in versions] == [
        ("c6", "auditor"),
        ("c5", "planner/tidy-tool"),
        ("c4", "planner"),
        ("c3", "planner"),
        ("c2", "planner"),
    ]
    assert [v.sha256 for v in versions[:3]] == [good, bad, good] and not any(v.deleted for v in versions)
    assert versions[0].reason == "undo c5 by planner/tidy-tool: the heading is gone"
    assert store.read_version("plan.md", "c5") == BAD_PLAN and store.diff("plan.md", "c4") == ""
    assert store.at(5).read_text("plan.md") == BAD_PLAN and store.at(4).read_text("plan.md") == GOOD_PLAN
    assert [(c.seq, c.actor) for c in store.log(path="plan.md")][:2] == [(6, "auditor"), (5, "planner/tidy-tool")]
    events = [(e["actor"], e["op"], e["old_sha"], e["new_sha"]) for e in store.audit_tail(0)]
    assert events[-2:] == [("planner/tidy-tool", "update", good, bad), ("auditor", "update", bad, good)]
    assert [e[0] for e in events] == ["planner", "planner", "planner", "planner/tidy-tool", "auditor"]
    assert [m["name"] for m in store.messages] == ["planner", "planner", "planner", "planner/tidy-tool"]


FINDINGS = {
    "ci-timings": "The nightly training run took 41 min on May 2 and 97 min on May 9.",
    "changelog": "On May 6 the nightly training data loader's cache moved from local SSD to network storage.",
    "profiler": "In the nightly training run, 92% of the extra time is the data loader waiting on cache reads.",
    "eval-timings": "The evaluation job reads the same cache: 12 min on May 2, 31 min on May 9.",
}
REQUEST = "Find out why the nightly training run got slow. I like answers as three short bullet points."
QUESTION_FILE = "openrath/agent/questions/is-the-evaluation-job-slower-too.md"


def test_an_openrath_agent_and_a_flyte_agent_share_one_keys_memory(where, runs):
    key, out = runs.keys[f"frameworks-{where.target}"], runs.output(f"frameworks-{where.target}")
    research, advice, follow_up = out.split("=== What the store holds")[0].split("--- run ")[1:]
    assert "Recorded 4 memories: memory://agent/findings/ci-timings" in research
    assert (
        "- The nightly training run took 41 min on May 2 and 97 min on May 9. (openrath/agent/findings/ci-timings.md)"
        in advice
    )
    assert "Recorded 2 memories: memory://agent/findings/eval-timings, memory://agent/questions/" in follow_up
    # OpenRath's own recall (a find over our store) fed the earlier entries to the second session
    assert re.search(r"OpenRath recalled [1-9]\d* for the request", follow_up)

    # the researcher's entries, as storage holds them: one .md file per memory:// URI
    for name, text in FINDINGS.items():
        assert where.read(key, f"openrath/agent/findings/{name}.md") == text
    assert where.read(key, "openrath/user/preferences/answer-style.md") == "answers as three short bullet points"
    # the flyte Agent's question, then the researcher's answer appended by the second OpenRath session
    assert where.read(key, QUESTION_FILE) == (
        f"Is the evaluation job slower too?\nAnswer (researcher): {FINDINGS['eval-timings']}"
        " See memory://agent/findings/eval-timings."
    )

    # the flyte Agent's transcript in messages.json: its answer cites the findings, in the user's style
    messages = json.loads(where.read(key, "messages.json"))
    assert [m["role"] for m in messages][:1] == ["user"] and messages[0]["content"].startswith("Why did the nightly")
    calls = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()]
    assert calls == ["search_memory", "list_memory", *["read_memory"] * 4, "ask_researcher"]
    answer = messages[-1]
    assert answer["role"] == "assistant" and answer["content"].endswith(
        "I asked the researcher: Is the evaluation job slower too?"
    )
    bullets = [line for line in answer["content"].splitlines() if line.startswith("- ")]  # three, as the user asked
    cited = {f"- {FINDINGS[n]} (openrath/agent/findings/{n}.md)" for n in ("changelog", "ci-timings", "profiler")}
    assert len(bullets) == 3 and set(bullets) == cited

    # both OpenRath sessions committed, each a record log sessions/openrath-<id> whose id the run printed
    store = where.reopen(key)
    logs = sorted(store.list_paths("sessions"))
    committed = re.findall(r"committed: memory://session/([\w-]+)/transcript", out)
    assert len(logs) == 2 == len(committed) and {p.split("/")[1] for p in logs} == {f"openrath-{i}" for i in committed}
    first_log = next(p for p in logs if committed[0] in p)
    first = [json.loads(line) for line in where.read(key, first_log).splitlines()]
    assert first[0] == {"role": "user", "content": REQUEST} and first[-1]["content"].startswith("Recorded 4 memories")
    contents = [m["content"] for m in store.session(f"openrath-{committed[1]}").messages]
    assert "Answer the open questions the advisor left under memory://agent/questions." in contents

    # one history: the researcher's commits, the advisor's (its question and its 12 messages), the researcher's
    log = [(c.actor, c.wrote, c.appended) for c in reversed(store.log(limit=5))]
    archive, log_file = log[0][1]  # a commit archives its messages as OpenRath's local backend (0134)
    assert log[0][0] == "researcher" and log_file == first_log and log[0][2] == 0
    assert re.fullmatch(rf"openrath/session/{committed[0]}/commits/\d{{8}}T\d{{12}}/messages\.json\.md", archive)
    assert json.loads(where.read(key, archive))[0] == {"role": "user", "content": REQUEST}
    assert log[1] == ("advisor", (QUESTION_FILE,), 12)
    assert log[2:4] == [
        ("researcher", ("openrath/agent/findings/eval-timings.md",), 0),
        ("researcher", (QUESTION_FILE,), 0),
    ]
    question_writes = [(e["actor"], e["op"]) for e in store.audit_tail(0) if e["path"] == QUESTION_FILE]
    assert question_writes == [("advisor", "create"), ("researcher", "update")]


def test_a_flyte_agent_plugin_remembers_across_runs_in_our_store(where, runs):
    key, out = runs.keys[f"plugins-{where.target}"], runs.output(f"plugins-{where.target}")
    first, second = out.split("--- run 1 ---")[1].split("--- run 2 ---")
    assert "agent: Nice to meet you! I will remember that your name is Ada, your favourite language is Rust." in first
    second = second.split("=== What our store shows")[0]
    assert "agent: From what you told me earlier: your name is Ada; your favourite language is Rust." in second
    shown = out.split("=== What our store shows ===")[1]
    assert "(flyteplugins_memory.MemoryStore)" in shown, "the plugin's resolve_memory opened ours"
    assert "langgraph/history.json: 4 messages, 2 versions" in shown
    assert "search 'Rust': ['langgraph/history.json']" in shown
    stored = json.loads(where.read(key, "langgraph/history.json"))  # the plugin's format, as storage holds it
    assert [m["type"] for m in stored] == ["human", "ai", "human", "ai"] and "Ada" in stored[-1]["data"]["content"]
    store = where.reopen(key)
    assert [c.wrote for c in store.log(limit=2)] == [("langgraph/history.json",)] * 2
    assert [e["op"] for e in store.audit_tail(0)] == ["create", "update"]
    assert len(store.history("langgraph/history.json")) == 2


def test_s3_alone_runs_its_own_moto_server(runs):
    key, out = runs.keys["quickstart-s3-own"], runs.output("quickstart-s3-own")
    assert f"store {key!r}: 2 messages" in out
    assert f"memory lives at s3://flyte-memory-demo/{STORES}/v0/local/default/development/{key}" in out
    assert "this script's moto server has stopped" in out


def load_support() -> ModuleType:
    """``workflows/_support.py``, imported as the scripts import it (their folder is not a package)."""
    if "_support" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_support", FOLDER / "_support.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["_support"] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules["_support"]


def test_the_remote_image_installs_this_checkout_with_its_s3_and_gcs_dependencies():
    support = load_support()
    project = tomllib.loads((FOLDER.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    expected = [f"flyteplugins-memory @ {FOLDER.parent.resolve()}", *project["dependencies"], *extras["s3"]]
    assert support.image_packages(support.task_image()) == [*expected, *extras["gcs"]]
    assert any(r.startswith("s3fs>=") for r in expected) and any(r.startswith("flyte>=") for r in expected)


def test_the_remote_image_outside_a_checkout_installs_the_release_of_this_version(tmp_path):
    support = load_support()
    assert support.image_packages(support.task_image(tmp_path)) == [f"flyteplugins-memory[s3,gcs]=={__version__}"]
    assert support.image_packages(support.task_image(None)) == [f"flyteplugins-memory[s3,gcs]=={__version__}"]


def test_a_workflow_with_a_framework_adapter_gets_its_extra_in_the_image(tmp_path):
    """06_frameworks runs openrath in its tasks: its image adds the openrath extra to S3 and GCS."""
    support = load_support()
    openrath = tomllib.loads((FOLDER.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "openrath"
    ]
    assert set(openrath) <= set(support.image_packages(support.task_image(extras=("openrath",))))
    released = support.image_packages(support.task_image(tmp_path, extras=("openrath",)))
    assert released == [f"flyteplugins-memory[s3,gcs,openrath]=={__version__}"]


def test_parallel_subagents_audit_count_says_earlier_runs_are_included(tmp_path):
    """A key reused across runs keeps every batch's writes under the same subagent names: the count printed
    must not be called this batch's."""
    load_support()
    spec = importlib.util.spec_from_file_location("parallel_subagents", FOLDER / "03_parallel_subagents.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    store = MemoryStore("reused", remote_path=str(tmp_path / "reused"))
    for batch in ("one", "two"):
        for actor in ("agent-0", "agent-1"):
            store.write_text(f"findings/{actor}.md", batch, actor=actor)
            store.write_text("shared/summary.md", batch + actor, actor=actor)
        store.save()
    printed = asyncio.run(module.trail(store, ["agent-0", "agent-1"])).splitlines()
    assert printed[0] == "audit trail (newest 4 writes by these subagents; 8 on this key, all runs):"
    commits = printed[printed.index("commits (newest first):") + 1 :]  # as `log` and every workflow print them
    seqs = [int(line.split()[0].lstrip("#")) for line in commits]
    assert len(seqs) == 2 and seqs == sorted(seqs, reverse=True) and commits[0].endswith(", +0 messages")


def test_counts_take_the_number_they_count():
    plural = load_support().plural
    assert [plural(0, "file"), plural(1, "file"), plural(2, "file")] == ["0 files", "1 file", "2 files"]
    assert [plural(1, "retry", "retries"), plural(3, "retry", "retries")] == ["1 retry", "3 retries"]
    for script in WORKFLOWS:  # no "(s)" left in what a workflow prints
        assert "(s)" not in script.read_text(), script.name


def test_every_workflow_prints_commits_newest_first():
    for script in WORKFLOWS:
        text = script.read_text()
        assert "oldest first:" not in text and "reversed(await memory.log" not in text, script.name


def test_printed_cli_commands_run_as_printed(tmp_path, monkeypatch):
    """The CLI is named as this shell finds it: the bare name when the venv is on PATH, else its path (after
    ``make demo`` the venv is not activated, and a bare ``flyte-memory`` would not be found)."""
    support = load_support()
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "flyte-memory").write_text("#!/bin/sh\n")
    (bin_dir / "flyte-memory").chmod(0o755)
    python = str(bin_dir / "python")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert support.cli_program(python, tmp_path) == ".venv/bin/flyte-memory"
    assert support.cli_program(python, tmp_path / "elsewhere") == str(bin_dir / "flyte-memory")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert support.cli_program(python, tmp_path) == "flyte-memory"
    assert support.cli_program(str(tmp_path / "no-cli" / "python"), tmp_path) == "flyte-memory"


def test_the_demo_prints_a_cli_command_that_runs(tmp_path):
    """What 02 prints under "how to look inside" runs as printed from the directory it ran in."""
    support = load_support()
    command = support.Target("local", "demo-cli-check").cli("ls --help")  # no store needed
    program, *rest = command.split()
    done = subprocess.run([program, *rest], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--key" in done.stdout, done.stderr


def test_remote_runs_print_cli_commands_that_name_the_bucket():
    """A Flyte config names no storage root: a command without --root would search the local disk."""
    printed = load_support().Target("remote", "chat").look_inside("ls")
    assert (
        "flyte-memory ls --key chat --root s3://<raw-data bucket>" in printed and "raw-data bucket as --root" in printed
    )


@pytest.mark.parametrize("script", WORKFLOWS, ids=lambda p: p.name)
def test_a_bad_key_is_refused_before_any_run(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(script), "--key", "../x"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "argument --key: key must be a single path segment" in done.stderr and "Traceback" not in done.stderr
