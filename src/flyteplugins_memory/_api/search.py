"""Search: `MemoryStore.search`, BM25 over the store's text and JSON files (and, if asked, the transcript).

It searches what the handle sees, as `read_text` does: the committed files of its base, with its unsaved
writes and deletes over them. The index is persisted with the store and updated by each save
(`_rules.search_index`, `_journal.search_segments`), so a fresh handle searches without reading the files; the handle
keeps it in memory (`_handle.search_cache`). With ``include_transcript=True`` the messages of ``store.messages``
are searched too, each as the hit path ``messages.json#<index>`` (its position in the transcript), with
no `meta`. An optional `embed` callable re-ranks with embeddings (reciprocal-rank fusion of BM25 and
cosine similarity); nothing here downloads or runs a model of its own.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._base.syncify import syncify
from .._handle.working_copy import WorkingCopy
from .._journal import gc as _gc
from .._rules.admission import Access
from .._rules.arguments import check_flag, check_int
from .._rules.codecs import MemoryMeta
from .._rules.index import inside, range_under
from .._rules.metadata import Scalar, check_where, matches
from .._rules.paths import MESSAGES_PATH
from .._rules.search_forms import DamagedSegment
from .._rules.search_index import Hit, Updates
from .._rules.search_text import Doc, make_doc, searchable_text, snippet
from .._rules.search_text import terms as stemmed_terms
from .._rules.state import State
from ..errors import InvalidArgument
from .core import StoreCore

__all__ = ["Embed", "SearchAPI", "SearchHit"]

#: A caller's embedding function: texts to one vector each (sync or async).
Embed = Callable[[list[str]], Sequence[Sequence[float]] | Awaitable[Sequence[Sequence[float]]]]
#: With `embed`, this many BM25 candidates (at least) are re-ranked.
EMBED_POOL = 50
#: Reciprocal-rank fusion's constant (Cormack et al. 2009).
RRF_K = 60
#: The longest query accepted, in characters.
MAX_QUERY = 4096


@dataclass(frozen=True)
class SearchHit:
    """One search result: the file's path (``messages.json#<i>`` for a message), its score (higher is
    better), a one-line snippet around the first query term it holds, and what `get_meta` gives for it
    (None for a message)."""

    path: str
    score: float
    snippet: str
    meta: MemoryMeta | None


class SearchAPI(StoreCore):
    """Search over the files (and, optionally, the transcript)."""

    @syncify
    async def search(
        self,
        query: str,
        prefix: str = "",
        limit: int = 10,
        where: Mapping[str, Scalar] | None = None,
        *,
        include_transcript: bool = False,
        embed: Embed | None = None,
    ) -> list[SearchHit]:
        """The `limit` files under directory `prefix` that best match `query` (BM25 over words,
        case-insensitive, stemmed in the search language: "flight" finds "flights"; see
        ``FLYTE_MEMORY_SEARCH_LANGUAGE`` in docs/guide/search.md), best first; with `where`, only files
        whose metadata holds every pair exactly (as `list_paths`). Binary files never match. Unsaved
        writes of this handle are searched as they stand. `include_transcript` adds the messages of
        ``store.messages`` (hit paths ``messages.json#<index>``; not with `prefix` or `where`:
        `InvalidArgument`); `embed` (texts to vectors; async, or sync and run in a thread) adds hybrid
        ranking."""
        terms = stemmed_terms(_check_query(query))  # stems in the search language, as the index's (0167)
        rel = self._admission.admit(prefix, Access.LIST)
        count, wanted = check_int("limit", limit, minimum=1), check_where(where)
        check_flag("include_transcript", include_transcript)
        if include_transcript and (rel or wanted):  # messages have no path under a prefix and no metadata
            raise InvalidArgument("include_transcript searches the whole transcript: give no prefix and no where")
        if embed is not None and not callable(embed):
            raise InvalidArgument(f"embed must be a callable or None, got {embed!r}")
        lo, hi = range_under(rel)
        accept = lambda path, doc: _accepted(path, doc, lo, hi, wanted)  # noqa: E731
        pool = max(count, EMBED_POOL) if embed is not None else count
        while True:  # again only after a segment turned out malformed: each time one segment fewer
            corpus, shadow = await self._checkout.searching(self)
            searched = self._checkout.working_copy.base  # no await since: the base the corpus is of
            if include_transcript:
                shadow = {**shadow, **_transcript_docs(self.messages)}
            try:
                hits = corpus.search(terms, shadow, accept, pool)
                extra = _fill(corpus.paths(), shadow, hits, accept, corpus, pool) if embed is not None else []
                break
            except DamagedSegment as damage:  # its files are read instead (docs/decisions/0161)
                self._checkout.search.unreadable(damage)
        if embed is not None:
            hits = await _fused(embed, query, hits, extra)
        now = _gc.clock()
        hits = await self._checkout.look(
            self, lambda view: _live(view, hits, searched, now), paths=_looked_up(hits, searched, now)
        )
        return [_hit(path, score, doc, terms) for path, score, doc in hits[:count]]


def _looked_up(hits: list[Hit], searched: State, now: float) -> list[str]:
    """The hits whose liveness `_live` asks the file index (whose parts it must load first)."""
    return [path for path, _, doc in hits if _known(path, doc, searched, now) is None]


def _live(view: WorkingCopy, hits: list[Hit], searched: State, now: float) -> list[Hit]:
    """`hits` without files whose ttl ran out since the index was written (see `_rules.ttl`). A doc that
    knows its file's expiry answers for the base it was searched in; others (a segment written before
    expiries were indexed, a base refreshed meanwhile) are looked up in the file index."""
    out = []
    for path, score, doc in hits:
        known = _known(path, doc, searched, now) if view.base is searched else None
        if known if known is not None else view.entry(path) is not None:
            out.append((path, score, doc))
    return out


def _known(path: str, doc: Doc, searched: State, now: float) -> bool | None:
    """Whether hit `path` is live, as its doc knows (None: it does not)."""
    if path.startswith(MESSAGES_PATH + "#"):
        return True
    if not doc.expiry_known:
        return None
    return doc.expires is None or doc.expires > now


def _check_query(query: object) -> str:
    if not isinstance(query, str):
        raise InvalidArgument(f"query must be a str, got {type(query).__name__}")
    if len(query) > MAX_QUERY:
        raise InvalidArgument(f"query is {len(query)} characters long; at most {MAX_QUERY} are allowed")
    return query


def _accepted(path: str, doc: Doc, lo: str, hi: str | None, where: Mapping[str, Scalar]) -> bool:
    if path.startswith(MESSAGES_PATH + "#"):
        return True  # only offered when neither a prefix nor a filter is given
    return (not lo or inside(path, lo, hi)) and matches(doc.metadata, where)


def _transcript_docs(messages: list[dict[str, Any]]) -> Updates:
    """A doc for each message: its content (a str, or the keys and values of structured content)."""
    out: Updates = {}
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        text = content if isinstance(content, str) else searchable_text(json.dumps(content, default=str).encode())
        out[f"{MESSAGES_PATH}#{i}"] = make_doc("", (text or "").encode("utf-8"), ("", "", "", 0), {})
    return out


def _hit(path: str, score: float, doc: Doc, terms: list[str]) -> SearchHit:
    updated_at, updated_by, reason, size = doc.meta
    meta = None
    if not path.startswith(MESSAGES_PATH + "#"):
        meta = MemoryMeta(path, doc.sha256, updated_at, updated_by, reason, size, dict(doc.metadata))
    return SearchHit(path, score, snippet(doc.lead, terms), meta)


def _fill(paths: Any, shadow: Updates, hits: list[Hit], accept: Any, corpus: Any, pool: int) -> list[Hit]:
    """Docs that BM25 did not rank, up to `pool` candidates in all, so that a meaning-only match in a
    small store can still surface (scored 0 by BM25)."""
    seen = {p for p, _, _ in hits}
    extra: list[Hit] = []
    for path in sorted({*paths, *shadow}):
        if len(hits) + len(extra) >= pool:
            break
        doc = shadow[path] if path in shadow else corpus.doc(path)
        if path not in seen and doc is not None and doc.length and accept(path, doc):
            extra.append((path, 0.0, doc))
    return extra


async def _fused(embed: Embed, query: str, ranked: list[Hit], extra: list[Hit]) -> list[Hit]:
    """`ranked` (BM25 order) and `extra` re-ranked by reciprocal-rank fusion with cosine similarity."""
    candidates = ranked + extra
    if not candidates:
        return []
    vectors = await _embedded(embed, [query] + [doc.lead for _, _, doc in candidates])
    similarity = [_cosine(vectors[0], v) for v in vectors[1:]]
    by_meaning = sorted(range(len(candidates)), key=lambda i: -similarity[i])
    fused = {i: 1.0 / (RRF_K + 1 + i) if i < len(ranked) else 0.0 for i in range(len(candidates))}
    for rank, i in enumerate(by_meaning):
        fused[i] += 1.0 / (RRF_K + 1 + rank)
    order = sorted(fused, key=lambda i: (-fused[i], candidates[i][0]))
    return [(candidates[i][0], fused[i], candidates[i][2]) for i in order]


async def _embedded(embed: Embed, texts: list[str]) -> list[list[float]]:
    """The caller's vectors for `texts`, checked: one per text, all of one non-zero length, finite
    numbers (a NaN or an infinity would make every similarity NaN and the order arbitrary, silently)."""
    if inspect.iscoroutinefunction(embed):
        result = await embed(texts)
    else:  # in a thread, as `summarize`: it may block on a model, or use a store's sync API (not on the loop)
        result = await asyncio.to_thread(embed, texts)
    if inspect.isawaitable(result):
        result = await result
    try:
        vectors = [[float(x) for x in _vector(v)] for v in result]  # type: ignore[union-attr]
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"embed must return a list of vectors of numbers: {exc}") from exc
    if not all(math.isfinite(x) for v in vectors for x in v):
        raise InvalidArgument("embed must return vectors of finite numbers (no NaN or infinity)")
    if len(vectors) != len(texts) or len({len(v) for v in vectors}) != 1 or not vectors[0]:
        raise InvalidArgument(f"embed must return {len(texts)} vectors of one non-zero length")
    return vectors


def _vector(v: object) -> object:
    if isinstance(v, str | bytes):  # iterable, but of characters: "12" is no vector (1.0, 2.0)
        raise TypeError(f"a vector is a sequence of numbers, got {type(v).__name__}")
    return v


def _cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0
