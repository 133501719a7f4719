"""Verbs that move a whole store: ``export`` (one checked ``.tar.gz``) and ``import`` (a new store made
of one), with a bar of bytes on a terminal. ``import`` names the new store like every verb (``--key``
and friends, or ``--uri``) and, like ``create``, refuses a key that holds a store."""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

import rich_click as click

from . import _progress, _render
from ._app import actor_options, json_option, memory, store_options
from ._target import Target, open_store

if TYPE_CHECKING:
    from flyteplugins_memory import ExportResult, MemoryStore, ProgressCallback

_SIZE = click.IntRange(min=1)


@memory.command("export")
@click.argument("dest")
@click.option("--force", "-f", is_flag=True, help="Replace what is at DEST (kept until the archive is complete).")
@store_options
@json_option
def export(dest: str, force: bool, target: Target, json_output: bool) -> None:
    """Write the whole store, as committed, to one .tar.gz at DEST (a local path or a URI such as
    s3://bucket/backups/agent.tar.gz): files, transcript, sidecars, audit trail, versions and the history
    gc() has not collected, with a manifest of checksums. `import` makes a new store of it. An existing
    DEST is replaced only with --force, and only once the new archive is complete."""
    _check_local_folder(dest)
    store = open_store(target)
    with _progress.bytes_bar(enabled=_progress.wanted(json_output)) as progress:
        result = _export(store, dest, force, progress)
    if json_output:
        _render.emit_json(result)
        return
    _render.show(f"exported {store.remote_path} to {dest}", _render.table(("result", "value"), _export_rows(result)))


def _export(store: MemoryStore, dest: str, force: bool, progress: ProgressCallback | None) -> ExportResult:
    from flyteplugins_memory import ArchiveExists

    try:
        return store.export(dest, overwrite=force, progress=progress)
    except ArchiveExists:  # the library names its parameter (overwrite=True); a shell user has --force
        raise ArchiveExists(f"{dest} exists (add --force to replace it)") from None


def _check_local_folder(dest: str) -> None:
    """A local DEST's folder must exist: a typo in it fails rather than growing a new tree of folders."""
    if "://" in dest:
        return
    folder = pathlib.Path(dest).expanduser().parent
    if not folder.is_dir():
        raise click.UsageError(f"no folder {str(folder)!r} for the archive (create it first)")


def _export_rows(result: ExportResult) -> list[tuple[str, object]]:
    rows: list[tuple[str, object]] = [("objects", result.members), ("data", _render.human_size(result.data_bytes))]
    rows.append(("archive (compressed)", _render.human_size(result.bytes)))
    return rows + [(f"  {kind}", count) for kind, count in sorted(result.counts.items())]


@memory.command("import")
@click.argument("src")
@click.option("--max-member-bytes", type=_SIZE, help="Refuse a member larger than this (default: 1 GiB).")
@click.option("--max-total-bytes", type=_SIZE, help="Refuse an archive holding more (default: 8 GiB).")
@actor_options
@store_options
@json_option
def import_(
    src: str,
    max_member_bytes: int | None,
    max_total_bytes: int | None,
    actor: str,
    reason: str,
    target: Target,
    json_output: bool,
) -> None:
    """Create a new store, named by --key (or --uri), from the archive `export` wrote at SRC. The archive
    is checked in full before anything is stored: one that breaks a rule (paths outside the store, links,
    devices, duplicates, checksums, sizes over the limits) is refused and nothing is stored."""
    limits = {"max_member_bytes": max_member_bytes, "max_total_bytes": max_total_bytes}
    options = {name: value for name, value in limits.items() if value is not None}
    with _progress.bytes_bar(enabled=_progress.wanted(json_output)) as progress:
        store = _import(src, target, progress=progress, actor=actor, reason=reason, **options)
    commit = store.log(1)[0].seq
    files = len(store.list_paths())
    if json_output:
        _render.emit_json({"uri": store.remote_path, "source": src, "files": files, "commit": commit})
        return
    rows = [("files", files), ("messages", len(store.messages)), ("import commit", commit)]
    _render.show(f"imported {src} into {store.remote_path}", _render.table(("result", "value"), rows))


def _import(src: str, target: Target, **options: Any) -> MemoryStore:
    """`MemoryStore.import_store` into the store the options name (checked as every verb checks them)."""
    from flyteplugins_memory import MemoryStore

    target.check_store_naming()
    if target.uri is not None:
        return MemoryStore.import_store(src, remote_path=target.uri.rstrip("/"), **options)
    full = target.with_config()
    return MemoryStore.import_store(
        src, key=target.key, org=full.org, project=full.project, domain=full.domain, root=target.root, **options
    )
