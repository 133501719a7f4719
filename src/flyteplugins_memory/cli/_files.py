"""Verbs about a store's files and about which stores exist: ``ls``, ``cat``, ``meta``, ``keys``."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import rich_click as click

from . import _render
from ._app import json_option, memory, namespace_options, store_options
from ._target import Target, list_keys, not_found, open_store
from ._where import where_option

if TYPE_CHECKING:
    from flyteplugins_memory import MemoryMeta, MemoryStore


@memory.command("ls")
@click.argument("prefix", default="")
@store_options
@where_option
@json_option
def ls(prefix: str, target: Target, where: dict[str, Any], json_output: bool) -> None:
    """The store's files under PREFIX as a tree, with sizes, last actor and time (and metadata, if any)."""
    store = open_store(target)
    metas = [_meta_of(store, path) for path in store.list_paths(prefix, where=where)]
    if json_output:
        _render.emit_json({"uri": store.remote_path, "messages": len(store.messages), "files": metas})
        return
    total = sum(meta["bytes"] or 0 for meta in metas)
    caption = f"{len(metas)} files, {_render.human_size(total)}; {len(store.messages)} messages in the transcript"
    labelled = any(meta.get("metadata") for meta in metas)  # the column only where it says something
    rows = [_tree_row(meta, indent, labelled) if meta else (indent,) for indent, meta in _tree(metas)]
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
@store_options
@json_option
def cat(path: str, target: Target, json_output: bool) -> None:
    """Print the content of the file at PATH (as it is when piped; control characters escaped on a terminal)."""
    store = open_store(target)
    _require_file(store, path)
    text = store.read_text(path)
    if json_output:
        _render.emit_json({"path": path, "sha256": store.current_sha(path), "content": text})
        return
    # byte-exact into a pipe or file; a terminal would run the escape sequences an agent wrote
    sys.stdout.write(_render.printable(text) if sys.stdout.isatty() else text)


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
    _render.show(None, _render.table(("key",), ([k] for k in found)), f"{len(found)} stores")
