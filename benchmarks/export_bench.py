"""Export and import of a whole store beside copying the same objects with fsspec directly.

One store of N files of 1 KiB (one save, then a second save changing a tenth of them, so the journal
holds history), on local disk and on the counting moto S3 server of `sync_bench`:

- ours: ``store.export(archive)`` (the archive on the same backend) then
  ``MemoryStore.import_store(archive, key=...)`` (seconds; requests and bytes on S3, counted by the server);
- fsspec: the same objects (the store prefix and its journal) copied with ``fs.get`` to a local directory
  and ``fs.put`` from it to a new prefix: the least a copy of the store between two places costs.

The target (issue 12) is ours within 2x of the fsspec copy. Medians of `--repeats` runs.

Run: python benchmarks/export_bench.py [--files 1000] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sync_bench import PAYLOAD, CountingServer, setup


def populate(key: str, files: int) -> Any:
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.create(key=key)
    for i in range(files):
        store.write_text(f"files/{i:05d}.txt", PAYLOAD)
    store.append({"role": "user", "content": "hello"})
    store.save()
    for i in range(0, files, 10):
        store.write_text(f"files/{i:05d}.txt", PAYLOAD[::-1])
    store.save()
    return store


def timed(server: CountingServer | None, action: Callable[[], object]) -> tuple[float, int, int]:
    if server is not None:
        server.reset()
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    counts = server.counts() if server is not None else {"requests": 0, "bytes": 0}
    return seconds, counts["requests"], counts["bytes"]


def bench(backend: str, files: int, repeats: int, server: CountingServer | None, root: str) -> dict:
    from flyteplugins_memory import MemoryStore
    from flyteplugins_memory._journal.journal_storage import JournalStorage

    key = f"src-{uuid.uuid4().hex[:6]}"
    store = populate(key, files)
    remote = JournalStorage.at(store.remote_path)
    fs = remote.store.fs
    ours, theirs = [], []
    for _ in range(repeats):
        archive = f"{root}/archives/{uuid.uuid4().hex[:8]}.tar.gz"
        exported = timed(server, lambda: store.export(archive))  # noqa: B023 - called at once
        copy = f"copy-{uuid.uuid4().hex[:6]}"
        imported = timed(server, lambda: MemoryStore.import_store(archive, key=copy))  # noqa: B023
        ours.append((exported, imported, fs.size(archive)))
        theirs.append(fsspec_copy(server, fs, remote))
    return {"backend": backend, "objects": len(remote_objects(fs, remote)), "ours": ours, "fsspec": theirs}


def remote_objects(fs: Any, remote: Any) -> list[str]:
    return [*fs.find(remote.prefix), *fs.find(remote.journal_root)]


def fsspec_copy(server: CountingServer | None, fs: Any, remote: Any) -> tuple[tuple, tuple]:
    """``fs.get`` of the prefix and the journal into a temp dir, ``fs.put`` of both to a new prefix."""
    with tempfile.TemporaryDirectory() as local:
        target = f"{remote.prefix.rsplit('/', 1)[0]}/fsspec-{uuid.uuid4().hex[:6]}"

        def get() -> None:
            fs.get(remote.prefix + "/", f"{local}/store/", recursive=True)
            fs.get(remote.journal_root + "/", f"{local}/journal/", recursive=True)

        def put() -> None:
            fs.put(f"{local}/store/", target + "/", recursive=True)
            fs.put(f"{local}/journal/", target + "-journal/", recursive=True)

        return timed(server, get), timed(server, put)


def row(result: dict) -> str:
    ours = [e[0] + i[0] for e, i, _ in result["ours"]]
    theirs = [g[0] + p[0] for g, p in result["fsspec"]]
    export = statistics.median(e[0] for e, _, _ in result["ours"])
    imp = statistics.median(i[0] for _, i, _ in result["ours"])
    get = statistics.median(g[0] for g, _ in result["fsspec"])
    put = statistics.median(p[0] for _, p in result["fsspec"])
    e, i, size = result["ours"][-1]
    g, p = result["fsspec"][-1]
    requests = f"{e[1] + i[1]:,} / {g[1] + p[1]:,}" if e[1] else "-"
    ratio = statistics.median(ours) / statistics.median(theirs)
    return (
        f"| {result['backend']} | {result['objects']:,} | {export:.2f} | {imp:.2f} | {get:.2f} | {put:.2f} | "
        f"{statistics.median(ours):.2f} / {statistics.median(theirs):.2f} | **{ratio:.2f}x** | {requests} | "
        f"{size / 1024:.0f} KiB |"
    )


def report(results: list[dict], args: Any) -> str:
    lines = [
        (
            f"Export + import of a {args.files:,}-file store (1 KiB files, two saves) vs fsspec get + put of the "
            f"same objects; median of {args.repeats} runs, seconds."
        ),
        "",
        (
            "| backend | objects | export | import | fs.get | fs.put | ours / fsspec total | ratio | requests "
            "ours / fsspec | archive |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[row(r) for r in results],
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import flyte
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        flyte.init(org="bench", project="export", domain="development")
        with internal_ctx().new_raw_data_path(RawDataPath(path=f"{tmp}/raw")):
            results.append(bench("local disk", args.files, args.repeats, None, tmp))
    server = CountingServer()
    try:
        import s3fs

        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
        setup(server.endpoint, bucket)
        results.append(bench("S3 (moto)", args.files, args.repeats, server, f"s3://{bucket}"))
    finally:
        server.stop()
    table = report(results, args)
    print(table)
    if args.out:
        with open(args.out, "w") as out:
            out.write(table + "\n")


if __name__ == "__main__":
    main()
