"""Verbs about a store's files and about which stores exist: ``ls``, ``cat``, ``meta``, ``keys``."""

from __future__ import annotations

import json
import pathlib
import sys
from typing import TYPE_CHECKING, Any

import rich_click as click

from . import _listing, _render
from ._app import json_option, memory, namespace_options, store_options
from ._target import Target, list_keys, not_found, open_store
from ._where import where_option

if TYPE_CHECKING:
    from flyteplugins_memory import MemoryMeta, MemoryStore


@memory.command("ls")
@click.argument("prefix", default="")
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    help="Show N levels below PREFIX; deeper folders are folded into one row each (files, size).",
)
@store_options
@where_option
@json_option
def ls(prefix: str, depth: int | None, target: Target, where: dict[str, Any], json_output: bool) -> None:
    """The store's files under PREFIX as a tree, with sizes, last actor and time (and metadata, if any)."""
    store = open_store(target)
    metas = [_meta_of(store, path) for path in store.list_paths(prefix, where=where)]
    shown, folded = _listing.fold(metas, prefix, depth)
    if json_output:
        document = {"uri": store.remote_path, "messages": len(store.messages), "files": shown}
        _render.emit_json(document | ({"folded": folded} if depth is not None else {}))
        return
    total = sum(meta["bytes"] or 0 for meta in metas)
    caption = f"{_render.count(len(metas), 'file')}, {_render.human_size(total)}; "
    caption += f"{_render.count(len(store.messages), 'message')} in the transcript"
    labelled = any(meta.get("metadata") for meta in shown)  # the column only where it says something
    rows = [_tree_row(meta, indent, labelled) if meta else (indent,) for indent, meta in _tree(shown)]
    rows += [_listing.folded_row(entry) for entry in folded]
    columns = ("path", "size", "updated by", "updated at", "reason") + (("metadata",) if labelled else ())
    _render.show(
        store.remote_path, _render.table(columns, [r + ("",) * (len(columns) - len(r)) for r in rows]), caption
    )


def _meta_of(store: MemoryStore, path: str) -> dict[str, Any]:
    meta = store.get_meta(path)
    if meta is not None:
        return _render.plain(meta)
    # a file without a sidecar (written behind the store's back): what we know; its size from its text,
    # so a file that is not UTF-8 (a binary an upstream store holds) has none rather than failing the listing
    from flyteplugins_memory import CorruptStore

    try:
        size: int | None = len(store.read_text(path).encode())
    except CorruptStore:
        size = None
    return {"path": path, "bytes": size, "sha256": store.current_sha(path)}


def _tree(metas: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any] | None]]:
    """Rows of a sorted file list drawn as a tree: each directory once (meta None), then its files.

    Sorted paths keep every directory's files together (all strings starting with ``d/`` are adjacent)."""
    rows: list[tuple[str, dict[str, Any] | None]] = []
    shown: set[str] = set()
    for meta in metas:
        parts = meta["path"].split("/")
        for depth in range(1, len(parts)):
            if (directory := "/".join(parts[:depth])) not in shown:
                shown.add(directory)
                rows.append(("  " * (depth - 1) + parts[depth - 1] + "/", None))
        rows.append(("  " * (len(parts) - 1) + parts[-1], meta))
    return rows


def _tree_row(meta: dict[str, Any], label: str, labelled: bool) -> tuple[str, ...]:
    size = "?" if meta.get("bytes") is None else _render.human_size(int(meta["bytes"]))
    row = label, size, meta.get("updated_by", ""), _render.when(meta.get("updated_at", "")), meta.get("reason", "")
    return (*row, _pairs(meta.get("metadata") or {})) if labelled else row


def _pairs(metadata: dict[str, Any]) -> str:
    """Metadata as ``key=value`` pairs, values as ``--where`` takes them (JSON)."""
    return " ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in sorted(metadata.items()))


