"""What opening, listing and the first save after a bulk save cost (issue 23), ours only, on the counting
moto S3 server of `sync_bench`: for stores of each size written by one bulk save (1 KiB files), a fresh
open, a full `list_paths()` on it, the first one-file save of the handle that did the bulk save, and the
first one-file save of a fresh handle (on a second store of the same size). Request and byte counts are
exact; times are single runs.

Run: python benchmarks/costs_bench.py [--sizes 1000,10000] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from sync_bench import PAYLOAD, CountingServer, Measure, measured, setup


def bulk_saved(files: int):
    from flyteplugins_memory import MemoryStore

    key = f"c-{uuid.uuid4().hex[:8]}"
    store = MemoryStore.get_or_create(key=key)
    for i in range(files):
        store.write_text(f"files/{i:05d}.txt", PAYLOAD)
    store.append({"role": "user", "content": "hello"})
    store.save()
    return key, store


def bench(server: CountingServer, files: int) -> dict[str, Measure]:
    from flyteplugins_memory import MemoryStore

    out: dict[str, Measure] = {}
    key, store = bulk_saved(files)
    out["open (fresh handle)"], fresh = measured(server, lambda: MemoryStore.get_or_create(key=key))
    out["list_paths() after it"], paths = measured(server, fresh.list_paths)
    assert len(paths) == files
    store.write_text("files/00007.txt", PAYLOAD[:-7] + "changed")
    out["first one-file save after the bulk save, same handle"], _ = measured(server, store.save)

    key, _ = bulk_saved(files)
    handle = MemoryStore.get_or_create(key=key)
    handle.write_text("files/00007.txt", PAYLOAD[:-7] + "changed")  # loads the part holding the path
    out["first one-file save after the bulk save, fresh handle"], _ = measured(server, handle.save)
    return out


def _kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB" if n >= 1024 else f"{n} B"


def table(results: dict[int, dict[str, Measure]]) -> str:
    lines = [
        (
            f"Ours on a counting moto S3 server, 1 KiB files written by one bulk save, single runs, "
            f"{time.strftime('%Y-%m-%d')}."
        ),
        "",
        "| files | operation | requests | bytes | time |",
        "| ---: | --- | ---: | ---: | ---: |",
    ]
    for files, measures in results.items():
        for name, m in measures.items():
            lines.append(f"| {files:,} | {name} | {m.requests} | {_kib(m.bytes)} | {m.seconds * 1000:,.1f} ms |")
        opened, listed = measures["open (fresh handle)"], measures["list_paths() after it"]
        lines.append(
            f"| {files:,} | open + full listing | {opened.requests + listed.requests} "
            f"| {_kib(opened.bytes + listed.bytes)} | {(opened.seconds + listed.seconds) * 1000:,.1f} ms |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    server = CountingServer()
    try:
        import s3fs

        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
        setup(server.endpoint, bucket)
        results = {}
        for files in [int(s) for s in args.sizes.split(",")]:
            results[files] = bench(server, files)
            print(f"done: {files} files", file=sys.stderr)
    finally:
        server.stop()
    text = table(results)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
