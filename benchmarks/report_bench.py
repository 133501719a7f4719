"""What `store.report()` costs on one counting moto S3 server: requests, bytes and time, from a fresh handle.

A store of N files (1 KiB of text each) written over 20 commits (each rewriting a tenth of the files and
appending two messages), then `report()` from a new handle, twice: with the issue 27 sections (contents of
the first 100 files, the newest 10 commits' diffs, proposals, logs) and without the two that read most
(contents and diffs off, through `_api.report.build.gather`'s `Limits`): what the page cost before them.

Run: python benchmarks/report_bench.py [--files 10,100,500] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sync_bench import CountingServer, measured, setup

COMMITS = 20


def build(files: int) -> str:
    from flyteplugins_memory import MemoryStore

    key = f"report-{uuid.uuid4().hex[:8]}"
    store = MemoryStore.create(key=key)
    for c in range(COMMITS):
        for i in range(files) if c == 0 else range(c % 10, files, 10):
            store.write_text(f"files/{i:05d}.md", f"commit {c} file {i}\n" + "x" * 1000, actor="bench")
        store.extend([{"role": "user", "content": f"turn {c}"}, {"role": "assistant", "content": "ok"}])
        store.save()
    return key


def page(key: str, full: bool) -> int:
    from flyteplugins_memory import MemoryStore
    from flyteplugins_memory._api.report.build import Limits, gather
    from flyteplugins_memory._api.report.html import render_document

    store = MemoryStore.get_or_create(key=key)
    if full:
        return len(store.report())
    limits = Limits(contents=0, diff_commits=0)

    async def lean() -> int:
        return len(render_document(await gather(store, limits)))

    return asyncio.run(lean())


def report(rows: list) -> str:
    lines = [
        (
            f"`store.report()` from a fresh handle, a store of N files (1 KiB each) written over {COMMITS} "
            "commits, on moto S3 (one process, loopback):"
        ),
        "",
        "| files | page | requests | bytes moved | page size | time |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for files, name, m, size in rows:
        lines.append(
            f"| {files:,} | {name} | {m.requests:,} | {m.bytes / 1024:,.0f} KiB | {size / 1024:,.0f} KiB | "
            f"{m.seconds * 1000:,.0f} ms |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", default="10,100,500")
    parser.add_argument("--out")
    args = parser.parse_args()
    server = CountingServer()
    try:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        import s3fs

        s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
        setup(server.endpoint, bucket)
        started, rows = time.time(), []
        for files in (int(n) for n in args.files.split(",")):
            key = build(files)
            for name, full in (("without contents and diffs", False), ("full (issue 27)", True)):
                m, size = measured(server, lambda key=key, full=full: page(key, full))
                rows.append((files, name, m, size))
        table = report(rows)
        print(table)
        print(f"({time.time() - started:.0f} s)", file=sys.stderr)
        if args.out:
            pathlib.Path(args.out).write_text(table)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
