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
search); the first save of ``--files`` new files; writing and reading one ``--megabytes`` file. The floor
is plain parallel object requests (s3fs, all at once) that move the same bytes: what no implementation
can beat. Stores are built with no delay; only the measured operation runs at the delay.

Run: python benchmarks/latency_bench.py [--delays 0,20] [--files 1000] [--entries 10000] [--megabytes 100]
     [--trace] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass

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
    files, big = args.files, "y" * (args.megabytes * 1024 * 1024)

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

    row = out.setdefault(f"cold open + first search ({args.entries:,} files)", {})
    ours = impls["ours"]
    key, store = bulk(ours, args.entries, entry_text)
    store.save()

    def search(key=key) -> None:
        assert ours.get_or_create(key=key).search("lantern tag7")

    row["ours"] = timed(proxy, delay, search)

    row = out.setdefault(f"bulk first save, {files:,} new files", {})
    for name, impl in impls.items():
        _, store = bulk(impl, files)
        row[name] = timed(proxy, delay, store.save)
    row["floor"] = timed(proxy, delay, lambda: floor.put({f"bulk/{i:05d}.txt": PAYLOAD.encode() for i in range(files)}))

    for reading in (False, True):
        row = out.setdefault(f"{args.megabytes} MB file: " + ("read" if reading else "write + save"), {})
        for name, impl in impls.items():
            key = f"big-{uuid.uuid4().hex[:8]}"
            store = impl.get_or_create(key=key)

            def write(store=store) -> None:
                store.write_text("big.txt", big)
                store.save()

            if not reading:
                row[name] = timed(proxy, delay, write)
                continue
            write()

            def read(impl=impl, key=key) -> None:
                assert len(impl.get_or_create(key=key).read_text("big.txt")) == len(big)

            row[name] = timed(proxy, delay, read)
        payload = big.encode()
        floor.put({"big.txt": payload})
        if reading:
            row["floor"] = timed(proxy, delay, lambda: floor.get(["big.txt"]))
        else:
            row["floor"] = timed(proxy, delay, lambda payload=payload: floor.put({"big.txt": payload}))
    return out


# -- report ------------------------------------------------------------------------------------------------


def _cell(run: Run | None) -> str:
    if run is None:
        return "n/a"
    return f"{run.seconds * 1000:,.0f} ms, {run.requests:,} req, {run.waves:,} waves, peak {run.peak:,}"


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
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args()
    OPTIONS["trace"] = args.trace

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
        proxy.stop()
        server.stop()
    text = table(results)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
