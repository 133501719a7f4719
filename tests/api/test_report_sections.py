"""`store.report()`'s deeper sections: file contents (folded, capped, binary shown as binary), each commit's
changes as diffs, proposals with their status, record logs and sessions, the metadata column and message
times; every one of them with hostile names and contents, escaped. Plus the layout rules the page keeps
(words stay whole; only hashes, ids and code may break anywhere) and the pure pieces behind the sections."""

from __future__ import annotations

import re
from importlib import resources

from flyteplugins_memory import Commit, MemoryStore
from flyteplugins_memory._api.report.contents import PREVIEW_CHARS, READ_LIMIT, file_diff, message_times, preview
from report_page import HOSTILE, assert_inert, section

BAD = HOSTILE[0] + HOSTILE[1] + HOSTILE[2]  # <script>, a quote that closes an attribute, an ampersand
BINARY = b"\x89PNG\r\n\x1a\n\x00\x01\xfe\xff" + bytes(range(40))


def agent_store(key: str) -> MemoryStore:
    """Every section at once, with hostile text in each: two commits, a proposal of each status, a record
    log, a session, binary and big files, metadata, and a diff of hostile content."""
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.append({"role": "user", "content": f"first {BAD}"})
    store.write_text("notes/plan.md", f"step one\n{BAD}\n", actor=BAD, reason=BAD, metadata={BAD: BAD, "n": 3})
    store.write_bytes("blobs/image.png", BINARY, actor="camera")
    store.write_text("big/huge.txt", "y" * (READ_LIMIT + 1), actor="dumper")
    store.write_text("big/long.txt", "z" * (PREVIEW_CHARS + 25), actor="dumper")
    store.records("events/tools").extend([{"tool": BAD}, {"tool": "fetch", "ms": 12}])
    store.session(f"chat{HOSTILE[2]}").append({"role": "user", "content": f"side {BAD}"})
    store.save(actor="run-1", reason="first")
    store.append({"role": "assistant", "content": "second", "timestamp": "2001-02-03T04:05:06+00:00"})
    store.write_text("notes/plan.md", f"step one\nstep two {BAD}\n", actor="editor", metadata={"n": 4})
    for status in ("accepted", "discarded", "draft"):
        proposal = store.propose(f"ideas/{status}.md", f"{status} {BAD}", actor=BAD, reason=f"why {BAD}")
        if status != "draft":
            (store.accept if status == "accepted" else store.discard)(proposal.id, actor="judge", reason=BAD)
    store.save(actor="run-2", reason="second")
    store.append({"role": "user", "content": "not saved yet"})
    return store


def test_every_new_section_is_there_and_escaped(local_backend, key):
    page_html = agent_store(key).report()
    text = assert_inert(page_html).text
    assert "<img" not in page_html and "&lt;script&gt;alert(1)&lt;/script&gt;" in page_html
    assert text.count(BAD) >= 12  # file content, diff, metadata, actor, reason, proposals, records, session
    # file contents: folded under the file's row; capped; binary as binary (hex), never as text; big not read
    files = section(page_html, "Files")
    assert re.search(r"<details><summary>plan.md</summary><pre class=\"fmr-code\">step one\nstep two", page_html)
    assert "binary content, 52 B" in files and "89 50 4e 47 0d 0a 1a 0a 00 01 fe ff" in files and "PNG" not in files
    assert "not shown: larger than 256 KiB" in files and "y" * 100 not in files
    assert "z" * PREVIEW_CHARS in files and "z" * (PREVIEW_CHARS + 1) not in files and "25 characters more" in files
    # the metadata column: the file's keys and values, escaped like everything else
    assert re.search(r'fmr-kv"><span class="fmr-dim">n</span>=4<', page_html)
    assert "metadata" in files.lower()
    # each commit's changes as a diff: the line added, the line removed, a binary file said as such
    commits = section(page_html, "Commit log")
    assert f"+step two {BAD}" in commits and f"-{BAD}" in commits and f"+{BAD}" in commits
    assert "Binary content /dev/null and blobs/image.png@c2 differ" in commits
    assert "a record log's segment" in commits and "too large to diff here" in commits
    # proposals with their status, a draft's content, who decided and why
    proposals = section(page_html, "Proposals")
    for status in ("draft", "accepted", "discarded"):
        assert f"ideas/{status}.md" in proposals and status in proposals
    assert f"draft {BAD}" in proposals and "pending" in proposals and proposals.count("judge") == 2
    assert "<b>1</b>pending proposal<" in page_html  # the header's count
    # record logs (records as JSON lines) and sessions (as a chat)
    logs, sessions = section(page_html, "Record logs"), section(page_html, "Sessions")
    assert "events/tools" in logs and "2 records" in logs and '{"tool": "' + BAD.replace('"', '\\"') + '"}' in logs
    assert f"chat{HOSTILE[2]}" in sessions and f"side {BAD}" in sessions and "sessions/" not in sessions
    assert "chat" not in logs  # a session is shown once, as a session
    # times on messages: the saving commit's, a message's own, "unsaved" for one not saved yet
    times = re.findall(r'<span class="fmr-msg-time">([^<]*)</span>', page_html)
    assert len(times) == 3 and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", times[0])
    assert times[1:] == ["2001-02-03 04:05:06", "unsaved"]


def test_a_store_without_the_new_parts_shows_no_empty_cards(local_backend, key):
    store = MemoryStore.get_or_create(key=key)
    store.write_text("a.md", "a")
    store.save()
    text = assert_inert(store.report()).text
    assert "Proposals" not in text and "Record logs" not in text and "Sessions" not in text


def test_words_stay_whole_and_only_hashes_and_code_break_anywhere():
    """ "resear/cher": a table cell may wrap between words, never inside one that fits; ids, hashes, code
    lines and the store's location may break anywhere, since they have no words."""
    css = resources.files("flyteplugins_memory._api.report").joinpath("report.css").read_text(encoding="utf-8")
    anywhere = re.findall(r"([^{}]+)\{[^}]*overflow-wrap:anywhere", css)
    assert {s.strip() for s in anywhere} == {".fmr .fmr-loc", ".fmr .fmr-hash", ".fmr .fmr-code", ".fmr .fmr-kv"}
    assert "word-break:break-all" not in css.replace(".fmr .fmr-hash{overflow-wrap:anywhere;word-break:break-all}", "")
    assert re.search(r"\.fmr td\{[^}]*overflow-wrap:break-word", css)
    assert "grid-template-columns" not in css  # one column: no half-empty page beside a short transcript


def test_previews_diffs_and_times_are_bounded_and_honest():
    assert preview(b"caf\xc3\xa9").text == "café" and not preview(b"caf\xc3\xa9").binary
    assert preview(b"a\x00b").binary and preview(b"\xff\xfe").binary  # a NUL, or not UTF-8: binary
    diff = file_diff("p", "write", b"".join(b"%d\n" % i for i in range(500)), b"", 3)
    assert diff.text.startswith("--- p@c2\n+++ p@c3\n") and diff.clipped > 0
    assert file_diff("p", "write", b"same", b"same", 3).note.startswith("content unchanged")
    c = [
        Commit(3, "c", "save", "T3", "a", "", (), (), 1, False),
        Commit(2, "b", "save", "T2", "a", "", (), (), 2, True),  # rewrote: older indices moved
        Commit(1, "a", "save", "T1", "a", "", (), (), 5, False),
    ]
    messages = [{"role": "user"}] * 5
    assert message_times(messages, 4, c) == ["", "T2", "T2", "T3", "unsaved"]
