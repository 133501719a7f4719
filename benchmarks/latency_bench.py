"""Round trips on object storage (issue 26): upstream, ours and a floor behind a proxy that delays requests.

Real S3 and GCS answer each request in roughly 10-30 ms and take thousands in parallel, so there an
operation costs its number of sequential round trips ("waves"), not its number of requests; moto on
127.0.0.1 answers in well under a millisecond and hides that. This benchmark puts a small proxy (aiohttp, in
a process of its own, on 127.0.0.1) in front of the counting moto server of `sync_bench`: it delays every
request by ``--delays`` milliseconds (each in turn; 0 and 20 by default), with no limit on concurrency,
and records when each request started and ended. For each operation the table shows the time the caller
saw, the requests, the waves (sequential round trips: the longest chain of requests in which each started
after the one before it ended, so requests issued together count once, requests issued one after another
count each, and a fixed-width pool of N counts about requests/N) and the peak number of requests in flight.

Operations (1 KiB files): a one-file change and save on a ``--files`` store; open, ``list_paths()`` and
the transcript of it; a cold open and first ``search`` over ``--entries`` files (ours only: upstream has no
search); the first save of ``--files`` new files; writing and reading one ``--megabytes`` file
(``read_text`` on both, and ours' ``read_bytes`` and ``open_bytes`` read in 1 MiB chunks). The floor is
plain parallel object requests (s3fs, all at once) that move the same bytes: a reference, not a bound
(ours' ranged reads split one object where the floor makes one GET). Stores are built with no delay;
only the measured operation runs at the delay.

Each large-file operation runs in a worker process (one per implementation, set up before the clock
starts), so its cell also gives its peak memory as a multiple of the file: the worker's RSS high-water
(``VmHWM``, reset just before the operation through ``/proc/self/clear_refs``) above its resident size at
that moment (Linux). Workers run with a fixed 128 KiB ``mmap`` threshold, so every large buffer is mapped
and unmapped on its own and one operation's freed memory never hides the next one's. A write's input
string is made inside the operation and counts.

Run: python benchmarks/latency_bench.py [--delays 0,20] [--files 1000] [--entries 10000] [--megabytes 100]
     [--only save,open,search,bulk,large] [--trace] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sync_bench import PAYLOAD, CountingServer, implementations, setup

WORDS = [
    "river",
    "stone",
    "lantern",
    "harbor",
    "maple",
    "orbit",
    "cedar",
    "falcon",
    "ember",
    "quartz",
    "meadow",
    "signal",
]

# -- the proxy ---------------------------------------------------------------------------------------------

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "content-encoding"}


def _serve_proxy(upstream: str, port_pipe) -> None:
    from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

    state: dict = {"delay": 0.0, "log": []}

    async def control(request: web.Request) -> web.Response:
        if request.path == "/__delay":
            state["delay"] = float(request.query["ms"]) / 1000
        elif request.path == "/__reset":
            state["log"] = []
        return web.json_response({"log": state["log"]})

    async def forward(request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/__"):
            return await control(request)
        started = time.monotonic()
        body = await request.read()
        await asyncio.sleep(state["delay"])
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = request.headers.get("Host", "")
        session: ClientSession = request.app["session"]
        async with session.request(
            request.method, upstream + request.path_qs, headers=headers, data=body, allow_redirects=False
        ) as answer:
            payload = await answer.read()
            reply = web.Response(status=answer.status, body=None if request.method == "HEAD" else payload)
            for name, value in answer.headers.items():
                kept = name.lower() not in HOP_BY_HOP or (request.method == "HEAD" and name.lower() == "content-length")
                if kept:
                    reply.headers.add(name, value)
        state["log"].append((started, time.monotonic(), request.method, request.path))
        return reply

    async def main() -> None:
        app = web.Application(client_max_size=1 << 31)
        app["session"] = ClientSession(
            connector=TCPConnector(limit=0), timeout=ClientTimeout(total=None), auto_decompress=False
        )
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port_pipe.send(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(main())


class LatencyProxy:
    """The proxy process in front of `upstream` (a moto endpoint)."""

    def __init__(self, upstream: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        receive, send = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_serve_proxy, args=(upstream, send), daemon=True)
        self.process.start()
        self.endpoint = f"http://127.0.0.1:{receive.recv()}"

    def _call(self, path: str) -> list:
        return json.loads(urllib.request.urlopen(f"{self.endpoint}{path}").read())["log"]

    def delay(self, ms: float) -> None:
        self._call(f"/__delay?ms={ms}")

    def reset(self) -> None:
        self._call("/__reset")

    def log(self) -> list[tuple[float, float, str, str]]:
        """Each request since the last reset: start, end (seconds, the proxy's clock), method, path."""
        return [tuple(entry) for entry in self._call("/__log")]  # type: ignore[misc]

    def stop(self) -> None:
        self.process.terminate()


# -- measuring ---------------------------------------------------------------------------------------------


#: print each measured request (start, end, method, path) to stderr: `--trace`
OPTIONS = {"trace": False}


@dataclass
class Run:
    seconds: float
    requests: int
    waves: int
    peak: int
    #: peak memory of the operation as a multiple of the file (large-file rows only)
    memory: float | None = None


def waves_and_peak(intervals: list[tuple[float, float]]) -> tuple[int, int]:
    """The sequential round trips (the longest chain of requests each started after the one before it
    ended: what latency multiplies) and the most requests in flight at once."""
    events = sorted(
        [(stop, 0, i) for i, (_, stop) in enumerate(intervals)]
        + [(start, 1, i) for i, (start, _) in enumerate(intervals)]
    )  # at one instant, ends before starts: a request that starts as another ends follows it
    depth = [0] * len(intervals)
    ended = level = peak = 0
    for _, starts, i in events:
        if starts:
            depth[i] = ended + 1
            level += 1
            peak = max(peak, level)
        else:
            ended = max(ended, depth[i])
            level -= 1
    return max(depth, default=0), peak


def timed(proxy: LatencyProxy, delay_ms: float, action: Callable[[], object]) -> Run:
    proxy.delay(delay_ms)
    proxy.reset()
    start = time.perf_counter()
    try:
        action()
    finally:
        seconds = time.perf_counter() - start
        proxy.delay(0)
    log = proxy.log()
    waves, peak = waves_and_peak([(start, end) for start, end, _, _ in log])
    if OPTIONS["trace"]:
        print(f"-- {len(log)} requests, {waves} waves", file=sys.stderr)
        first = min((start for start, *_ in log), default=0.0)
        for start, end, method, path in sorted(log):
            print(f"  {(start - first) * 1000:8.1f} {(end - first) * 1000:8.1f} ms {method:6} {path}", file=sys.stderr)
    return Run(seconds, len(log), waves, peak)


# -- the operations ----------------------------------------------------------------------------------------

#: what ``--only`` selects: the rows of the table, by workload
WORKLOADS = ("save", "open", "search", "bulk", "large")


def bulk(impl: type, files: int, text: Callable[[int], str] = lambda i: PAYLOAD):
    key = f"l-{uuid.uuid4().hex[:8]}"
    store = impl.get_or_create(key=key)
    for i in range(files):
        store.write_text(f"files/{i:05d}.txt", text(i))
    store.append({"role": "user", "content": "hello"})
    return key, store


def entry_text(i: int) -> str:
    words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12)]
    return f"note {i}: " + " ".join(words) + f" tag{i % 97}"


