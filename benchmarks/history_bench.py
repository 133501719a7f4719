"""`history(path, limit=20)` on stores with 100 and 10,000 commits: ours beside upstream.

Ours: one handle makes N commits, every other one writing ``plan.md`` (the others write ``busy/*``), so
the path has N/2 versions in a long history. A fresh handle is opened, then ``history("plan.md", 20)``
is measured alone (requests and ms), and with ``read_version`` of the 20 versions it lists (what
upstream must do to see them, content included).

Upstream (``flyte.ai.agents.MemoryStore``, ``keep_versions=True``) keeps a path's history only as
``versions/`` snapshots, and has no call to list or read them: the least it does is open (which downloads
everything under the store prefix, snapshots included) and read the newest 20 snapshots from its root.
Its N/2 snapshots are written straight into its layout (what N/2 upstream saves of ``plan.md`` leave
there): N upstream saves would each rewrite the whole ``audit/log.jsonl``, hours at 10,000.

Requests: ours counted at our storage seam (`JournalStorage`), and on S3 by the counting moto server of
`sync_bench` (the figure shown); upstream's by the server on S3, and as the objects it reads on local
disk (every object under the prefix, one each).

Run: python benchmarks/history_bench.py [--commits 100,10000] [--limit 20] [--no-s3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from search_bench import SeamCounter, setup_local, timed
from sync_bench import CountingServer, setup

PATH = "plan.md"


def make_history(key: str, commits: int) -> None:
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.get_or_create(key=key)
    for i in range(commits):
        store.write_text(PATH if i % 2 else f"busy/{i % 10}.txt", f"version {i}\n" * 20)
        store.save()


def upstream_store(key: str, versions: int, server: CountingServer | None) -> int:
    """An upstream store whose ``plan.md`` has `versions` snapshots, written into its layout directly."""
    import fsspec
    from flyte.ai.agents import MemoryStore as Upstream

    store = Upstream.get_or_create(key=key, keep_versions=True)
    store.write_text(PATH, "version 0\n" * 20)
    store.save()
    remote = store.remote_path_for_key(key=key).rstrip("/")
    fs, root = fsspec.core.url_to_fs(remote)
    if server is not None:  # the server, not AWS
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing")
    objects = {
        f"{root}/versions/{PATH}/2026-01-01T{i // 3600:02d}-{i // 60 % 60:02d}-{i % 60:02d}+00-00_{i:064x}.txt": (
            f"version {i}\n" * 20
        ).encode()
        for i in range(versions)
    }
    fs.pipe(objects)
    return len(fs.find(root))


def ours(counter: SeamCounter, server: CountingServer | None, key: str, limit: int) -> dict:
    from flyteplugins_memory import MemoryStore

    store = MemoryStore.get_or_create(key=key)
    store.list_paths()  # opened: what follows is the history alone
    counter.reset()
    wire = _wire(server, lambda: store.history(PATH, limit))
    ms, entries = wire["ms"], wire["result"]
    assert len(entries) == limit, len(entries)
    history = {"ms": ms, "requests": wire["requests"] if server else counter.requests}
    counter.reset()
    reads = _wire(server, lambda: [store.read_version(PATH, e.version_id) for e in entries])
    read_requests = reads["requests"] if server else counter.requests
    with_reads = {"ms": ms + reads["ms"], "requests": history["requests"] + read_requests}
    return {"history": history, "with_reads": with_reads}


def upstream(server: CountingServer | None, key: str, limit: int) -> dict:
    from flyte.ai.agents import MemoryStore as Upstream

    def run() -> list[str]:
        store = Upstream.get_or_create(key=key, keep_versions=True)
        store.read_text(PATH)  # upstream downloads the whole prefix on first use; its snapshots are then local
        names = sorted((store._root / "versions" / PATH).iterdir())[-limit:]
        return [n.read_text() for n in names]

    wire = _wire(server, run)
    assert len(wire["result"]) == limit
    return {"ms": wire["ms"], "requests": wire["requests"]}


def _wire(server: CountingServer | None, action: Callable[[], Any]) -> dict:
    if server is not None:
        server.reset()
    ms, result = timed(action)
    return {"ms": ms, "result": result, "requests": server.counts()["requests"] if server else 0}


def run_backend(name: str, server: CountingServer | None, sizes: list[int], limit: int) -> dict:
    counter = SeamCounter()
    figures = {}
    for commits in sizes:
        key, up_key = f"hist-{uuid.uuid4().hex[:8]}", f"up-{uuid.uuid4().hex[:8]}"
        start = time.perf_counter()
        make_history(key, commits)
        objects = upstream_store(up_key, commits // 2, server)
        print(f"{name}: {commits} commits made in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        up = upstream(server, up_key, limit)
        if server is None:
            up["requests"] = objects + 1  # a listing, then every object under the prefix (see the docstring)
        figures[commits] = {"ours": ours(counter, server, key, limit), "upstream": up}
    return figures


def table(results: dict[str, dict], limit: int) -> str:
    lines = [
        f"`history(path, limit={limit})` of a path written in every other commit (`benchmarks/history_bench.py`).",
        "",
        "| backend | commits | ours: history | ours: history + read the versions | upstream: open + read |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for backend, sizes in results.items():
        for commits, f in sizes.items():
            h, r, u = f["ours"]["history"], f["ours"]["with_reads"], f["upstream"]
            lines.append(
                f"| {backend} | {commits:,} | {h['requests']} req, {h['ms']:,.1f} ms "
                f"| {r['requests']} req, {r['ms']:,.1f} ms | {u['requests']:,} req, {u['ms']:,.0f} ms |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", default="100,10000")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    sizes = [int(n) for n in args.commits.split(",")]
    results: dict[str, dict] = {}
    # S3 first: the local context set-up below would otherwise replace the S3 configuration.
    if not args.no_s3:
        server = CountingServer()
        try:
            import s3fs

            bucket = f"bench-{uuid.uuid4().hex[:8]}"
            s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
            setup(server.endpoint, bucket)
            results["moto S3"] = run_backend("moto S3", server, sizes, args.limit)
        finally:
            server.stop()
    setup_local(os.path.join(tempfile.mkdtemp(), "raw_data", "bench"))
    results["local disk"] = run_backend("local disk", None, sizes, args.limit)
    text = table(dict(sorted(results.items())), args.limit)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
