"""Bulk saves and large files: upstream ``flyte.ai.agents.MemoryStore`` against flyteplugins-memory.

Two workloads, each on local disk and on a moto S3 server that counts requests and bytes (the one of
`sync_bench`), each measurement in a fresh child process so that its peak memory is its own:

- bulk save: ``create``, then write N new 1 KiB files and ``save()`` (measured together: ours mirrors
  writes into its working root behind the call, upstream inside it);
- large file: write one file of M MB and ``save()`` (measured together), then a fresh handle opens the
  store and reads it back with ``read_text`` (measured together).

Peak memory is the growth of the child's resident set over what it held just before the measured step
(its high-water mark is reset there through ``/proc/self/clear_refs``), the content string included only
where the step creates it (the read). The read runs after the child has opened another (empty) store,
so the storage client's one-off start (imports, a client) is not in it. Requests and bytes are counted by
the server (S3 only). CPU is the measured step's: the child process's (every thread), and on S3 the
moto server's own (its ``/__cpu``): a single Python process, so its CPU per request bounds how fast any
client can go.

Run: python benchmarks/bulk_bench.py [--files 1000] [--megabytes 100] [--repeats 1] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Self

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sync_bench import PAYLOAD, CountingServer

# -- in the child: one measurement ---------------------------------------------------------------------


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Peak:
    """Peak resident-set growth (bytes) over one step, from a reset high-water mark."""

    def __enter__(self) -> Self:
        try:
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")
        except OSError:
            pass
        self.before = _rss_kib("VmRSS")
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start
        self.bytes = max(0, _rss_kib("VmHWM") - self.before) * 1024


def _bind(backend: str, raw: str, endpoint: str | None) -> None:
    import flyte
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath

    if endpoint:
        import sync_bench

        sync_bench.setup(endpoint, raw.split("/")[2])
    else:
        flyte.init(org="bench", project="memory", domain="development")
    internal_ctx().new_raw_data_path(RawDataPath(path=raw)).__enter__()


def _impl(name: str) -> type:
    if name == "upstream":
        from flyte.ai.agents import MemoryStore

        return MemoryStore
    from flyteplugins_memory import MemoryStore

    return MemoryStore


def _counts(endpoint: str | None) -> dict:
    if not endpoint:
        return {"requests": None, "bytes": None}
    import urllib.request

    return json.loads(urllib.request.urlopen(f"{endpoint}/__counts").read())


def _server_cpu(endpoint: str | None) -> float | None:
    if not endpoint:
        return None
    import urllib.request

    return float(json.loads(urllib.request.urlopen(f"{endpoint}/__cpu").read())["cpu"])


def _reset(endpoint: str | None) -> None:
    if endpoint:
        import urllib.request

        urllib.request.urlopen(f"{endpoint}/__reset").read()


def child(spec: dict) -> dict:
    _bind(spec["backend"], spec["raw"], spec["endpoint"])
    impl, key, endpoint = _impl(spec["impl"]), spec["key"], spec["endpoint"]
    if spec["op"] == "bulk":
        store = impl.create(key=key)

        def step() -> None:
            for i in range(spec["files"]):  # distinct contents, as real files have (equal ones share a blob)
                store.write_text(f"files/{i:05d}.txt", f"{i:05d}{PAYLOAD[5:]}")
            store.save()
            assert store.root  # ours: waits for the working root's writes, which upstream makes in write_text
    elif spec["op"] == "large-write":
        store = impl.get_or_create(key=key)
        content = "x" * (spec["megabytes"] * 1_000_000)

        def step() -> None:
            store.write_text("data/large.txt", content)
            store.save()
    else:  # large-read: the file was written by the same implementation beforehand
        impl.get_or_create(key=f"warm-{key}")  # the storage client's one-off start, outside the measure

        def step() -> None:
            fresh = impl.get_or_create(key=key)
            assert len(fresh.read_text("data/large.txt")) == spec["megabytes"] * 1_000_000

    _reset(endpoint)
    server_before, client_before = _server_cpu(endpoint), time.process_time()
    with Peak() as peak:
        step()
    client, server_after = time.process_time() - client_before, _server_cpu(endpoint)
    server = None if server_before is None or server_after is None else server_after - server_before
    return {
        "seconds": peak.seconds,
        "peak": peak.bytes,
        "client_cpu": client,
        "server_cpu": server,
        **_counts(endpoint),
    }


# -- in the parent: the runs and the table ---------------------------------------------------------------


def run_child(spec: dict) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        check=False,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{spec['impl']} {spec['op']} on {spec['backend']} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args, backend: str, raw: str, endpoint: str | None) -> dict:
    """{(op, impl): [result per repeat]} for one backend."""
    results: dict = {}
    for _ in range(args.repeats):
        for impl in ("upstream", "ours"):
            base = {"backend": backend, "raw": raw, "endpoint": endpoint, "impl": impl}
            base.update(files=args.files, megabytes=args.megabytes)
            bulk_key, large_key = f"bulk-{uuid.uuid4().hex[:8]}", f"large-{uuid.uuid4().hex[:8]}"
            for op, key in (("bulk", bulk_key), ("large-write", large_key), ("large-read", large_key)):
                results.setdefault((op, impl), []).append(run_child({**base, "op": op, "key": key}))
            print(f"done: {backend} {impl}", file=sys.stderr)
    return results


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 1024:,.0f} KiB"


def _cpu(results: list[dict]) -> str:
    """Median CPU seconds of the measured step: the client process (all its threads) + the S3 server."""
    client = statistics.median(r["client_cpu"] for r in results)
    if results[-1].get("server_cpu") is None:
        return f"{client:.1f} s"
    return f"{client:.1f} + {statistics.median(r['server_cpu'] for r in results):.1f} s"


def table(args, runs: dict) -> str:
    labels = {
        "bulk": f"write + save of {args.files:,} new 1 KiB files",
        "large-write": f"write + save of one {args.megabytes} MB file",
        "large-read": "fresh open + read_text of it",
    }
    lines = [
        (
            "| backend | operation | upstream time | ours time | speed-up | upstream requests | ours requests "
            "| upstream bytes | ours bytes | upstream peak memory | ours peak memory "
            "| upstream CPU: client + server | ours CPU: client + server |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for backend, results in runs.items():
        for op, label in labels.items():
            up, ours = results[(op, "upstream")], results[(op, "ours")]
            u_t = statistics.median(r["seconds"] for r in up)
            o_t = statistics.median(r["seconds"] for r in ours)
            req = [f"{r[-1]['requests']:,}" if r[-1]["requests"] is not None else "-" for r in (up, ours)]
            lines.append(
                f"| {backend} | {label} | {u_t * 1000:,.0f} ms | {o_t * 1000:,.0f} ms | {u_t / o_t:.2f}x "
                f"| {req[0]} | {req[1]} | {_size(up[-1]['bytes'])} | {_size(ours[-1]['bytes'])} "
                f"| {_size(max(r['peak'] for r in up))} | {_size(max(r['peak'] for r in ours))} "
                f"| {_cpu(up)} | {_cpu(ours)} |"
            )
    return "\n".join(lines)


def run(args) -> str:
    """Both backends; returns the markdown table."""
    runs = {"local disk": measure(args, "local", os.path.join(tempfile.mkdtemp(), "raw_data", "bench"), None)}
    server = CountingServer()
    try:
        import s3fs

        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
        runs["moto S3"] = measure(args, "s3", f"s3://{bucket}/raw/rd/bench", server.endpoint)
    finally:
        server.stop()
    header = (
        f"{args.files:,} files of 1 KiB; one file of {args.megabytes} MB; {args.repeats} repeat(s), times are "
        f"medians, peaks the largest. Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d')}."
    )
    return header + "\n\n" + table(args, runs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", type=int, default=1000, help="new files in the bulk save")
    parser.add_argument("--megabytes", type=int, default=100, help="size of the large file")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    output = run(args)
    print(output)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(output + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
    else:
        main()
