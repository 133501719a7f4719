"""S3 uploads through obstore (`storage._s3_writes`): used exactly where they reach what s3fs would, create-only
honoured, objects named as s3fs names them, and failures translated so the retry policy applies.
Checked through the backend's own filesystem (s3fs), not through the store."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import quote

import pytest
import s3fs

from faults import Faults, FaultyFileSystem
from flyteplugins_memory import MemoryStore, RetryPolicy, set_retry_policy
from flyteplugins_memory.storage import _fsspec as _storage
from flyteplugins_memory.storage import _s3_writes
from flyteplugins_memory.storage._fsspec import FsspecStorage


def _remote(backend, key: str) -> FsspecStorage:
    return FsspecStorage(backend.store_uri(key))


def _run(coro):
    return asyncio.run(coro)


def _first_writes(*kinds: str):
    """A fault plan: the first writes misbehave as `kinds` say, in order."""
    left = list(kinds)

    def plan(number: int, op: str, path: str) -> str | None:
        return left.pop(0) if op == "write" and left else None

    return plan


def test_a_store_on_s3_uploads_through_obstore(s3_backend, key):
    assert _remote(s3_backend, key)._io.writes is not None


def test_a_bulk_save_lands_every_file_and_sidecar_where_s3fs_names_them(s3_backend, key, monkeypatch):
    calls = []
    real = _s3_writes.S3Writes._put

    async def counted(self, path, data, mode):
        calls.append(mode)
        return await real(self, path, data, mode)

    monkeypatch.setattr(_s3_writes.S3Writes, "_put", counted)
    files = {f"notes/{i:03d} ü #{i}.md": f"note {i}" for i in range(40)}
    store = MemoryStore.create(key=key)
    for path, text in files.items():
        store.write_text(path, text)
    store.save()
    objects = s3_backend.objects(key)
    assert {p: objects[p].decode() for p in files} == files
    for path, text in files.items():
        meta = json.loads(objects[f"meta/{quote(path, safe='')}.json"])
        assert meta["path"] == path and meta["bytes"] == len(text.encode())
    assert calls.count("create") >= len(files) and calls.count("overwrite") >= len(files)
    reopened = MemoryStore.get_or_create(key=key)
    assert {p: reopened.read_text(p) for p in files} == files


def test_a_create_never_overwrites_a_taken_path(s3_backend, key):
    remote = _remote(s3_backend, key)
    s3_backend.put(key, "taken.txt", b"first")
    created = _run(remote.create_many({"taken.txt": b"second", "free.txt": b"mine"}))
    assert created == {"free.txt"}
    assert s3_backend.objects(key) == {"taken.txt": b"first", "free.txt": b"mine"}


def test_of_racing_creates_of_one_path_exactly_one_wins(s3_backend, key):
    remote = _remote(s3_backend, key)

    async def race():
        return await asyncio.gather(*(remote.create_exclusive("slot.json", f"writer {i}".encode()) for i in range(12)))

    won = _run(race())
    assert won.count(True) == 1
    assert s3_backend.objects(key)["slot.json"] == f"writer {won.index(True)}".encode()


def test_a_name_obstore_cannot_hold_goes_through_s3fs(s3_backend, key):
    remote = _remote(s3_backend, key)
    assert not remote._io.writes.handles(remote.full_path("a\x01b.txt"))
    _run(remote.write_many({"a\x01b.txt": b"control", "plain.txt": b"plain"}))
    assert s3_backend.objects(key) == {"a\x01b.txt": b"control", "plain.txt": b"plain"}


def test_an_upload_that_fails_transiently_is_retried_and_lands_once(s3_backend, key, monkeypatch):
    import obstore
    from obstore.exceptions import GenericError

    real, failures = obstore.put_async, []

    async def flaky(store, path, data, **kwargs):
        if not failures:
            failures.append(path)
            raise GenericError("Error performing PUT: HTTP error: error sending request")
        return await real(store, path, data, **kwargs)

    monkeypatch.setattr(obstore, "put_async", flaky)
    previous = set_retry_policy(RetryPolicy(attempts=3, initial_delay=0.0, jitter=False))
    try:
        _run(_remote(s3_backend, key).write_many({"one.txt": b"1"}))
    finally:
        set_retry_policy(previous)
    assert failures and s3_backend.objects(key) == {"one.txt": b"1"}


def test_a_forbidden_upload_is_a_permanent_storage_error(s3_backend, key, monkeypatch):
    import obstore
    from obstore.exceptions import PermissionDeniedError

    async def forbidden(*args, **kwargs):
        raise PermissionDeniedError("Access Denied")

    monkeypatch.setattr(obstore, "put_async", forbidden)
    with pytest.raises(_storage.StorageError) as caught:
        _run(_remote(s3_backend, key).write_many({"one.txt": b"1"}))
    assert isinstance(caught.value.__cause__, PermissionError)
    assert s3_backend.objects(key) == {}


def test_faults_injected_by_the_testing_wrapper_reach_obstore_uploads(s3_backend, key, monkeypatch):
    faults, uploads = Faults(), []
    real, real_put = _storage.filesystem_for, _s3_writes.S3Writes._put
    monkeypatch.setattr(_storage, "filesystem_for", lambda uri: FaultyFileSystem(real(uri), faults))

    async def counted(self, path, data, mode):
        uploads.append(path)
        return await real_put(self, path, data, mode)

    monkeypatch.setattr(_s3_writes.S3Writes, "_put", counted)
    store = MemoryStore.create(key=key)
    store.write_text("a.txt", "old")
    store.save()
    store.write_text("a.txt", "new")
    store.write_text("b.txt", "added")
    faults.arm(_first_writes("lost_reply", "fail"))
    previous = set_retry_policy(RetryPolicy(attempts=4, initial_delay=0.0, jitter=False))
    try:
        store.save()
    finally:
        set_retry_policy(previous)
        faults.clear()
    assert [kind for _, _, _, kind in faults.injected] == ["lost_reply", "fail"]
    assert uploads, "the wrapped store did not upload through obstore"
    reopened = MemoryStore.get_or_create(key=key)
    assert {p: reopened.read_text(p) for p in reopened.list_paths()} == {"a.txt": "new", "b.txt": "added"}
    assert s3_backend.objects(key)["b.txt"] == b"added"


@pytest.mark.parametrize(
    ("options", "env"),
    [
        ({"s3_additional_kwargs": {"ServerSideEncryption": "aws:kms"}}, {}),
        ({"anon": True}, {}),
        ({"key": None, "secret": None}, {}),
        ({"client_kwargs": {"region_name": "us-east-1", "verify": False}}, {}),
        ({}, {"AWS_ENDPOINT_URL": "http://elsewhere:9000"}),
        ({"endpoint_url": "https://minio.example:9000"}, {"AWS_CA_BUNDLE": "/etc/private-ca.pem"}),
        ({"endpoint_url": None, "client_kwargs": {}}, {"AWS_DEFAULT_REGION": "", "AWS_REGION": ""}),
    ],
)
def test_configurations_obstore_would_not_reproduce_stay_on_s3fs(options, env, monkeypatch):
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    for name, value in env.items():
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)
    base = {"endpoint_url": "http://127.0.0.1:1", "key": "k", "secret": "s"}
    base["client_kwargs"] = {"region_name": "us-east-1"}
    config = {k: v for k, v in {**base, **options}.items() if v is not None}
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **config)
    assert _s3_writes.writes_for(fs) is None


def test_the_plain_configuration_maps(monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    fs = s3fs.S3FileSystem(
        skip_instance_cache=True,
        endpoint_url="http://127.0.0.1:1",
        key="k",
        secret="s",
        client_kwargs={"region_name": "eu-west-1"},
    )
    writes = _s3_writes.writes_for(fs)
    assert writes is not None
    assert writes._config == ("http://127.0.0.1:1", "eu-west-1", "k", "s", "")


def test_a_process_forked_after_obstore_started_uploads_through_s3fs(s3_backend, key):
    """obstore's runtime threads are not copied by fork and an async call there never completes: a child
    forked after obstore ran must leave its uploads to s3fs (and they must land)."""
    import os

    _run(_remote(s3_backend, key).write_many({"parent.txt": b"parent"}))  # obstore's runtime is running now
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, report through the pipe and leave at once
        code = 1
        try:
            os.close(read_end)
            import signal

            signal.alarm(60)  # a hang fails the test instead of blocking it
            remote = _remote(s3_backend, key)
            _run(remote.write_many({"child.txt": b"child"}))
            os.write(write_end, b"s3fs" if remote._io.writes is None else b"obstore")
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        said = reader.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and said == b"s3fs"
    assert s3_backend.objects(key) == {"parent.txt": b"parent", "child.txt": b"child"}
