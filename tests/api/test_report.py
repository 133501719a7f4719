"""`store.report()`: what the page shows of a real store, that every stored string is escaped, that it
changes nothing in storage, and that `publish=True` puts it in a local run's Flyte report under "Memory"."""

from __future__ import annotations

import logging
import pathlib
import re
import shutil

import flyte
import pytest

from flyteplugins_memory import Commit, InvalidArgument, MemoryStore
from flyteplugins_memory._api.report.build import FileRow, Snapshot
from flyteplugins_memory._api.report.html import render_document, render_fragment
from report_page import HOSTILE, LONG, Page, assert_inert, section


def roles(document: str) -> list[str]:
    return re.findall(r'<div class="fmr-msg fmr-(\w+)">', document)


def build_agent_store(key: str) -> MemoryStore:
    """A store as an agent leaves it: a chat with a tool call and its result, notes, three commits."""
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.append({"role": "system", "content": "You keep notes."})
    store.append({"role": "user", "content": "Which backends are there?"})
    call = {
        "id": "call_7f3a",
        "type": "function",
        "function": {"name": "search_docs", "arguments": '{"q": "backends"}'},
    }
    store.append({"role": "assistant", "content": "", "tool_calls": [call]})
    store.append({"role": "tool", "tool_call_id": "call_7f3a", "name": "search_docs", "content": "disk, S3, GCS"})
    store.write_text("notes/backends.md", "disk, S3", actor="researcher", reason="tool result")
    store.save(actor="run-1", reason="first conversation")
    store.append({"role": "assistant", "content": [{"type": "text", "text": "Saved to notes."}]})
    store.write_text("notes/backends.md", "disk, S3, GCS", actor="write_note", reason="add GCS")
    store.write_json("profile/user.json", {"name": "Ada"}, actor="agent", reason="learned preference")
    store.save(actor="run-2", reason="second conversation")
    return store


def test_the_page_shows_files_chat_commits_and_audit(local_backend, key):
    build_agent_store(key)
    page_html = MemoryStore.get_or_create(key=key).report()  # a fresh handle: what storage holds
    text = assert_inert(page_html).text
    assert page_html.startswith("<!DOCTYPE html>") and f"<title>Memory · {key}</title>" in page_html
    # files: a tree with sizes, version counts, last actor, time and reason
    assert "notes/" in text and "backends.md" in text and "profile/" in text and "user.json" in text
    row = re.search(
        r'title="notes/backends.md"><details><summary>backends.md</summary>.*?</td>(.*?)</tr>', page_html, re.DOTALL
    )
    assert row and '"fmr-num">13 B<' in row[1] and '"fmr-num">2<' in row[1] and "write_note" in row[1]
    assert "add GCS" in row[1] and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row[1])
    assert "2 files" in text and "3 messages" not in text and "5 messages" in text
    # chat: each role styled apart; the tool call (name, id, arguments) and its result (tool, call id)
    assert roles(page_html) == ["system", "user", "assistant", "tool", "assistant"]
    assert re.search(
        r"calls <b[^>]*>search_docs</b>.*call_7f3a.*&quot;q&quot;: &quot;backends&quot;", page_html, re.DOTALL
    )
    assert re.search(r"<b>tool</b>.*result of search_docs.*call_7f3a", page_html)
    assert "disk, S3, GCS" in text and "Saved to notes." in text  # content parts shown by their text
    # the commit log (newest first) and the audit trail
    assert text.index("second conversation") < text.index("first conversation")
    assert "run-1" in text and "run-2" in text and "3 commits" in text  # create + two saves
    assert text.count("learned preference") == 2  # the file's last reason, and its audit event
    assert re.search(r"fmr-op-update\">update</span> <span class=\"fmr-mono fmr-path\">notes/backends.md", page_html)
    assert "unsaved changes" not in text


def test_every_stored_string_comes_out_escaped(local_backend, key):
    key = f"{key}<b>&\"'<script>"  # a key may hold anything but "/", "\\" and control characters
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    for index, hostile in enumerate(HOSTILE):
        store.write_text(f"d{index}/{hostile}.md", hostile, actor=hostile, reason=hostile)
        hostile_call = {"id": hostile, "type": hostile, "function": {"name": hostile, "arguments": hostile}}
        store.append({"role": hostile, "content": hostile, "name": hostile, "tool_calls": [hostile_call]})
        store.append({"role": "tool", "tool_call_id": hostile, "name": hostile, "content": {hostile: [hostile]}})
    store.append({"role": "user", "content": LONG})
    store.save(actor=HOSTILE[0], reason=HOSTILE[1])
    page_html = store.report()
    text = assert_inert(page_html).text
    for hostile in [*HOSTILE, key]:
        assert hostile in text  # shown as the text it is, not markup
    assert html_escaped('"><img src=x onerror=alert(2)>') in page_html
    assert "<img" not in page_html and "&amp;amp;" in page_html  # "&amp;" itself stays visible as typed
    assert "x" * 4000 + "… (+46,000 characters)" in text and LONG not in text  # long strings are clipped
    assert set(roles(page_html)) == {"other", "tool", "user"}  # a role is never used as markup


def html_escaped(value: str) -> str:
    import html

    return html.escape(value, quote=True)


