"""Verbs about a file's past: ``history`` (its versions), ``diff`` (between two of them, or one and now),
``restore`` (a version written back as a new, audited commit).

``restore`` does not ask first: it rewrites nothing, the content it replaces stays a version in
``history`` and can be restored in turn.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import rich_click as click

from . import _render
from ._app import actor_options, json_option, memory, store_options
from ._target import Target, not_found, open_store

if TYPE_CHECKING:
    from flyteplugins_memory import HistoryEntry

#: how many hex digits of a sha256 the table shows (``--json`` has all of them)
SHORT_SHA = 12


@memory.command("history")
@click.argument("path")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Newest N versions.")
@store_options
@json_option
def history(path: str, limit: int, target: Target, json_output: bool) -> None:
    """The versions of the file at PATH, newest first: version id (for `diff` and `restore`), time, actor,
    reason, size, and whether the version is the file's deletion. A path the store never held (no
    version at all) fails as `cat` and `meta` do (exit 1)."""
    store = open_store(target)
    versions = store.history(path, limit)
    if not versions:
        raise not_found(f"no file {path!r} in the store at {store.remote_path}, and no history of one")
    if json_output:
        _render.emit_json(versions)
        return
    rows = (_row(entry) for entry in versions)
    columns = ("version", "time", "actor", "reason", "size", "sha256")
    caption = _render.count(len(versions), "version")
    _render.show(f"{path} in {store.remote_path}", _render.table(columns, rows), caption)


def _row(entry: HistoryEntry) -> tuple[str, ...]:
    size = "deleted" if entry.deleted else _render.human_size(entry.size)
    return entry.version_id, _render.when(entry.time), entry.actor, entry.reason, size, entry.sha256[:SHORT_SHA]


@memory.command("diff")
@click.argument("path")
@click.argument("version_a")
@click.argument("version_b", required=False)
@store_options
@json_option
def diff(path: str, version_a: str, version_b: str | None, target: Target, json_output: bool) -> None:
    """Unified diff of the file at PATH from VERSION_A to VERSION_B (ids from `history`), or to its
    current content when VERSION_B is left out. Prints nothing when they are equal."""
    store = open_store(target)
    text = store.diff(path, version_a, version_b)
    if json_output:
        _render.emit_json({"path": path, "a": version_a, "b": version_b, "diff": text})
        return
    # byte-exact into a pipe (for `patch` or a pager); a terminal would run the escapes stored content holds
    sys.stdout.write(_render.printable(text) if sys.stdout.isatty() else text)


@memory.command("restore")
@click.argument("path")
@click.argument("version")
@actor_options
@store_options
@json_option
def restore(path: str, version: str, actor: str, reason: str, target: Target, json_output: bool) -> None:
    """Write VERSION of the file at PATH (an id from `history`) back as its content, and save: a new
    audited commit on top of the history, which keeps the content it replaces. Restoring a deleted
    file brings it back; restoring a deletion deletes the file."""
    store = open_store(target)
    meta = store.restore(path, version, actor=actor, reason=reason)
    commit = None  # restoring a deletion of a file already gone changes nothing: no commit to name
    if store.has_unsaved_changes():
        store.save(actor=actor, reason=reason or f"restore {path} to {version}")
        commit = store.log(1)[0].seq
    result = {"path": path, "version": version, "sha256": meta.sha256 if meta else "", "commit": commit}
    if json_output:
        _render.emit_json({**result, "deleted": meta is None})
        return
    done = f"deleted {path}" if meta is None else f"restored {path} to {version}"
    _render.show(None, f"{done} (commit {commit})" if commit else f"{path} is already deleted: nothing changed")
