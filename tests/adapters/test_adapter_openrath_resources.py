"""The OpenRath backend's resource ingest (`MemoryOpResource`) and commit archives, on local disk and moto
S3, checked through storage itself; and the same calls on OpenRath's built-in local backend and ours side
by side (results of the same types and shapes). URLs are served by a stdlib HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import rath.memory as rm
from rath.memory import (
    MemoryCommitResult,
    MemoryExecutionFailure,
    MemoryFindResult,
    MemoryListResult,
    MemoryOpCommit,
    MemoryOpFind,
    MemoryOpList,
    MemoryOpRead,
    MemoryOpResource,
    MemoryOpWrite,
    MemoryReadResult,
    MemoryStoreSpec,
    MemoryWriteResult,
)
from rath.memory.adapters.local import LocalMemoryBackend

from flyteplugins_memory import MemoryStore
from flyteplugins_memory.adapters.openrath import path_of

BODY = b"<html>a page about lighthouses</html>"
CHUNKED = b"".join(b"line %06d of a long document about lighthouses\n" % i for i in range(8000))  # ~390 KB


def opened(key: str, root: Path | None = None, **options):
    policy = {"resource_import_roots": [str(root)]} if root is not None else {}
    return rm.get("flyte").open(MemoryStoreSpec(options={"key": key, **policy, **options}))


def data(result) -> str | bytes:
    assert isinstance(result, MemoryReadResult), result
    return result.data


def failure(result, kind: str) -> str:
    assert isinstance(result, MemoryExecutionFailure) and result.kind == kind, result
    return result.message


def sha16(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


def test_a_file_lands_as_the_local_backend_lays_it_out(durable_backend, key, tmp_path):
    src = tmp_path / "note.txt"
    src.write_bytes(b"the lighthouse keeper logs the storm\n")
    store = opened(key, tmp_path, actor="ingester")
    result = store.dispatch(MemoryOpResource(source=str(src), reason="why we kept it", instruction="summarise"))
    rid = sha16(src.read_bytes())
    assert isinstance(result, MemoryWriteResult)
    assert result == MemoryWriteResult(uri=f"memory://resources/{rid}", bytes_written=len(src.read_bytes()))

    objects = {n: d for n, d in durable_backend.objects(key).items() if n.startswith("openrath/")}
    assert set(objects) == {f"openrath/resources/{rid}/source.txt.md", f"openrath/resources/{rid}/meta.md"}
    assert objects[f"openrath/resources/{rid}/source.txt.md"] == src.read_bytes()  # bytes exactly
    meta = objects[f"openrath/resources/{rid}/meta.md"].decode()
    assert f"# Resource {rid}" in meta and "note.txt" in meta and "why we kept it" in meta and "summarise" in meta

    fresh = opened(key)
    assert data(fresh.dispatch(MemoryOpRead(uri=f"{result.uri}/source.txt", encoding=None))) == src.read_bytes()
    listing = fresh.dispatch(MemoryOpList(uri=result.uri))
    assert isinstance(listing, MemoryListResult) and [e.name for e in listing.entries] == ["meta", "source.txt"]
    found = fresh.dispatch(MemoryOpFind(query="lighthouse storm"))
    assert isinstance(found, MemoryFindResult) and found.hits[0].uri == f"{result.uri}/source.txt"

    ours = MemoryStore.get_or_create(key=key)
    labels = ours.get_meta(path_of(f"{result.uri}/source.txt"))
    assert labels is not None and labels.metadata == {
        "openrath_resource": rid,
        "source": str(src.resolve()),
        "original_name": "note.txt",
        "reason": "why we kept it",
        "instruction": "summarise",
    }
    assert ours.list_paths("openrath", where={"openrath_resource": rid}) == sorted(objects)
    assert [e["actor"] for e in ours.audit_tail(2)] == ["ingester", "ingester"]

    commits = len(ours.log(limit=100))  # ingesting the same bytes again: the same URI, no commit
    assert opened(key, tmp_path).dispatch(MemoryOpResource(source=str(src))) == result
    assert len(MemoryStore.get_or_create(key=key).log(limit=100)) == commits


def test_a_directory_lands_whole_in_one_commit(durable_backend, key, tmp_path):
    root = tmp_path / "docs"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\nhow to trim the lamp wick\n")
    (root / "sub" / "faq.txt").write_text("why is the lens fresnel\n")
    (root / "sub" / "deeper" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00lamp")
    (root / "meta.md").write_text("a file named like the resource's own meta\n")
    before = len(MemoryStore.get_or_create(key=key).log(limit=100))
    store = opened(key, tmp_path)
    result = store.dispatch(MemoryOpResource(source=str(root), target_uri="memory://resources/manuals"))
    assert isinstance(result, MemoryWriteResult) and result.uri.startswith("memory://resources/manuals/")
    assert result.bytes_written == sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert len(MemoryStore.get_or_create(key=key).log(limit=100)) == before + 1  # one commit for the tree

    objects = {n: d for n, d in durable_backend.objects(key).items() if n.startswith("openrath/")}
    base = "openrath/" + result.uri.removeprefix("memory://")
    for rel in ("guide.md", "sub/faq.txt", "sub/deeper/logo.png", "meta.md"):
        assert objects[path_of(f"{result.uri}/source/{rel}")] == (root / rel).read_bytes(), rel
    assert f"{base}/meta.md" in objects and len(objects) == 5

    fresh = opened(key)
    logo = f"{result.uri}/source/sub/deeper/logo.png"
    assert data(fresh.dispatch(MemoryOpRead(uri=logo, encoding=None))) == (root / "sub/deeper/logo.png").read_bytes()
    assert "encoding=None" in failure(fresh.dispatch(MemoryOpRead(uri=logo)), "unsupported")
    assert data(fresh.dispatch(MemoryOpRead(uri=f"{result.uri}/source/guide.md", level="abstract"))) == "# Guide"
    found = fresh.dispatch(MemoryOpFind(query="fresnel lens", target_uri="memory://resources"))
    assert isinstance(found, MemoryFindResult) and [h.uri for h in found.hits] == [f"{result.uri}/source/sub/faq.txt"]
    assert fresh.dispatch(MemoryOpFind(query="lamp PNG")).hits[0].uri != logo  # type: ignore[union-attr]

    ours = MemoryStore.get_or_create(key=key)  # our features on ingested files: delete, then search
    ours.delete(path_of(f"{result.uri}/source/sub/faq.txt"), actor="test")
    ours.save()
    assert opened(key).dispatch(MemoryOpFind(query="fresnel")) == MemoryFindResult(hits=())
    again = opened(key, tmp_path).dispatch(MemoryOpResource(source=str(root), target_uri="memory://resources/manuals"))
    assert again == result  # the same bytes: the same URI, and the deleted file is written again
    newest = MemoryStore.get_or_create(key=key).log(limit=1)[0]  # it alone, and the meta
    assert sorted(newest.wrote) == sorted([path_of(f"{result.uri}/source/sub/faq.txt"), f"{base}/meta.md"])
    found = opened(key).dispatch(MemoryOpFind(query="fresnel"))
    assert isinstance(found, MemoryFindResult) and [h.uri for h in found.hits] == [f"{result.uri}/source/sub/faq.txt"]


def test_an_archive_is_the_commits_own(durable_backend, key):
    store = opened(key)
    done = store.dispatch(MemoryOpCommit(session_id="s", messages=[{"role": "user", "content": "zebra crossing"}]))
    assert isinstance(done, MemoryCommitResult) and done.archived_uri is not None
    failure(store.dispatch(MemoryOpWrite(uri=done.archived_uri, content="forged")), "unauthorized")
    assert store.dispatch(MemoryOpFind(query="zebra")) == MemoryFindResult(hits=())  # as the local backend
    assert json.loads(data(opened(key).dispatch(MemoryOpRead(uri=done.archived_uri)))) == [
        {"role": "user", "content": "zebra crossing"}
    ]
    ours = MemoryStore.get_or_create(key=key)  # our history and audit see the archive as any file
    assert [h.actor for h in ours.history(path_of(done.archived_uri))] == ["openrath"]
    assert ours.search("zebra", include_transcript=True)  # the log's messages stay searchable in our store


def test_an_ingest_into_a_read_only_prefix_is_refused_whole(durable_backend, key, tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("alpha")
    (tmp_path / "d" / "b.txt").write_text("beta")
    store = opened(key, tmp_path, read_only_prefixes=("openrath/resources/frozen",))
    refused = store.dispatch(MemoryOpResource(source=str(tmp_path / "d"), target_uri="memory://resources/frozen"))
    failure(refused, "unauthorized")
    assert not [n for n in durable_backend.objects(key) if n.startswith("openrath/")]
    assert not MemoryStore.get_or_create(key=key).list_paths("openrath")
    ok = store.dispatch(MemoryOpResource(source=str(tmp_path / "d"), target_uri="memory://resources/open"))
    assert isinstance(ok, MemoryWriteResult), ok  # the handle is still usable, nothing of the refusal staged
    landed = sorted(n for n in durable_backend.objects(key) if n.startswith("openrath/"))
    assert len(landed) == 3 and all(n.startswith("openrath/resources/open/") for n in landed)


def test_bad_input_is_refused_with_a_clear_kind(local_backend, key, tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (inside / "escape").symlink_to(outside / "secret.txt")
    (inside / "big.bin").write_bytes(b"x" * 64)
    store = opened(key, inside, resource_max_bytes=32)
    assert "not found" in failure(store.dispatch(MemoryOpResource(source=str(inside / "nope.txt"))), "not_found")
    failure(store.dispatch(MemoryOpResource(source="")), "not_found")
    failure(store.dispatch(MemoryOpResource(source=str(outside / "secret.txt"))), "unauthorized")
    failure(store.dispatch(MemoryOpResource(source=str(inside))), "unauthorized")  # the link leaves the roots
    failure(opened(key).dispatch(MemoryOpResource(source=str(inside / "big.bin"))), "unauthorized")  # no roots
    assert "resource_max_bytes" in failure(
        store.dispatch(MemoryOpResource(source=str(inside / "big.bin"))), "transport"
    )
    for target in ("memory://user/inbox", "memory://bogus", "memory://resources/../x", "file:///tmp"):
        failure(store.dispatch(MemoryOpResource(source=str(inside / "big.bin"), target_uri=target)), "invalid_uri")
    failure(store.dispatch(MemoryOpResource(source="s3://bucket/x")), "unsupported")
    assert MemoryStore.get_or_create(key=key).list_paths() == []  # nothing staged, nothing saved


class _Serve(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/asset.html")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(1.5)
        if self.path in ("/chunked.txt", "/endless", "/trickle"):
            self._stream()
            return
        if self.path != "/asset.html":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def _stream(self) -> None:
        """A body in many small writes: `CHUNKED` (its length announced), an endless one, or a trickle."""
        self.send_response(200)
        if self.path == "/chunked.txt":
            self.send_header("Content-Length", str(len(CHUNKED)))
        self.end_headers()
        try:
            if self.path == "/chunked.txt":
                for at in range(0, len(CHUNKED), 4096):
                    self.wfile.write(CHUNKED[at : at + 4096])
                    self.wfile.flush()
                    time.sleep(0.001)
            elif self.path == "/endless":
                for _ in range(100_000):  # ~6 GB: never reached, the client hangs up over its limit
                    self.wfile.write(b"y" * 65536)
            else:
                for _ in range(100):  # one byte every 0.1 s, 10 s in all
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
        except OSError:
            return  # the client hung up

    def log_message(self, *args, **kwargs) -> None:
        return


@pytest.fixture
def http_base() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Serve)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_url_is_fetched_through_fsspec(local_backend, key, http_base):
    store = opened(key, resource_allowed_http_hosts=["127.0.0.1"], resource_allow_private_hosts=True)
    result = store.dispatch(MemoryOpResource(source=f"{http_base}/asset.html"))
    assert isinstance(result, MemoryWriteResult)
    assert result == MemoryWriteResult(uri=f"memory://resources/{sha16(BODY)}", bytes_written=len(BODY))
    objects = local_backend.objects(key)
    assert objects[f"openrath/resources/{sha16(BODY)}/source.html.md"] == BODY
    assert "127.0.0.1" in objects[f"openrath/resources/{sha16(BODY)}/meta.md"].decode()
    found = opened(key).dispatch(MemoryOpFind(query="lighthouses"))
    assert isinstance(found, MemoryFindResult) and found.hits[0].uri == f"{result.uri}/source.html"
    failure(store.dispatch(MemoryOpResource(source=f"{http_base}/missing")), "not_found")
    failure(store.dispatch(MemoryOpResource(source=f"{http_base}/slow", timeout_seconds=0.3)), "timeout")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    failure(store.dispatch(MemoryOpResource(source=f"http://127.0.0.1:{port}/x")), "transport")
    assert "redirect" in failure(store.dispatch(MemoryOpResource(source=f"{http_base}/moved")), "unauthorized")
    failure(opened(key).dispatch(MemoryOpResource(source=f"{http_base}/asset.html")), "unauthorized")  # no hosts
    private = opened(key, resource_allowed_http_hosts=["127.0.0.1"])  # loopback without the opt-in
    assert "private" in failure(private.dispatch(MemoryOpResource(source=f"{http_base}/asset.html")), "unauthorized")


def test_the_same_calls_on_the_local_backend_and_ours(local_backend, key, tmp_path, monkeypatch):
    """Code written against OpenRath's local backend: the same ops, results of the same types and shapes."""
    monkeypatch.setenv("OPENRATH_HOME", str(tmp_path / "openrath_home"))
    (tmp_path / "note.txt").write_text("hello resource")
    options = {"resource_import_roots": [str(tmp_path)]}
    theirs = LocalMemoryBackend().open(MemoryStoreSpec(options=options))
    ours = opened(key, tmp_path)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    ops = [
        MemoryOpResource(source=str(tmp_path / "note.txt")),
        MemoryOpResource(source=str(tmp_path / "nope.txt")),
        MemoryOpResource(source=str(tmp_path / "note.txt"), target_uri="memory://bogus"),
        MemoryOpCommit(session_id="s-001", messages=messages),
        MemoryOpCommit(session_id="s-001", messages=messages, wait=True),
        MemoryOpCommit(session_id="../x", messages=messages),
        MemoryOpWrite(uri="memory://user/a", content="alpha"),
    ]
    results = [(theirs.dispatch(op), ours.dispatch(op)) for op in ops]
    for (a, b), op in zip(results, ops, strict=True):
        assert type(a) is type(b), (op, a, b)
        if isinstance(a, MemoryExecutionFailure):
            assert a.kind == b.kind, (op, a, b)  # type: ignore[union-attr]
        elif isinstance(a, MemoryCommitResult):
            assert isinstance(b, MemoryCommitResult) and a.extracted_count == b.extracted_count
            assert str(a.archived_uri).rsplit("/", 2)[0] == str(b.archived_uri).rsplit("/", 2)[0]
        else:
            assert a == b, (op, a, b)
    for store in (theirs, ours):
        first, second = (r[store is ours].archived_uri for r in results[3:5])  # type: ignore[union-attr]
        assert first != second
        assert json.loads(data(store.dispatch(MemoryOpRead(uri=str(first))))) == messages
        listing = store.dispatch(MemoryOpList(uri="memory://session/s-001/commits"))
        assert isinstance(listing, MemoryListResult) and len(listing.entries) == 2
        rid = sha16(b"hello resource")
        blob = data(store.dispatch(MemoryOpRead(uri=f"memory://resources/{rid}/source.txt")))
        assert blob == "hello resource"


