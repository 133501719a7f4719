"""Screenshots of `store.report()` in a real browser (headless Chromium), for docs/report.png.

Builds a small agent store (a chat with a tool call, notes with metadata, a binary file, proposals, a
record log, a session, three commits), renders its page, and photographs it at two widths: a desktop
window (1280 px, kept as docs/report.png) and a phone (420 px, written to the temp folder for a look).
A docs step, not a test: it needs Playwright (``pip install playwright``) and a Chromium, either
Playwright's own (``python -m playwright install chromium``) or a system one given with ``--chromium``
(Debian: ``apt-get install chromium-headless-shell``, then ``--chromium /usr/bin/chromium-headless-shell``).

Run: python docs/tools/report_screenshot.py [--chromium PATH] [--out docs/report.png]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import uuid

import flyte

from flyteplugins_memory import MemoryStore

#: (name, width, height): full-page shots at these viewport sizes
SIZES = (("desktop", 1280, 900), ("phone", 420, 860))
#: opened for the shot: the sessions and logs, and the contents and diffs of notes/backends.md and diagram.png
OPEN_SOME = """document.querySelectorAll('.fmr details').forEach(d => {
  const name = d.querySelector('summary').textContent;
  if (d.parentElement.matches('.fmr-card') || /backends.md|diagram.png/.test(name)) d.open = true;
})"""
PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"


def agent_store(key: str) -> MemoryStore:
    """A store as a research agent leaves it after two runs."""
    store = MemoryStore.get_or_create(key=key, keep_versions=True)
    store.append({"role": "system", "content": "You are a research assistant. Keep notes in memory."})
    store.append({"role": "user", "content": "Which storage backends does flyteplugins-memory support?"})
    call = {
        "id": "call_7f3a9c",
        "type": "function",
        "function": {"name": "search_docs", "arguments": '{"q": "backends"}'},
    }
    store.append({"role": "assistant", "content": "", "tool_calls": [call]})
    store.append({"role": "tool", "tool_call_id": "call_7f3a9c", "name": "search_docs", "content": "local disk, S3"})
    first = "# Backends\n\n* local disk\n* S3\n"
    store.write_text(
        "notes/backends.md", first, actor="researcher", reason="tool result", metadata={"topic": "storage"}
    )
    store.records("events/tools").extend([{"tool": "search_docs", "ms": 412}, {"tool": "write_note", "ms": 9}])
    store.session("run-42").append({"role": "user", "content": "hi from a side session"})
    store.save(actor="run-1", reason="first conversation")
    store.append({"role": "assistant", "content": "Local disk and S3 so far; checking GCS next."})
    more = {"topic": "storage", "confidence": 0.95}
    store.write_text(
        "notes/backends.md", first + "* GCS (via fsspec)\n", actor="write_note", reason="add GCS", metadata=more
    )
    profile = {"name": "Ada", "prefers": "short answers"}
    store.write_json("profile/user.json", profile, actor="agent", reason="learned preference")
    diagram = PNG_HEADER + bytes(range(64))
    store.write_bytes("attachments/diagram.png", diagram, actor="researcher", reason="architecture sketch")
    accepted = store.propose("notes/todo.md", "- benchmark GCS\n", actor="planner", reason="next step")
    store.accept(accepted.id, actor="reviewer", reason="looks right")
    store.propose("profile/user.json", '{"name": "Ada Lovelace"}', actor="agent", reason="full name heard")
    store.records("events/tools").append({"tool": "search_docs", "ms": 388})
    store.save(actor="run-2", reason="second conversation")
    return store


def main() -> None:
    cli = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    cli.add_argument("--chromium", help="a Chromium to use instead of Playwright's own")
    cli.add_argument("--out", default="docs/report.png", type=pathlib.Path, help="where the desktop shot goes")
    args = cli.parse_args()
    flyte.init()
    key = f"report-demo-{uuid.uuid4().hex[:6]}"
    store = agent_store(key)
    with tempfile.TemporaryDirectory() as tmp:
        page = pathlib.Path(tmp) / "report.html"
        page.write_text(store.report(), encoding="utf-8")
        shoot(page, args.out, args.chromium)
    MemoryStore.delete_store(key=key)


def shoot(page: pathlib.Path, out: pathlib.Path, chromium: str | None) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        for name, width, height in SIZES:
            tab = browser.new_page(viewport={"width": width, "height": height})
            tab.goto(page.as_uri())
            tab.evaluate(OPEN_SOME)
            target = out if name == "desktop" else pathlib.Path(tempfile.gettempdir()) / f"report-{name}.png"
            tab.screenshot(path=str(target), full_page=True)
            print(f"{name} ({width} px): {target}")
        browser.close()


if __name__ == "__main__":
    main()