@memory.command("cat")
@click.argument("path")
@click.option("--bytes", "as_bytes", is_flag=True, help="Write the file's bytes to stdout as stored (a pipe or file).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="Write the file's bytes to FILE instead (its folder must exist).",
)
@click.option("--force", "-f", is_flag=True, help="With --output: replace FILE if it exists.")
@store_options
@json_option
def cat(path: str, as_bytes: bool, output: pathlib.Path | None, force: bool, target: Target, json_output: bool) -> None:
    """Print the content of the file at PATH (as it is when piped; control characters escaped on a
    terminal). A binary file: `--bytes` into a pipe, or `--output FILE`."""
    _check_output(output, force)
    if as_bytes and output is None and sys.stdout.isatty() and not json_output:
        raise click.UsageError("--bytes would print raw bytes to the terminal: pipe it, or use --output FILE")
    store = open_store(target)
    _require_file(store, path)
    if as_bytes or output is not None:
        _write_bytes(store, path, output, json_output)
        return
    text = _read_text(store, path)
    if json_output:
        _render.emit_json({"path": path, "sha256": store.current_sha(path), "content": text})
        return
    # byte-exact into a pipe or file; a terminal would run the escape sequences an agent wrote
    sys.stdout.write(_render.printable(text) if sys.stdout.isatty() else text)


def _check_output(output: pathlib.Path | None, force: bool) -> None:
    """Refuse an --output that would replace a file without --force, or whose folder does not exist."""
    if output is None:
        return
    if output.exists() and not force:
        raise click.UsageError(f"{output} exists (add --force to replace it)")
    if not output.parent.is_dir():
        raise click.UsageError(f"no folder {str(output.parent)!r} for --output (create it first)")


def _read_text(store: MemoryStore, path: str) -> str:
    from flyteplugins_memory import NotText

    try:
        return store.read_text(path)
    except NotText:
        raise NotText(f"{path!r} is binary, not valid UTF-8 text: use --bytes (into a pipe) or --output FILE") from None


def _write_bytes(store: MemoryStore, path: str, output: pathlib.Path | None, json_output: bool) -> None:
    data = store.read_bytes(path) or b""
    if output is not None:
        output.write_bytes(data)
    if json_output:
        where = str(output) if output is not None else None
        _render.emit_json({"path": path, "sha256": store.current_sha(path), "bytes": len(data), "output": where})
    elif output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        _render.show(None, f"wrote {output} ({_render.human_size(len(data))})")


@memory.command("meta")
@click.argument("path")
@store_options
@json_option
def meta(path: str, target: Target, json_output: bool) -> None:
    """The metadata of the file at PATH: sha256, size, last actor, time, reason, versions kept, and the
    metadata it was written with (`metadata.KEY` rows)."""
    store = open_store(target)
    _require_file(store, path)
    found: MemoryMeta | None = store.get_meta(path)
    fields = _render.plain(found) if found is not None else _meta_of(store, path)
    fields["versions"] = len(store.list_versions(path))
    if json_output:
        _render.emit_json(fields)
        return
    metadata = fields.pop("metadata", None) or {}
    rows = [
        *fields.items(),
        *((f"metadata.{k}", json.dumps(v, ensure_ascii=False)) for k, v in sorted(metadata.items())),
    ]
    _render.show(path, _render.table(("field", "value"), rows))


def _require_file(store: MemoryStore, path: str) -> None:
    if not store.current_sha(path):
        raise not_found(f"no file {path!r} in the store at {store.remote_path}")


@memory.command("keys")
@click.argument("prefix", default="")
@namespace_options
@json_option
def keys(prefix: str, target: Target, json_output: bool) -> None:
    """The keys of the stores in one org/project/domain namespace, starting with PREFIX."""
    found = list_keys(target, prefix)
    if json_output:
        _render.emit_json(found)
        return
    _render.show(None, _render.table(("key",), ([k] for k in found)), _render.count(len(found), "store"))