def test_a_url_is_read_to_its_end_within_its_limits(durable_backend, key, http_base):
    """A body that arrives in many small pieces lands whole; one over ``resource_max_bytes`` (an endless
    stream) is ``transport`` and one slower than ``timeout_seconds`` (a trickle) is ``timeout``, neither
    landing anything."""
    http = {"resource_allowed_http_hosts": ["127.0.0.1"], "resource_allow_private_hosts": True}
    store = opened(key, resource_max_bytes=1_000_000, **http)
    result = store.dispatch(MemoryOpResource(source=f"{http_base}/chunked.txt"))
    assert result == MemoryWriteResult(uri=f"memory://resources/{sha16(CHUNKED)}", bytes_written=len(CHUNKED))
    objects = durable_backend.objects(key)
    assert objects[f"openrath/resources/{sha16(CHUNKED)}/source.txt.md"] == CHUNKED  # every byte, not the first read

    other = f"{key}-limits"
    limited = opened(other, resource_max_bytes=1_000_000, **http)
    endless = limited.dispatch(MemoryOpResource(source=f"{http_base}/endless"))
    assert "resource_max_bytes" in failure(endless, "transport")
    started = time.monotonic()
    failure(limited.dispatch(MemoryOpResource(source=f"{http_base}/trickle", timeout_seconds=1)), "timeout")
    assert time.monotonic() - started < 5
    assert [n for n in durable_backend.objects(other) if n.startswith("openrath/")] == []  # nothing landed
    assert MemoryStore.get_or_create(key=other).list_paths() == []


