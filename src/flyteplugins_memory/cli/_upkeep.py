"""Verbs that change a store: ``rm`` (a saved, audited delete), ``purge`` (every stored copy of a path's
content), ``gc`` (what no committed state in the retention window needs; ``--dry-run`` only says what).
``rm`` and ``purge`` ask first unless ``--yes``; a declined prompt changes nothing (exit code 1)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import rich_click as click

from . import _progress, _render
from ._app import actor_options, json_option, memory, store_options, yes_option
from ._target import Target, not_found, open_store

if TYPE_CHECKING:
    from flyteplugins_memory import MemoryStore

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@memory.command("rm")
@click.argument("path")
@yes_option
@actor_options
@store_options
@json_option
def rm(path: str, yes: bool, actor: str, reason: str, target: Target, json_output: bool) -> None:
    """Delete the file at PATH and save (an audited commit; its history stays until gc or purge)."""
    store = open_store(target)
    # the delete stays in this handle until `save`: a declined prompt leaves storage as it was, and the
    # path rules (a reserved or read-only path) are checked before anything is asked
    if not store.delete(path, actor=actor, reason=reason):
        raise not_found(f"no file {path!r} in the store at {store.remote_path}")
    if not yes:
        click.confirm(f"Delete {path} from {store.remote_path}?", abort=True, err=True)
    store.save(actor=actor, reason=reason or f"rm {path}")
    commit = store.log(1)[0].seq
    if json_output:
        _render.emit_json({"deleted": path, "commit": commit})
        return
    _render.show(None, f"deleted {path} (commit {commit})")


@memory.command("purge")
@click.argument("path")
@yes_option
@actor_options
@store_options
@json_option
def purge(path: str, yes: bool, actor: str, reason: str, target: Target, json_output: bool) -> None:
    """Delete PATH and remove every stored copy of its past and present content now (cannot be undone)."""
    store = open_store(target)
    # the path rules first (a reserved path or `..` fails before any question), on a handle that is then
    # dropped unsaved: `purge` deletes and saves by itself. A path never held fails as `rm` does.
    if not store.delete(path, actor=actor, reason=reason) and not store.history(path, 1):
        raise not_found(f"no file {path!r} in the store at {store.remote_path}, and no history of one")
    if yes:
        store = open_store(target)
    else:
        question = f"Purge {path} and every stored copy of its content from {store.remote_path}? This cannot be undone."
        click.confirm(question, abort=True, err=True)
        store = open_store(target)
    with _progress.working(f"purging {path}", enabled=_progress.wanted(json_output)):
        result = store.purge(path, actor=actor, reason=reason)
    if json_output:
        _render.emit_json(result)
        return
    rows = [("objects removed", result.objects), ("bytes removed", _render.human_size(result.bytes))]
    rows += [("content hashes gone", len(result.shas)), ("kept (another path holds them)", len(result.kept_shas))]
    rows.append(("delete commit", "none (no live file)" if result.commit is None else result.commit))
    _render.show(f"purged {path}", _render.table(("result", "value"), rows))


@memory.command("gc")
@click.option("--window", help="Retention window, e.g. 0, 90m, 24h, 7d (default: the store's, else 24h).")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed; remove and commit nothing.")
@yes_option
@store_options
@json_option
def gc(window: str | None, dry_run: bool, yes: bool, target: Target, json_output: bool) -> None:
    """Remove commits, checkpoints and content that no state committed inside the retention window needs,
    `versions/` snapshots the store's retention policy lets go, and files whose ttl ran out."""
    store = open_store(target)
    keep = None if window is None else parse_window(window)
    if keep == timedelta(0) and not dry_run and not yes:
        # a window of 0 drops every past state at once: asked first, as rm and purge ask
        question = f"Remove every past state of {_name(store)} (only the newest stays openable)? This cannot be undone."
        click.confirm(question, abort=True, err=True)
    with _progress.working(f"collecting {_name(store)}", enabled=_progress.wanted(json_output)):
        result = store.gc(keep, dry_run=dry_run)
    if json_output:
        _render.emit_json(result)
        return
    rows = [("objects", result.objects), ("bytes", _render.human_size(result.bytes))]
    rows += [("of them versions/ snapshots", result.versions), ("commits no longer openable", len(result.commits))]
    rows.append(("expired files deleted", "\n".join(result.expired) or "none"))
    heading = f"gc --dry-run of {_name(store)}: would remove" if dry_run else f"gc of {_name(store)}: removed"
    _render.show(heading, _render.table(("result", "value"), rows))


def parse_window(text: str, option: str = "--window") -> timedelta:
    """``0``, ``45s``, ``90m``, ``24h``, ``7d`` (a bare number is seconds); errors name `option`."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise click.BadParameter(f"{text!r} is not a duration like 0, 90m, 24h or 7d", param_hint=option)
    try:
        return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    except OverflowError:  # past timedelta's ~2.7 million years
        raise click.BadParameter(f"{text!r} is longer than any duration kept", param_hint=option) from None


def _name(store: MemoryStore) -> str:
    return store.remote_path or store.key
