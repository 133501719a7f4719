"""Search quality on a small judged set: our BM25 with words as folded (releases before decision 0167), with
English stems (0167), and SQLite FTS5's BM25 with and without its porter stemmer, over the same notes.

The set is `search_relevance_set.json` beside this script: 65 short agent-memory notes and 20 queries whose
relevant notes were judged by reading them (2: highly relevant, 1: relevant). No public relevance set ships
in a pip package without downloading its data, so this one is ours; it leans on what stemming changes
(queries and notes that use different forms of a word) and keeps notes that share a word with a query but
are about something else. Every ranker sees the same text and answers with its 10 best notes; a query's
words are OR-ed for FTS5, as ours ranks any note holding any of them.

Metrics (means over the queries): MRR (reciprocal rank of the first relevant note), nDCG@10 (graded gains
2^rel - 1), P@5 and R@10. Deterministic: no timing.

Run: python benchmarks/search_relevance.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from flyteplugins_memory._rules.search_forms import decode_segment, encode_segment
from flyteplugins_memory._rules.search_index import Corpus
from flyteplugins_memory._rules.search_text import make_doc, terms, tokenize

SET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "search_relevance_set.json")
DEPTH = 10
Ranker = Callable[[str], list[str]]


def ours(docs: dict[str, str], language: str) -> Ranker:
    """Our index (one segment, as a save writes it) with words stemmed in `language` ("none": as folded)."""
    meta = ("", "", "", 0)
    made = {d: make_doc("0" * 64, text.encode(), meta, {}, None, language) for d, text in docs.items()}
    corpus = Corpus([decode_segment(encode_segment(dict(made), "bench", language))], {})

    def rank(query: str) -> list[str]:
        return [path for path, _, _ in corpus.search(terms(query, language), {}, lambda p, d: True, DEPTH)]

    return rank


def fts5(docs: dict[str, str], tokenizer: str) -> Ranker:
    """SQLite FTS5 (`bm25()`) with `tokenizer`, in memory."""
    db = sqlite3.connect(":memory:")
    db.execute(f"create virtual table notes using fts5(id unindexed, body, tokenize='{tokenizer}')")
    db.executemany("insert into notes values (?, ?)", docs.items())

    def rank(query: str) -> list[str]:
        match = " OR ".join(f'"{word}"' for word in tokenize(query))
        rows = db.execute("select id from notes where notes match ? order by bm25(notes) limit ?", (match, DEPTH))
        return [row[0] for row in rows]

    return rank


def scores(ranked: list[str], relevant: dict[str, int]) -> dict[str, float]:
    first = next((i for i, d in enumerate(ranked) if d in relevant), None)
    gains = [2 ** relevant.get(d, 0) - 1 for d in ranked[:DEPTH]]
    ideal = sorted((2**g - 1 for g in relevant.values()), reverse=True)[:DEPTH]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return {
        "MRR": 0.0 if first is None else 1.0 / (first + 1),
        "nDCG@10": dcg / idcg,
        "P@5": sum(d in relevant for d in ranked[:5]) / 5,
        "R@10": sum(d in relevant for d in ranked[:DEPTH]) / len(relevant),
    }


def evaluate() -> tuple[list[tuple[str, dict[str, float], int]], int, int]:
    with open(SET, encoding="utf-8") as file:
        data = json.load(file)
    docs, queries = data["docs"], data["queries"]
    rankers = [
        ("ours, words as folded (before 0167)", ours(docs, "none")),
        ("ours, English Snowball stems (0167)", ours(docs, "english")),
        ("SQLite FTS5, unicode61", fts5(docs, "unicode61")),
        ("SQLite FTS5, porter unicode61", fts5(docs, "porter unicode61")),
    ]
    rows = []
    for name, rank in rankers:
        per_query = [scores(rank(q["text"]), q["relevant"]) for q in queries.values()]
        means = {m: sum(s[m] for s in per_query) / len(per_query) for m in per_query[0]}
        misses = sum(1 for s in per_query if s["MRR"] == 0.0)
        rows.append((name, means, misses))
    return rows, len(docs), len(queries)


def table(rows: list[tuple[str, dict[str, float], int]], docs: int, queries: int) -> str:
    lines = [
        f"{docs} notes, {queries} queries (`benchmarks/search_relevance_set.json`), SQLite {sqlite3.sqlite_version}.",
        "",
        "| ranker | MRR | nDCG@10 | P@5 | R@10 | queries with no relevant note in the top 10 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m, misses in rows:
        lines.append(f"| {name} | {m['MRR']:.3f} | {m['nDCG@10']:.3f} | {m['P@5']:.3f} | {m['R@10']:.3f} | {misses} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    text = table(*evaluate())
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