@pytest.mark.parametrize("as_dir", [False, True], ids=["file", "directory"])
def test_a_file_swapped_for_a_link_after_its_check_is_refused(durable_backend, key, tmp_path, monkeypatch, as_dir):
    """The race of a file replaced by a symlink out of the roots between the policy check and the read,
    made deterministic: the swap runs just before each read. The read refuses it (``unauthorized``) and
    nothing lands; so does a file replaced by another file (not the one checked)."""
    from flyteplugins_memory.adapters.openrath import sources

    inside, outside = tmp_path / "inside", tmp_path / "outside"
    (inside / "d").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET outside the root\n")
    (inside / "d" / "a.txt").write_text("safe\n")
    (inside / "d" / "b.txt").write_text("also safe\n")
    victim = inside / "d" / "a.txt"
    read_file = sources._read_file

    def swapped_first(*args, **kwargs):
        link = victim.with_name("a.txt.link")
        link.symlink_to(outside / "secret.txt")
        link.replace(victim)  # atomically: the checked name is now a link out of the roots
        return read_file(*args, **kwargs)

    monkeypatch.setattr(sources, "_read_file", swapped_first)
    store = opened(key, inside)
    source = inside / "d" if as_dir else victim
    assert "changed" in failure(store.dispatch(MemoryOpResource(source=str(source))), "unauthorized")
    assert [n for n in durable_backend.objects(key) if n.startswith("openrath/")] == []
    assert not any(b"TOPSECRET" in d for d in durable_backend.objects(key).values())
    assert MemoryStore.get_or_create(key=key).list_paths() == []

    victim.unlink()
    victim.write_text("safe\n")  # a plain file again when checked

    def replaced_first(*args, **kwargs):
        other = victim.with_name("a.txt.new")  # made while the checked file exists: another inode
        other.write_text("another file\n")
        other.replace(victim)  # a regular file again, but not the one checked
        return read_file(*args, **kwargs)

    monkeypatch.setattr(sources, "_read_file", replaced_first)
    assert "changed" in failure(store.dispatch(MemoryOpResource(source=str(source))), "unauthorized")
    assert [n for n in durable_backend.objects(key) if n.startswith("openrath/")] == []


def test_a_re_ingest_after_another_handle_purged_a_file_writes_it_again(durable_backend, key, tmp_path):
    """The "already there" check looks at the newest committed state, not this handle's stale view: a file
    another handle purged since is written again (bytes exactly), in storage."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_bytes(b"quartzite lighthouse notes\n")
    (tmp_path / "d" / "b.txt").write_bytes(b"kept as it is\n")
    store = opened(key, tmp_path)
    first = store.dispatch(MemoryOpResource(source=str(tmp_path / "d")))
    assert isinstance(first, MemoryWriteResult)
    rid = first.uri.rsplit("/", 1)[1]
    purged = f"openrath/resources/{rid}/source/a.txt.md"
    assert durable_backend.objects(key)[purged] == b"quartzite lighthouse notes\n"
    MemoryStore.get_or_create(key=key).purge(purged, actor="security", reason="leaked")
    assert purged not in durable_backend.objects(key)

    again = store.dispatch(MemoryOpResource(source=str(tmp_path / "d")))  # the same OpenRath store
    assert again == first
    assert durable_backend.objects(key)[purged] == b"quartzite lighthouse notes\n"
    assert MemoryStore.get_or_create(key=key).read_bytes(purged) == b"quartzite lighthouse notes\n"