class Floor:
    """Plain parallel requests through s3fs: the same bytes, all at once."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        import s3fs

        self.fs = s3fs.S3FileSystem(
            endpoint_url=endpoint, key="testing", secret="testing", config_kwargs={"max_pool_connections": 1024}
        )
        self.base = f"{bucket}/floor-{uuid.uuid4().hex[:8]}"

    def put(self, objects: dict[str, bytes]) -> None:
        self.fs.pipe({f"{self.base}/{name}": data for name, data in objects.items()}, batch_size=-1)

    def get(self, names: list[str]) -> None:
        self.fs.cat([f"{self.base}/{name}" for name in names], batch_size=-1)

    def list_and_get(self) -> None:
        self.fs.invalidate_cache()
        self.fs.find(self.base)


def operations(args, proxy: LatencyProxy, endpoint: str, bucket: str, delay: float) -> dict[str, dict[str, Run]]:
    impls = implementations()
    out: dict[str, dict[str, Run]] = {}
    floor = Floor(endpoint, bucket)
    files = args.files

    if "save" in args.only:
        row = out.setdefault(f"one-file change + save ({files:,} files)", {})
        for name, impl in impls.items():
            key, store = bulk(impl, files)
            store.save()
            handle = impl.get_or_create(key=key)

            def one_file_save(handle=handle) -> None:
                handle.write_text("files/00007.txt", PAYLOAD[:-7] + "changed")
                handle.save()

            row[name] = timed(proxy, delay, one_file_save)
        floor.put({"one.txt": PAYLOAD.encode()})
        row["floor"] = timed(proxy, delay, lambda: floor.put({"one.txt": PAYLOAD.encode()}))

    if "open" in args.only:
        row = out.setdefault(f"open + list_paths() + transcript ({files:,} files)", {})
        for name, impl in impls.items():
            key, store = bulk(impl, files)
            store.save()

            def open_and_list(impl=impl, key=key) -> None:
                opened = impl.get_or_create(key=key)
                assert len(opened.list_paths()) == files and opened.messages

            row[name] = timed(proxy, delay, open_and_list)
        floor.put({f"files/{i:05d}.txt": PAYLOAD.encode() for i in range(files)})
        row["floor"] = timed(proxy, delay, floor.list_and_get)

    if "search" in args.only:
        row = out.setdefault(f"cold open + first search ({args.entries:,} files)", {})
        ours = impls["ours"]
        key, store = bulk(ours, args.entries, entry_text)
        store.save()

        def search(key=key) -> None:
            assert ours.get_or_create(key=key).search("lantern tag7")

        row["ours"] = timed(proxy, delay, search)

    if "bulk" in args.only:
        row = out.setdefault(f"bulk first save, {files:,} new files", {})
        for name, impl in impls.items():
            _, store = bulk(impl, files)
            row[name] = timed(proxy, delay, store.save)
        row["floor"] = timed(
            proxy, delay, lambda: floor.put({f"bulk/{i:05d}.txt": PAYLOAD.encode() for i in range(files)})
        )

    if "large" in args.only:
        big_file_rows(out, args, proxy, endpoint, bucket, delay, floor)
    return out


def big_file_rows(out, args, proxy: LatencyProxy, endpoint: str, bucket: str, delay: float, floor: Floor) -> None:
    """The ``--megabytes`` file written and read, each measured in a child process of its own, which also
    gives its peak memory (RSS high-water above the child's resident size just before the operation)."""
    size = args.megabytes * 1024 * 1024
    measure = {"proxy": proxy, "delay": delay, "endpoint": endpoint, "bucket": bucket, "size": size}
    row = out.setdefault(f"{args.megabytes} MB file: write + save", {})
    for name in ("upstream", "ours"):
        row[name] = in_child(**measure, impl=name, key=f"big-{uuid.uuid4().hex[:8]}", how="write")
    payload = b"y" * size
    floor.put({"big.txt": payload})
    row["floor"] = timed(proxy, delay, lambda: floor.put({"big.txt": payload}))
    keys = {name: f"big-{uuid.uuid4().hex[:8]}" for name in ("upstream", "ours")}
    for name, key in keys.items():
        in_child(**{**measure, "delay": 0}, impl=name, key=key, how="write")
    reads = {
        "read_text": {"upstream": "read_text", "ours": "read_text"},
        "read_bytes": {"ours": "read_bytes"},
        "open_bytes, 1 MiB reads": {"ours": "open_bytes"},
    }
    for label, hows in reads.items():
        row = out.setdefault(f"{args.megabytes} MB file: {label}", {})
        for name, how in hows.items():
            row[name] = in_child(**measure, impl=name, key=keys[name], how=how)
        row["floor"] = timed(proxy, delay, lambda: floor.get(["big.txt"]))


def _resident() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_high_water() -> None:
    """Start the RSS high-water mark (``VmHWM``) from now: imports and set-up peaked higher than what stays."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _high_water() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024  # kB


def _big_op(impl: type, key: str, how: str, size: int, opened: Any) -> int:
    """One large-file operation; the bytes it moved. A write goes to `opened`, the new store opened before the
    clock (the row compares moving the bytes with the floor's PUT); a read opens its store on the clock."""
    if how == "write":
        opened.write_text("big.txt", "y" * size)
        opened.save()
        return size
    store = impl.get_or_create(key=key)
    if how == "open_bytes":
        with store.open_bytes("big.txt") as stream:
            return sum(len(chunk) for chunk in iter(lambda: stream.read(1 << 20), b""))
    return len(getattr(store, how)("big.txt"))


def _worker(conn, endpoint: str, bucket: str, impl_name: str) -> None:
    """A child process that runs `_big_op`s on request, each set up before the parent starts the clock."""
    setup(endpoint, bucket)
    impl = implementations()[impl_name]
    warm = impl.get_or_create(key=f"warm-{uuid.uuid4().hex[:8]}")  # clients and imports, off the clock
    warm.write_text("w.txt", "w")
    warm.save()
    assert impl.get_or_create(key=warm.key).read_text("w.txt") == "w"
    while (request := conn.recv()) is not None:
        key, how, size = request
        opened = impl.get_or_create(key=key) if how == "write" else None
        conn.send("ready")
        conn.recv()
        _reset_high_water()
        before = _resident()
        start = time.perf_counter()
        moved = _big_op(impl, key, how, size, opened)
        seconds = time.perf_counter() - start
        conn.send((seconds, max(0, _high_water() - before), moved))


#: one worker process per implementation, for the whole run (spawning one per operation cost seconds each)
_WORKERS: dict[str, tuple] = {}


def _worker_for(impl: str, endpoint: str, bucket: str):
    if impl not in _WORKERS:
        ctx = multiprocessing.get_context("spawn")
        mine, theirs = ctx.Pipe()
        child = ctx.Process(target=_worker, args=(theirs, endpoint, bucket, impl), daemon=True)
        saved = os.environ.get("MALLOC_MMAP_THRESHOLD_")
        os.environ["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)  # glibc: fixed, not raised after frees
        try:
            child.start()
        finally:
            os.environ.pop("MALLOC_MMAP_THRESHOLD_")
            if saved is not None:
                os.environ["MALLOC_MMAP_THRESHOLD_"] = saved
        _WORKERS[impl] = (mine, child)
    return _WORKERS[impl][0]


def stop_workers() -> None:
    for conn, child in _WORKERS.values():
        conn.send(None)
        child.join(timeout=30)
    _WORKERS.clear()


def in_child(
    proxy: LatencyProxy, delay: float, endpoint: str, bucket: str, size: int, impl: str, key: str, how: str
) -> Run:
    """`_big_op` in the implementation's worker process (its clients made by a small save and read before
    the first), timed there; requests from the proxy."""
    conn = _worker_for(impl, endpoint, bucket)
    conn.send((key, how, size))
    try:
        assert conn.recv() == "ready"
        proxy.delay(delay)
        proxy.reset()
        conn.send("go")
        seconds, peak, moved = conn.recv()
    finally:
        proxy.delay(0)
    assert moved == size, (how, moved, size)
    log = proxy.log()
    waves, in_flight = waves_and_peak([(start, end) for start, end, _, _ in log])
    return Run(seconds, len(log), waves, in_flight, memory=peak / size)


# -- report ------------------------------------------------------------------------------------------------


def _cell(run: Run | None) -> str:
    if run is None:
        return "n/a"
    cell = f"{run.seconds * 1000:,.0f} ms, {run.requests:,} req, {run.waves:,} waves, peak {run.peak:,}"
    return cell if run.memory is None else f"{cell}, memory {run.memory:.2f}x"


def table(results: dict[float, dict[str, dict[str, Run]]]) -> str:
    lines = [
        (
            f"Moto S3 on 127.0.0.1 behind a proxy delaying each request, unlimited concurrency; single runs; "
            f"Python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}. Each cell: time, requests, "
            f"sequential waves, peak requests in flight."
        ),
        "",
        "| delay | operation | upstream | ours | floor |",
        "| ---: | --- | --- | --- | --- |",
    ]
    for delay, rows in results.items():
        for operation, runs in rows.items():
            cells = " | ".join(_cell(runs.get(name)) for name in ("upstream", "ours", "floor"))
            lines.append(f"| {delay:g} ms | {operation} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delays", default="0,20", help="milliseconds added to every request, in turn")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--trace", action="store_true", help="print every measured request to stderr")
    parser.add_argument(
        "--only",
        default=",".join(WORKLOADS),
        help=f"comma-separated workloads to run, of {', '.join(WORKLOADS)} (default: all)",
    )
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    OPTIONS["trace"] = args.trace
    args.only = set(args.only.split(","))
    if args.only - set(WORKLOADS):
        parser.error(f"unknown workloads: {', '.join(sorted(args.only - set(WORKLOADS)))}")

    server = CountingServer()
    proxy = LatencyProxy(server.endpoint)
    try:
        import s3fs

        bucket = f"latency-{uuid.uuid4().hex[:8]}"
        s3fs.S3FileSystem(endpoint_url=server.endpoint, key="testing", secret="testing").mkdir(bucket)
        setup(proxy.endpoint, bucket)
        results = {}
        for delay in [float(d) for d in args.delays.split(",")]:
            results[delay] = operations(args, proxy, proxy.endpoint, bucket, delay)
            print(f"done: {delay:g} ms", file=sys.stderr)
    finally:
        stop_workers()
        proxy.stop()
        server.stop()
    text = table(results)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
