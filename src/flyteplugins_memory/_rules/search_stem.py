"""Pure: the stemmer search runs its words through (docs/decisions/0167-search-stems-words-english-by-default.md).

``search("flight")`` finds "flights": documents and queries are indexed by their words' Snowball stems
(PyStemmer, the Snowball project's C build of its algorithms). The language is the process's, read from
``FLYTE_MEMORY_SEARCH_LANGUAGE`` (default ``english``; ``none`` turns stemming off): saves index in it and
searches ask in it. A segment records the language it was stemmed in (decision 0168), so a store written in
another language is searched right too: its segments are read as unreadable and its files indexed again.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidArgument

#: The environment variable that names the language words are stemmed in.
LANGUAGE_ENV = "FLYTE_MEMORY_SEARCH_LANGUAGE"
#: The language when the variable is unset.
DEFAULT_LANGUAGE = "english"
#: The value that turns stemming off (words are indexed as they are folded, as releases before 0167 did).
NO_STEMMING = "none"


@functools.cache
def languages() -> frozenset[str]:
    """The languages a store can be searched in: Snowball's algorithms and `NO_STEMMING`."""
    import Stemmer  # type: ignore[import-untyped]  # on first use: a CLI's --help never loads it

    return frozenset(Stemmer.algorithms()) | {NO_STEMMING}


def search_language() -> str:
    """The language of this process's searches and saves (`LANGUAGE_ENV`, else `DEFAULT_LANGUAGE`);
    `InvalidArgument` naming the choices for one Snowball does not know."""
    name = os.environ.get(LANGUAGE_ENV, "").strip().lower() or DEFAULT_LANGUAGE
    if name not in languages():
        choices = ", ".join(sorted(languages()))
        raise InvalidArgument(f"{LANGUAGE_ENV}={name!r} is not a search language; one of: {choices}")
    return name


#: Stems kept per language (then the cache starts over): a store's vocabulary repeats across its files.
CACHED_STEMS = 200_000


@functools.cache
def _stemmer(language: str) -> tuple[Any, threading.Lock, dict[str, str]]:
    """The language's stemmer, the lock it is called under (a PyStemmer stemmer has state: one thread at a
    time; saves stem off the event loop), without PyStemmer's own cache (measured: past its 10,000 words it
    spends more time evicting than stemming), and ours: a dict, read without the lock."""
    import Stemmer  # type: ignore[import-untyped]  # PyStemmer ships no type hints

    return Stemmer.Stemmer(language, 0), threading.Lock(), {}


def stems(words: Iterable[str], language: str) -> list[str]:
    """Each of `words` (folded tokens) as its stem in `language` (unchanged under `NO_STEMMING`)."""
    listed = list(words)
    if language == NO_STEMMING:
        return listed
    stemmer, lock, cache = _stemmer(language)
    try:
        return [cache[word] for word in listed]  # most words of a store were stemmed before
    except KeyError:
        pass
    out = [cache.get(word) for word in listed]
    missing = [word for word, stem in zip(listed, out, strict=True) if stem is None]
    if not missing:
        return out  # type: ignore[return-value]  # every stem was cached
    with lock:
        new = dict(zip(missing, stemmer.stemWords(missing), strict=True))
    if len(cache) + len(new) > CACHED_STEMS:
        cache.clear()
    cache.update(new)
    return [stem if stem is not None else new[word] for word, stem in zip(listed, out, strict=True)]


def stem_counts(counts: Mapping[str, int], language: str) -> dict[str, int]:
    """Token counts as counts of their stems (the stem of a token is a function of it alone: counts of
    unstemmed tokens give exactly the counts stemming them first would have given)."""
    if language == NO_STEMMING:
        return dict(counts)
    out: dict[str, int] = {}
    for stem, count in zip(stems(counts, language), counts.values(), strict=True):
        out[stem] = out.get(stem, 0) + count
    return out
