"""What gc() costs under a retention policy, after a short and a long history, on one counting moto S3 server.

A store written with ``keep_versions=True`` and ``set_retention(keep_last=2)``: `--commits` one-file commits
(1 KiB files, 10 paths rewritten in turn), then ``gc(window=timedelta(0), dry_run=True)`` and ``gc(...)``
(which removes nearly the whole history: journal objects and ``versions/`` snapshots), then 50 more commits
and gc again. The baseline is the same store after the short history: the second gc's requests follow
what it removes (about 50 commits' worth), not the commits before it.

Run: python benchmarks/gc_bench.py [--commits 100,10000] [--out FILE]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
import uuid
from datetime import timedelta

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sync_bench import CountingServer, measured, setup

MORE = 50


def commit(store: object, i: int, tag: str) -> None:
    store.write_text(f"files/{i % 10}.txt", f"{tag} {i:08d}" + "x" * 1000)  # type: ignore[attr-defined]
    store.save()  # type: ignore[attr-defined]


def bench(server: CountingServer, commits: int) -> list[tuple[int, str, object, object]]:
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.create(key=f"gc-{uuid.uuid4().hex[:8]}", keep_versions=True)
    store.set_retention(keep_last=2)
    for i in range(commits):
        commit(store, i, "first")
    dry, planned = measured(server, lambda: store.gc(window=timedelta(0), dry_run=True))
    first, removed = measured(server, lambda: store.gc(window=timedelta(0)))
    for i in range(MORE):
        commit(store, i, "again")
    again, second = measured(server, lambda: store.gc(window=timedelta(0)))
    return [
        (commits, "dry run", dry, planned),
        (commits, "first gc", first, removed),
        (commits, f"after {MORE} more commits", again, second),
    ]


def report(rows: list) -> str:
    lines = [
        (
            "`gc(window=timedelta(0))` with `set_retention(keep_last=2)` and `keep_versions=True`, after N one-file "
            "commits (1 KiB files, 10 paths rewritten in turn):"
        ),
        "",
        "| commits | run | requests | bytes moved | objects removed | of which snapshots | time |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for commits, run, m, result in rows:
        lines.append(
            f"| {commits:,} | {run} | {m.requests:,} | {m.bytes / 1024:,.0f} KiB | {result.objects:,} | "
            f"{result.versions:,} | {m.seconds * 1000:,.0f} ms |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", default="100,10000")
    parser.add_argument("--out")
    args = parser.parse_args()
    server = CountingServer()
    try:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        import s3fs

        s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
        setup(server.endpoint, bucket)
        started = time.time()
        rows = [row for n in args.commits.split(",") for row in bench(server, int(n))]
        table = report(rows)
        print(table)
        print(f"({time.time() - started:.0f} s)", file=sys.stderr)
        if args.out:
            pathlib.Path(args.out).write_text(table)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
