"""The ``search`` verb: BM25 search over a store's files (`MemoryStore.search`), from a shell."""

from __future__ import annotations

from typing import Any

import rich_click as click

from . import _render
from ._app import json_option, memory, store_options
from ._target import Target, open_store
from ._where import where_option


@memory.command("search")
@click.argument("query")
@click.option("--prefix", default="", help="Only files under this directory.")
@click.option("--limit", default=10, show_default=True, type=int, help="At most this many hits.")
@click.option("--transcript", "include_transcript", is_flag=True, help="Search the transcript's messages too.")
@store_options
@where_option
@json_option
def search(
    query: str,
    prefix: str,
    limit: int,
    include_transcript: bool,
    target: Target,
    where: dict[str, Any],
    json_output: bool,
) -> None:
    """The files that best match QUERY (BM25 over their words), best first: path, score, a snippet."""
    store = open_store(target)
    hits = store.search(query, prefix, limit, where, include_transcript=include_transcript)
    if json_output:
        _render.emit_json({"uri": store.remote_path, "query": query, "hits": hits})
        return
    rows = [(h.path, f"{h.score:.3f}", _render.one_line(h.snippet)) for h in hits]
    _render.show(store.remote_path, _render.table(("path", "score", "snippet"), rows), _render.count(len(hits), "hit"))
