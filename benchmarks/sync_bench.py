"""Upstream ``flyte.ai.agents.MemoryStore`` against flyteplugins-memory, side by side on one moto S3 server.

Starts a moto server on 127.0.0.1 in a child process that counts every request and byte, then for stores
of each size (1 KiB files), with versions off and on, measures for both implementations: opening an
existing store, saving after changing one file, and local ``write_text``. Finally 8 processes save one key
together (5 rounds each) with each implementation, and the table shows what each kept. Then the bulk-save
and large-file table of `bulk_bench` (local disk and S3), unless ``--no-bulk``.

Then a store of ours of ``--scale`` files (100,000; upstream would take hours there): open, first lookup,
a one-file save and the checkpoint bytes amortized over ``--scale-saves`` one-file saves (`scale_bench`).

Run: python benchmarks/sync_bench.py [--sizes 100,1000,10000] [--repeats 3] [--writes 200] [--files 1000]
     [--megabytes 100] [--scale 100000] [--scale-saves 300] [--no-race] [--no-bulk] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass

ORG, PROJECT, DOMAIN = "bench", "memory", "development"
PAYLOAD = "x" * 1024


# -- a moto server that counts what crosses the wire -------------------------------------------------


def _serve(port_pipe) -> None:
    import logging

    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    import threading

    from flyteplugins_memory.testing.moto import atomic_conditional_puts

    atomic_conditional_puts()  # as S3 decides them (see that module)

    counts = {"requests": 0, "bytes": 0}
    lock = threading.Lock()  # the server is threaded: unlocked ``+=`` loses counts under concurrent requests
    moto_app = DomainDispatcherApplication(create_backend_app)

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/__counts":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(counts).encode()]
        if path == "/__cpu":  # the server's own CPU seconds (threads included): what bounds a bulk run
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps({"cpu": time.process_time()}).encode()]
        if path == "/__reset":
            with lock:
                counts.update(requests=0, bytes=0)
            start_response("200 OK", [])
            return [b""]
        with lock:
            counts["requests"] += 1
            counts["bytes"] += int(environ.get("CONTENT_LENGTH") or 0)
        return counted(moto_app(environ, start_response))

    def counted(body):
        for chunk in body:
            with lock:
                counts["bytes"] += len(chunk)
            yield chunk

    from werkzeug.serving import ThreadedWSGIServer

    ThreadedWSGIServer.request_queue_size = 4096  # werkzeug's 128 overflows on a bulk save's burst of connections
    server = make_server("127.0.0.1", 0, app, threaded=True)
    port_pipe.send(server.server_address[1])
    server.serve_forever()


class CountingServer:
    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        receive, send = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_serve, args=(send,), daemon=True)
        self.process.start()
        self.endpoint = f"http://127.0.0.1:{receive.recv()}"

    def reset(self) -> None:
        urllib.request.urlopen(f"{self.endpoint}/__reset").read()

    def counts(self) -> dict[str, int]:
        return json.loads(urllib.request.urlopen(f"{self.endpoint}/__counts").read())

    def stop(self) -> None:
        self.process.terminate()


# -- measuring ------------------------------------------------------------------------------------------


@dataclass
class Measure:
    seconds: float
    requests: int
    bytes: int


def setup(endpoint: str, bucket: str) -> None:
    """Configure Flyte for the server and bind a raw-data path in the bucket (as a task would have)."""
    import flyte
    import flyte.storage
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    storage = flyte.storage.S3(
        endpoint=endpoint, access_key_id="testing", secret_access_key="testing", region="us-east-1"
    )
    flyte.init(org=ORG, project=PROJECT, domain=DOMAIN, storage=storage)
    internal_ctx().new_raw_data_path(RawDataPath(path=f"s3://{bucket}/raw/rd/bench")).__enter__()


def implementations() -> dict[str, type]:
    from flyte.ai.agents import MemoryStore as Upstream

    from flyteplugins_memory import MemoryStore as Ours

    return {"upstream": Upstream, "ours": Ours}


def measured(server: CountingServer, action: Callable[[], object]) -> tuple[Measure, object]:
    server.reset()
    start = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - start
    counts = server.counts()
    return Measure(seconds, counts["requests"], counts["bytes"]), result


def populate(impl: type, key: str, files: int, versions: bool) -> None:
    store = impl.get_or_create(key=key, keep_versions=versions)
    for i in range(files):
        store.write_text(f"files/{i:05d}.txt", PAYLOAD)
    store.append({"role": "user", "content": "hello"})
    store.save()


def bench_store(server: CountingServer, impl: type, files: int, versions: bool, repeats: int, writes: int) -> dict:
    key = f"k-{uuid.uuid4().hex[:8]}"
    populate(impl, key, files, versions)
    opens, saves = [], []
    for round_ in range(repeats):
        opened, store = measured(server, lambda: impl.get_or_create(key=key, keep_versions=versions))
        store.write_text("files/00000.txt", f"{PAYLOAD[:-8]}{round_:08d}")
        saved, _ = measured(server, store.save)
        opens.append(opened)
        saves.append(saved)
    timings = []
    for i in range(writes):
        start = time.perf_counter()
        store.write_text(f"scratch/{i:05d}.txt", PAYLOAD)
        timings.append(time.perf_counter() - start)
    return {"open": opens, "save": saves, "write_ms": statistics.median(timings) * 1000}


# -- concurrent writers ---------------------------------------------------------------------------------


def race_worker(name: str, key: str, endpoint: str, bucket: str, worker: int, go: str) -> None:
    setup(endpoint, bucket)
    impl = implementations()[name]
    while not os.path.exists(go):
        time.sleep(0.01)
    for round_ in range(5):
        store = impl.get_or_create(key=key)
        store.write_text(f"w{worker}/r{round_}.txt", f"{worker}:{round_}")
        store.append({"role": "user", "content": f"{worker}:{round_}"})
        store.save()


def bench_race(name: str, endpoint: str, bucket: str) -> dict:
    impl = implementations()[name]
    key = f"race-{uuid.uuid4().hex[:8]}"
    impl.get_or_create(key=key)
    go = os.path.join(tempfile.mkdtemp(), "go")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--race-worker", name, key, endpoint, bucket, str(w), go],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for w in range(8)
    ]
    open(go, "w").close()
    failures = 0
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            failures += 1
            print(f"{name} race worker failed: {err.decode()[-2000:]}", file=sys.stderr)
    store = impl.get_or_create(key=key)
    events = store.audit_tail(0) if name == "ours" else store.audit_tail_sync(0)
    return {"files": len(store.list_paths()), "messages": len(store.messages), "audit": len(events), "failed": failures}


# -- report ---------------------------------------------------------------------------------------------


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB" if n >= 1024 else f"{n} B"


def report(results: dict, races: dict, args) -> str:
    lines = [
        (
            f"Moto S3 server on 127.0.0.1 (counting requests and bytes), 1 KiB files, {args.repeats} repeats "
            f"(times are medians; requests and bytes are per operation). Python {sys.version.split()[0]}, "
            f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}."
        ),
        "",
        (
            "| files | versions | operation | upstream time | ours time | speed-up | upstream requests "
            "| ours requests | upstream bytes | ours bytes |"
        ),
        "| ---: | :---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (files, versions), pair in results.items():
        up, ours = pair["upstream"], pair["ours"]
        for op in ("open", "save"):
            u_t = statistics.median(m.seconds for m in up[op])
            o_t = statistics.median(m.seconds for m in ours[op])
            lines.append(
                f"| {files:,} | {'on' if versions else 'off'} | {op} | {u_t * 1000:,.1f} ms | {o_t * 1000:,.1f} ms "
                f"| {u_t / o_t:,.0f}x | {up[op][-1].requests:,} | {ours[op][-1].requests:,} "
                f"| {_kib(up[op][-1].bytes)} | {_kib(ours[op][-1].bytes)} |"
            )
        lines.append(
            f"| {files:,} | {'on' if versions else 'off'} | write_text (local) | {up['write_ms']:.3f} ms "
            f"| {ours['write_ms']:.3f} ms | {up['write_ms'] / ours['write_ms']:.1f}x | 0 | 0 | 0 | 0 |"
        )
    lines += [
        "",
        "8 processes saving one key together, 5 rounds each (40 saves; each adds 1 file, 1 message, 1 audit event):",
        "",
        "| implementation | files kept | messages kept | audit events kept | failed processes |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, kept in races.items():
        lines.append(
            f"| {name} | {kept['files']} / 40 | {kept['messages']} / 40 | {kept['audit']} / 40 | {kept['failed']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--no-race", action="store_true")
    parser.add_argument("--no-bulk", action="store_true", help="leave out the bulk-save and large-file table")
    parser.add_argument("--scale", type=int, default=100_000, help="files of the scale store (0: leave it out)")
    parser.add_argument("--scale-saves", type=int, default=300, help="one-file saves for amortized checkpoint bytes")
    import bulk_bench

    bulk_bench.add_arguments(parser)
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
            for versions in (False, True):
                results[(files, versions)] = {
                    name: bench_store(server, impl, files, versions, args.repeats, args.writes)
                    for name, impl in implementations().items()
                }
                print(f"done: {files} files, versions {'on' if versions else 'off'}", file=sys.stderr)
        races = (
            {} if args.no_race else {name: bench_race(name, server.endpoint, bucket) for name in ("upstream", "ours")}
        )
        table = report(results, races, args)
        if args.scale:
            import scale_bench

            figures = scale_bench.run(server, measured, args.scale, args.scale_saves)
            table += "\n\nScale (`scale_bench`):\n\n" + scale_bench.table(figures)
    finally:
        server.stop()
    if not args.no_bulk:
        table += "\n\nBulk saves and large files (`bulk_bench`):\n\n" + bulk_bench.run(args)
    print(table)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(table + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--race-worker":
        race_worker(*sys.argv[2:6], int(sys.argv[6]), sys.argv[7])
    else:
        main()
