"""Search over N entries of about 1 KiB: ours (persisted index) beside a naive scan and upstream.

On local disk and on the counting moto S3 server of `sync_bench`, for one store of N text files (words
drawn from a fixed vocabulary, seeded, so every run holds the same store):

- ours, cold: a fresh ``get_or_create`` and the first ``search`` (ms; storage requests of the search,
  i.e. beyond the open's own);
- ours, warm: the next searches on that handle (median ms);
- ours, index bytes per one-file save: what `S` one-file saves (each on a fresh handle) write for the
  index, amortized: the ``ext["search"]`` each commit record carries plus search segments uploaded;
- naive scan: a fresh open, ``list_paths()``, read every file, score them with the same BM25;
- upstream: ``flyte.ai.agents.MemoryStore.get_or_create`` + ``list_paths()`` + ``read_text`` of every
  file (it has no search: that is the least it must do to answer one).

Requests are the object operations each side asks of storage: ours counted at our storage seam
(`JournalStorage`), upstream's (and ours, on S3) by the server.

- the local reference: SQLite FTS5 over the same documents in an in-memory table (build, first and later
  queries, `bm25()` ranking) beside our index's segment in memory (encode, parse + first search, later
  searches).

Run: python benchmarks/search_bench.py [--entries 10000] [--saves 20] [--reference-only] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sync_bench import CountingServer, setup

QUERIES = ["w17 w404", "w3 w999 w1234", "w42", "w2500 w7", "w88 w89 w90"]


def corpus(entries: int) -> dict[str, str]:
    """`entries` files of about 1 KiB, words from a Zipf-like vocabulary (seeded)."""
    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(5000)]
    weights = [1.0 / (i + 1) for i in range(len(vocabulary))]
    files = {}
    for i in range(entries):
        words = rng.choices(vocabulary, weights, k=180)
        files[f"notes/{i // 100:03d}/{i:05d}.md"] = " ".join(words)[:1024]
    return files


class SeamCounter:
    """Counts object operations and bytes written at `JournalStorage` (names written kept, for index bytes)."""

    def __init__(self) -> None:
        from flyteplugins_memory._journal.journal_storage import JournalStorage

        self.requests = 0
        self.written: list[tuple[str, int]] = []
        originals = {m: getattr(JournalStorage, m) for m in ("read", "read_many", "write_many", "create_exclusive")}
        counter = self

        def wrap(method: str, names: Callable[..., list[tuple[str, int]]]) -> None:
            original = originals[method]

            async def counted(store: Any, *args: Any, **kwargs: Any) -> Any:
                found = names(*args, **kwargs)
                counter.requests += len(found)
                if method in ("write_many", "create_exclusive"):
                    counter.written += found
                return await original(store, *args, **kwargs)

            setattr(JournalStorage, method, counted)

        wrap("read", lambda name: [(name, 0)])
        wrap("read_many", lambda names: [(n, 0) for n in names])
        wrap("write_many", lambda objects: [(n, len(d)) for n, d in objects.items()])
        wrap("create_exclusive", lambda name, data: [(name, len(data))])

    def reset(self) -> None:
        self.requests, self.written = 0, []


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return (time.perf_counter() - start) * 1000, result


def seed(impl: type, key: str, files: dict[str, str]) -> None:
    store = impl.get_or_create(key=key)
    for path, text in files.items():
        store.write_text(path, text)
    store.save()


def index_bytes(written: list[tuple[str, int]], records: list[bytes]) -> int:
    """Bytes a save wrote for the index: search segments, and the ``ext["search"]`` of its record."""
    segments = sum(size for name, size in written if "/search/" in name)
    return segments + sum(len(json.dumps(json.loads(r).get("ext", {}).get("search", ""))) for r in records)


def ours(counter: SeamCounter, key: str, saves: int) -> dict:
    from flyteplugins_memory import MemoryStore

    counter.reset()
    open_ms, store = timed(lambda: MemoryStore.get_or_create(key=key))
    open_requests = counter.requests
    counter.reset()
    search_ms, hits = timed(lambda: store.search(QUERIES[0]))
    cold_ms, cold_requests = open_ms + search_ms, counter.requests
    assert hits, "the benchmark's query must match"
    warm = [timed(lambda q=q: store.search(q))[0] for q in QUERIES * 4]
    per_save = []
    for i in range(saves):
        handle = MemoryStore.get_or_create(key=key)
        handle.write_text(f"notes/new/{i:04d}.md", f"one new note w17 w{i}")
        counter.reset()
        handle.save()
        records = [_record(handle, n) for n, _ in counter.written if "/log/" in n]
        per_save.append(index_bytes(counter.written, records))
    return {
        "cold_ms": cold_ms,
        "open_requests": open_requests,
        "cold_requests": cold_requests,
        "warm_ms": statistics.median(warm),
        "save_bytes": statistics.mean(per_save) if per_save else 0,
        "save_bytes_max": max(per_save, default=0),
    }


def _record(store: Any, name: str) -> bytes:
    import asyncio

    from flyteplugins_memory._journal.journal_storage import JournalStorage

    return asyncio.run(JournalStorage.at(store.remote_path).read(name)) or b"{}"


def naive(counter: SeamCounter, key: str) -> dict:
    """Open, list, read every file, score with the same BM25 (an in-memory corpus of all docs)."""
    from flyteplugins_memory import MemoryStore
    from flyteplugins_memory._rules.search_index import Corpus
    from flyteplugins_memory._rules.search_text import make_doc, tokenize

    def scan() -> list:
        store = MemoryStore.get_or_create(key=key)
        paths = store.list_paths()
        store.prefetch()
        docs = {p: make_doc("", store.read_text(p).encode(), ("", "", "", 0), {}) for p in paths}
        return Corpus([], docs).search(tokenize(QUERIES[0]), {}, lambda p, d: True, 10)

    counter.reset()
    ms, hits = timed(scan)
    assert hits
    return {"ms": ms, "requests": counter.requests}


def fts_query(query: str) -> str:
    """A query of ours as FTS5's: any of its words (ours ranks docs holding any; FTS5's default is all)."""
    return " OR ".join(f'"{word}"' for word in query.split())


def reference(files: dict[str, str]) -> dict:
    """The local reference, in memory, no storage: SQLite FTS5 (bm25() ranking) beside our index over the
    same documents: build (tokenize every file, then FTS5's inserts or our segment's encoding), a first query
    on a fresh copy (ours: parse the segment's bytes, then search) and later queries (median)."""
    import sqlite3

    from flyteplugins_memory._rules.search_index import Corpus, decode_segment, encode_segment
    from flyteplugins_memory._rules.search_text import make_doc, tokenize

    def fts_build() -> sqlite3.Connection:
        db = sqlite3.connect(":memory:")
        db.execute("create virtual table docs using fts5(path unindexed, body)")
        db.executemany("insert into docs values (?, ?)", files.items())
        db.commit()
        return db

    def fts_search(db: sqlite3.Connection, query: str) -> list:
        sql = "select path, bm25(docs) from docs where docs match ? order by bm25(docs) limit 10"
        return db.execute(sql, (fts_query(query),)).fetchall()

    build_ms, db = timed(fts_build)
    first_ms, hits = timed(lambda: fts_search(db, QUERIES[0]))
    assert hits
    fts = {"build_ms": build_ms, "first_ms": first_ms}
    fts["warm_ms"] = statistics.median(timed(lambda q=q: fts_search(db, q))[0] for q in QUERIES * 4)
    pages = db.execute("pragma page_count").fetchone()[0] * db.execute("pragma page_size").fetchone()[0]
    fts["bytes"] = pages

    meta = ("", "", "", 0)
    build_ms, data = timed(
        lambda: encode_segment({p: make_doc("0" * 64, t.encode(), meta, {}) for p, t in files.items()}, "bench")
    )

    def first() -> tuple[Corpus, list]:
        corpus = Corpus([decode_segment(data)], {})
        return corpus, corpus.search(tokenize(QUERIES[0]), {}, lambda p, d: True, 10)

    first_ms, (corpus, hits) = timed(first)
    assert hits
    warm = [timed(lambda q=q: corpus.search(tokenize(q), {}, lambda p, d: True, 10))[0] for q in QUERIES * 4]
    ours = {"build_ms": build_ms, "first_ms": first_ms, "warm_ms": statistics.median(warm), "bytes": len(data)}
    return {"fts5": fts, "ours": ours}


def upstream(key: str) -> dict:
    from flyte.ai.agents import MemoryStore as Upstream

    def everything() -> int:
        store = Upstream.get_or_create(key=key)
        return sum(len(store.read_text(p) or "") for p in store.list_paths())

    ms, _ = timed(everything)
    return {"ms": ms}


def run_backend(name: str, server: CountingServer | None, files: dict[str, str], saves: int) -> dict:
    from flyte.ai.agents import MemoryStore as Upstream

    from flyteplugins_memory import MemoryStore

    key, upstream_key = f"search-{uuid.uuid4().hex[:8]}", f"up-{uuid.uuid4().hex[:8]}"
    counter = SeamCounter()
    seed(MemoryStore, key, files)
    seed(Upstream, upstream_key, files)
    print(f"{name}: seeded", file=sys.stderr)
    figures = {"naive": naive(counter, key), "upstream": upstream(upstream_key)}
    if server is not None:
        server.reset()
        figures["upstream"]["ms"] = timed(lambda: upstream(upstream_key))[0]
        figures["upstream"]["requests"] = server.counts()["requests"]
    else:
        figures["upstream"]["requests"] = len(files) * 2 + 2  # one read per object: files, sidecars, transcript
    figures["ours"] = ours(counter, key, saves)
    return figures


def setup_local(root: str) -> None:
    import flyte
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath

    flyte.init(org="bench", project="search", domain="development")
    internal_ctx().new_raw_data_path(RawDataPath(path=root)).__enter__()


def table(results: dict[str, dict], entries: int, saves: int) -> str:
    lines = [
        f"Search over {entries:,} entries of about 1 KiB (`benchmarks/search_bench.py`).",
        "",
        "| backend | what | time | storage requests (ours: open + search) |",
        "| --- | --- | ---: | ---: |",
    ]
    for backend, f in results.items():
        if backend == "in memory":
            continue
        o = f["ours"]
        naive, up = f["naive"], f["upstream"]
        lines += [
            (
                f"| {backend} | ours: cold open + first search | {o['cold_ms']:,.1f} ms "
                f"| {o['open_requests']} + {o['cold_requests']} |"
            ),
            f"| {backend} | ours: warm search (median) | {o['warm_ms']:,.2f} ms | 0 |",
            (
                f"| {backend} | naive scan: open + list + read every file + BM25 | {naive['ms']:,.0f} ms "
                f"| {naive['requests']:,} |"
            ),
            (
                f"| {backend} | upstream: open + list + read every file (cannot search) | {up['ms']:,.0f} ms "
                f"| {up['requests']:,} |"
            ),
        ]
    lines.append("")
    for backend, f in results.items():
        if backend == "in memory":
            continue
        o = f["ours"]
        lines.append(
            f"- {backend}: index bytes written per one-file save, over {saves} saves on fresh handles: "
            f"{o['save_bytes']:,.0f} B on average (at most {o['save_bytes_max']:,} B, a save whose segment "
            "merges with the newest ones)."
        )
    if "in memory" in results:
        lines += ["", *reference_table(results["in memory"], entries)]
    return "\n".join(lines)


def reference_table(figures: dict, entries: int) -> list[str]:
    lines = [
        (
            f"The local reference: the same {entries:,} documents in memory, no storage; SQLite "
            f"{sqlite_version()} FTS5 (`bm25()`, a query's words OR-ed as ours are) beside our index."
        ),
        "",
        "| engine | build | first query | later queries (median) | index bytes |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, label in (
        ("fts5", "SQLite FTS5, in-memory table"),
        ("ours", "ours: segment bytes, parsed at the first query"),
    ):
        f = figures[name]
        lines.append(
            f"| {label} | {f['build_ms']:,.0f} ms | {f['first_ms']:,.1f} ms | {f['warm_ms']:,.2f} ms | {f['bytes']:,} |"
        )
    return lines


def sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--reference-only", action="store_true", help="only the in-memory reference (FTS5 and ours)")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    files = corpus(args.entries)
    results: dict[str, dict] = {"in memory": reference(files)}
    if args.reference_only:
        print("\n".join(reference_table(results["in memory"], args.entries)))
        return
    # S3 first: the local context set-up below would otherwise replace the S3 configuration.
    if not args.no_s3:
        server = CountingServer()
        try:
            import s3fs

            bucket = f"bench-{uuid.uuid4().hex[:8]}"
            s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
            setup(server.endpoint, bucket)
            results["moto S3"] = run_backend("moto S3", server, files, args.saves)
        finally:
            server.stop()
    setup_local(os.path.join(tempfile.mkdtemp(), "raw_data", "bench"))
    results["local disk"] = run_backend("local disk", None, files, args.saves)
    text = table(dict(sorted(results.items())), args.entries, args.saves)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