def test_the_renderer_escapes_every_field_of_a_snapshot():
    """Fields no store call can make hostile today (a key, audit fields, commit paths) are escaped too."""
    bad = HOSTILE[0] + HOSTILE[1]
    commit = Commit(7, bad, bad, bad, bad, bad, (bad,), (bad,), 2, True)
    event = {"ts": bad, "op": bad, "path": bad, "actor": bad, "reason": bad, bad: bad}
    snapshot = Snapshot(
        key=bad, location=bad, generated_at=bad, unsaved=True,
        files=(FileRow(f"{bad}/{bad}", 5, bad, bad, bad, 3),), files_hidden=0, total_bytes=5,
        messages=({"role": "assistant", "content": None, "tool_calls": bad}, {bad: bad, "tool_calls": [bad, {}]}),
        messages_hidden=0, commits=(commit,), commits_more=False, events=(event,), events_more=False,
    )  # fmt: skip
    for document in (render_document(snapshot), render_fragment(snapshot)):
        text = assert_inert(document).text
        assert text.count(HOSTILE[0]) >= 10 and "messages rewritten" in text and "2 messages appended" in text


def test_the_report_changes_nothing_in_storage(request, tmp_path, key):
    """On local disk and S3: the report reads, it never writes (the backend's own listing before and after)."""
    for name in ("local", "s3"):
        backend = request.getfixturevalue(f"{name}_backend")
        store = build_agent_store(f"{key}-{name}")
        before = backend.stored(f"{key}-{name}")
        assert "notes/backends.md" in Page(store.report()).text
        assert "notes/backends.md" in Page(MemoryStore.get_or_create(key=f"{key}-{name}").report()).text
        assert backend.stored(f"{key}-{name}") == before


def test_unsaved_changes_are_shown_and_said(local_backend, key):
    store = build_agent_store(key)
    store.write_text("notes/draft.md", "not saved", actor="drafter")
    store.append({"role": "user", "content": "not saved either"})
    text = Page(store.report()).text
    assert "unsaved changes" in text and "draft.md" in text and "not saved either" in text
    assert text.count("drafter") == 2  # the file row and its pending audit event; no commit names it
    assert store.list_paths() != [] and store.has_unsaved_changes()  # the report saved nothing


def test_big_stores_are_bounded_and_say_what_is_left_out(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    for index in range(4):
        store.append({"role": "user", "content": f"message {index}"})
        store.write_text(f"f{index}.txt", str(index), actor=f"writer{index}")
        store.save()
    page_html = store.report(max_files=1, max_messages=2, max_commits=2, max_events=3)
    assert_inert(page_html)
    chat, files = section(page_html, "Transcript"), section(page_html, "Files")
    commits, audit = section(page_html, "Commit log"), section(page_html, "Audit trail")
    assert "2 older messages not shown." in chat and "message 1" not in chat and "message 3" in chat
    assert "3 more files not shown." in files and "f0.txt" in files and "f1.txt" not in files
    assert "Older commits not shown." in commits and "newest 2" in commits and commits.count("writer") == 2
    assert "Older events not shown." in audit and "writer3" in audit and "writer0" not in audit


@pytest.mark.parametrize(
    "arguments",
    [{"publish": "yes"}, {"max_files": 0}, {"max_messages": True}, {"max_commits": "5"}, {"max_events": -1}],
)
def test_bad_arguments_are_refused(local_backend, key, arguments):
    store = MemoryStore.get_or_create(key=key)
    with pytest.raises(InvalidArgument):
        store.report(**arguments)


def test_publish_outside_a_task_only_warns(local_backend, key, caplog):
    store = build_agent_store(key)
    with caplog.at_level(logging.WARNING, logger="flyteplugins_memory._api.report.build"):
        page_html = store.report(publish=True)
    assert "outside a Flyte task" in caplog.text and "search_docs" in page_html


env = flyte.TaskEnvironment(name="memory_report")


@env.task(report=True)
async def agent_turn(key: str) -> int:
    store = await MemoryStore.get_or_create.aio(key=key)
    store.append({"role": "user", "content": "remember <this>"})
    await store.write_text.aio("notes/remembered.md", "yes", actor="agent-task", reason="a turn")
    await store.save.aio()
    return len(await store.report.aio(publish=True))


@env.task(report=True)
def agent_turn_sync(key: str) -> int:
    store = MemoryStore.get_or_create(key=key)
    store.append({"role": "user", "content": "remember <this>"})
    store.write_text("notes/remembered.md", "yes", actor="agent-task", reason="a turn")
    store.save()
    return len(store.report(publish=True))


@pytest.mark.parametrize("task", [agent_turn, agent_turn_sync], ids=["async", "sync"])
def test_publish_puts_a_memory_tab_in_the_local_runs_report(tmp_path, key, task):
    flyte.init()
    run = flyte.with_runcontext(mode="local", raw_data_path=str(tmp_path / "raw")).run(task, key=key)
    assert run.outputs()[0] > 0
    # a local run keeps its metadata (the report among it) at /tmp/flyte/metadata/<run name>: its url
    run_dir = pathlib.Path(run.url)
    try:
        [report_file] = run_dir.rglob("report.html")
        report = report_file.read_text(encoding="utf-8")
    finally:
        shutil.rmtree(run_dir)
    assert re.search(r"<li[^>]*>Memory</li>", report)  # flyte's tab bar
    tab = report[report.index('<div class="fmr">') :]
    tab = tab[: tab.index("</section></div></div>")]
    assert "notes/" in tab and "remembered.md" in tab and "agent-task" in tab and "remember &lt;this&gt;" in tab
    assert "<!DOCTYPE" not in tab and "<html" not in tab and "<script" not in tab  # a fragment, inert
    assert key in tab
