"""What upstream readers pay for our bookkeeping, and what gc() costs, on one counting moto S3 server.

1. A ~200 KB file saved `--saves` times (one message each) by three writers: upstream's
   ``flyte.ai.agents.MemoryStore``, ours, and ours as it was before the journal moved out of the store
   prefix. Then upstream's own ``get_or_create`` opens each store: the requests and bytes it downloads.
2. gc(window=0) of stores with `--commits` one-file commits (1 KiB each): requests, bytes moved, objects
   removed, time; then 50 more commits and gc again, to show that its cost follows what it removes.

Run: python benchmarks/maintenance_bench.py [--saves 300] [--commits 100,1000] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
import time
import uuid
from datetime import timedelta

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sync_bench import CountingServer, measured, setup

BIG = 200_000


@contextlib.contextmanager
def journal_inside_prefix():
    """Ours before issue 8: the journal in ``meta/.journal/`` inside the store prefix."""
    from flyteplugins_memory._journal import journal_storage
    from flyteplugins_memory._rules.journal_location import old_journal_root

    saved = journal_storage.journal_root
    journal_storage.journal_root = old_journal_root
    try:
        yield
    finally:
        journal_storage.journal_root = saved


def write_history(impl: type, key: str, saves: int) -> None:
    store = impl.get_or_create(key=key)
    for i in range(saves):
        store.write_text("data/big.txt", f"save {i}\n" + "abcdefghij" * (BIG // 10), reason=f"save {i}")
        store.append({"role": "user", "content": f"turn {i}"})
        store.save()


def bench_upstream_open(server: CountingServer, saves: int) -> list[tuple[str, int, int, float]]:
    from flyte.ai.agents import MemoryStore as Upstream

    from flyteplugins_memory import MemoryStore as Ours

    rows = []
    writers = {
        "upstream": (Upstream, contextlib.nullcontext),
        "ours": (Ours, contextlib.nullcontext),
        "ours, journal inside the prefix (before issue 8)": (Ours, journal_inside_prefix),
    }
    for name, (impl, context) in writers.items():
        key = f"open-{uuid.uuid4().hex[:8]}"
        with context():
            write_history(impl, key, saves)
        opened, _ = measured(server, lambda k=key: Upstream.get_or_create(key=k))
        rows.append((name, opened.requests, opened.bytes, opened.seconds))
    return rows


def bench_gc(server: CountingServer, commits: int) -> list[tuple[str, int, object, object]]:
    from flyteplugins_memory import MemoryStore

    key = f"gc-{uuid.uuid4().hex[:8]}"
    store = MemoryStore.get_or_create(key=key)
    for i in range(commits):
        store.write_text(f"files/{i % 10}.txt", f"{i:08d}" + "x" * 1016)
        store.save()
    first, result = measured(server, lambda: store.gc(window=timedelta(0)))
    for i in range(50):
        store.write_text(f"files/{i % 10}.txt", f"again {i:08d}" + "y" * 1010)
        store.save()
    again, second = measured(server, lambda: store.gc(window=timedelta(0)))
    return [("first gc", commits, first, result), ("after 50 more commits", commits, again, second)]


def report(saves: int, opens: list, gcs: list) -> str:
    up = next(b for name, _, b, _ in opens if name == "upstream")
    intro = (
        f"Upstream's `get_or_create` opening a store in which a {BIG // 1000} KB file was saved {saves} times "
        "(one message per save), by writer:"
    )
    lines = [
        intro,
        "",
        "| written by | requests | bytes downloaded | vs upstream-written | time |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, requests, size, seconds in opens:
        lines.append(
            f"| {name} | {requests:,} | {size / 1024:,.0f} KiB | {size / up:.2f}x | {seconds * 1000:,.0f} ms |"
        )
    lines += [
        "",
        "`gc(window=timedelta(0))` of a store after N one-file commits (1 KiB files, 10 paths rewritten in turn):",
        "",
        "| commits | run | requests | bytes | objects removed | commits collected | time |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run, commits, m, result in gcs:
        lines.append(
            f"| {commits:,} | {run} | {m.requests:,} | {m.bytes / 1024:,.0f} KiB | {result.objects:,} | "
            f"{len(result.commits):,} | {m.seconds * 1000:,.0f} ms |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saves", type=int, default=300)
    parser.add_argument("--commits", default="100,1000")
    parser.add_argument("--out")
    args = parser.parse_args()
    server = CountingServer()
    try:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        import s3fs

        s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
        setup(server.endpoint, bucket)
        started = time.time()
        opens = bench_upstream_open(server, args.saves)
        gcs = [row for n in args.commits.split(",") for row in bench_gc(server, int(n))]
        table = report(args.saves, opens, gcs)
        print(table)
        print(f"({time.time() - started:.0f} s)", file=sys.stderr)
        if args.out:
            pathlib.Path(args.out).write_text(table)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
