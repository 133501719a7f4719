"""``report --html FILE``: write a store's HTML page (`MemoryStore.report`) to a file.

The page is the one ``store.report()`` returns: self-contained, no scripts, every string from the store
escaped. The file is written whole or not at all (a temporary file beside it, then a rename), so a reader
never opens half a page, and an existing file is replaced only with ``--force``.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

import rich_click as click

from . import _progress, _render
from ._app import json_option, memory, store_options
from ._target import Target, open_store


@memory.command("report")
@click.option(
    "--html",
    "html_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="Where to write the page.",
)
@click.option("--force", "-f", is_flag=True, help="Replace FILE if it exists.")
@click.option(
    "--max-messages",
    default=200,
    show_default=True,
    type=click.IntRange(min=1),
    help="Newest transcript messages shown.",
)
@click.option("--max-files", default=500, show_default=True, type=click.IntRange(min=1), help="Files shown.")
@store_options
@json_option
def report(
    html_path: pathlib.Path, force: bool, max_messages: int, max_files: int, target: Target, json_output: bool
) -> None:
    """Write one self-contained HTML page of the store (files, transcript, commits, audit trail) to FILE."""
    if html_path.exists() and not force:
        raise click.UsageError(f"{html_path} exists (add --force to replace it)")
    if not html_path.parent.is_dir():  # a typo in the folder fails rather than growing a tree of folders
        raise click.UsageError(f"no folder {str(html_path.parent)!r} for --html (create it first)")
    store = open_store(target)
    with _progress.working(f"reading {store.remote_path}", enabled=_progress.wanted(json_output)):
        page = store.report(max_messages=max_messages, max_files=max_files)
    _write_whole(html_path, page)
    if json_output:
        _render.emit_json({"store": store.remote_path, "html": str(html_path), "bytes": len(page.encode())})
        return
    _render.show(None, f"wrote {html_path} ({_render.human_size(len(page.encode()))}); open it in a browser")


def _write_whole(path: pathlib.Path, text: str) -> None:
    """Write `text` to `path` atomically: a half-written page must never stand in for the file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide the page from a web server or a teammate
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (reading it means setting it: put back at once)."""
    current = os.umask(0o022)
    os.umask(current)
    return current
