"""The ``write`` verb: put one file into a store from a shell (from ``--from FILE`` or stdin) and save, as
mem0's and OpenViking's command lines add a memory.

Content that is UTF-8 is written as text (searchable, readable by `cat`); anything else, or any content
with ``--bytes``, as bytes. ``--metadata KEY=VALUE`` takes values as ``--where`` does (a JSON scalar, else
a string); ``--ttl`` a duration as ``gc --window`` does. Like every verb, ``write`` never creates a store.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import rich_click as click

from . import _render
from ._app import actor_options, json_option, memory, store_options
from ._target import Target, open_store
from ._where import parse_pairs


@memory.command("write")
@click.argument("path")
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path),
    help="Read the content from FILE (default: stdin).",
)
@click.option("--bytes", "as_bytes", is_flag=True, help="Store the content as bytes even if it is UTF-8 text.")
@click.option(
    "--metadata",
    "metadata",
    multiple=True,
    callback=parse_pairs,
    metavar="KEY=VALUE",
    help="Metadata to store with the file (a JSON scalar, else a string); repeatable.",
)
@click.option("--ttl", help="Delete the file this long after the write, e.g. 90m, 24h, 7d (at the next gc).")
@actor_options
@store_options
@json_option
def write(
    path: str,
    source: pathlib.Path | None,
    as_bytes: bool,
    metadata: dict[str, Any],
    ttl: str | None,
    actor: str,
    reason: str,
    target: Target,
    json_output: bool,
) -> None:
    """Write the file at PATH from --from FILE or stdin, and save (one audited commit)."""
    from ._upkeep import parse_window

    if source is None and sys.stdin.isatty():
        raise click.UsageError("give the content with --from FILE, or pipe it in")
    data = source.read_bytes() if source is not None else sys.stdin.buffer.read()
    expiry = None if ttl is None else parse_window(ttl, option="--ttl")
    store = open_store(target)
    options: dict[str, Any] = {"actor": actor, "reason": reason, "metadata": metadata or None, "ttl": expiry}
    text = None if as_bytes else _utf8(data)
    meta = store.write_bytes(path, data, **options) if text is None else store.write_text(path, text, **options)
    store.save(actor=actor, reason=reason or f"write {path}")
    commit = store.log(1)[0].seq
    kind = "text" if text is not None else "bytes"
    if json_output:
        _render.emit_json({"path": path, "sha256": meta.sha256, "bytes": len(data), "kind": kind, "commit": commit})
        return
    _render.show(None, f"wrote {path} ({_render.human_size(len(data))} of {kind}; commit {commit})")


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
