"""Large S3 writes as parallel multipart uploads (`storage._multipart`): the bytes land exactly, create-only
is decided on the completion, a failure leaves no object and no upload, the parts go out in one wave and
each request passes the fault injector. "Large" is made small here: parts of 5 MiB (S3's smallest) and an
11 MiB object on moto; the upload's own logic runs against an in-memory client."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os

import pytest

from faults import Faults, FaultyFileSystem, at_call
from flyteplugins_memory import MemoryStore, RetryPolicy, set_retry_policy
from flyteplugins_memory._base.syncify import run_sync
from flyteplugins_memory.errors import StorageError
from flyteplugins_memory.storage import _multipart
from flyteplugins_memory.storage._fsspec import FsspecStorage, filesystem_for

MIB = 1024 * 1024


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 5 MiB (S3 refuses smaller ones but the last) and multipart above 10 MiB."""
    monkeypatch.setattr(_multipart, "PART_SIZE", 5 * MIB)
    monkeypatch.setattr(_multipart, "THRESHOLD", 10 * MIB)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _uploads(backend, key: str) -> list[dict]:
    """The incomplete multipart uploads in the test's bucket, asked of S3 itself."""
    bucket = backend.prefix(key).split("/", 1)[0]
    return backend.fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", [])


def _parts_of(backend, key: str, name: str) -> int:
    """How many parts the object was uploaded in, from its ETag (``"<md5>-<parts>"``); 0 for one PUT."""
    etag = backend.fs.info(backend.location(key, name))["ETag"].strip('"')
    return int(etag.rsplit("-", 1)[1]) if "-" in etag else 0


def _faulty(backend, key: str, faults: Faults) -> FsspecStorage:
    uri = backend.store_uri(key)
    return FsspecStorage(uri, FaultyFileSystem(filesystem_for(uri), faults))


# -- the upload's logic, against an in-memory client ---------------------------------------------------


class _Client:
    """A multipart client keeping parts in memory; `fail_part` fails that part, `taken` refuses completion."""

    def __init__(self, fail_part: int | None = None, taken: bool = False):
        self.fail_part, self.taken = fail_part, taken
        self.open: dict[str, dict[int, memoryview]] = {}
        self.objects: dict[str, bytes] = {}
        self.cancelled: list[int] = []

    async def start(self, path: str) -> str:
        upload_id = f"u{len(self.open)}"
        self.open[upload_id] = {}
        return upload_id

    async def part(self, path: str, upload_id: str, number: int, body: memoryview) -> str:
        try:
            await asyncio.sleep(0 if number == self.fail_part else 0.01)
        except asyncio.CancelledError:
            self.cancelled.append(number)
            raise
        if number == self.fail_part:
            raise ConnectionResetError(f"part {number}")
        self.open[upload_id][number] = body
        return f"etag-{number}"

    async def complete(self, path: str, upload_id: str, etags: list[str], *, create_only: bool) -> bool:
        if create_only and (self.taken or path in self.objects):
            return False
        parts = self.open.pop(upload_id)
        assert etags == [f"etag-{n}" for n in sorted(parts)]
        self.objects[path] = b"".join(bytes(parts[n]) for n in sorted(parts))
        return True

    async def abort(self, path: str, upload_id: str) -> None:
        self.open.pop(upload_id, None)


def test_parts_are_at_most_max_parts_of_at_least_part_size_and_cover_the_object_once():
    size = 100 * 1000 * 1000
    bounds = _multipart.part_bounds(size)
    assert len(bounds) == 12 and all(end - start == _multipart.PART_SIZE for start, end in bounds[:-1])
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    huge = _multipart.part_bounds(4 * 1024**3)  # 4 GiB: 16 parts of 256 MiB, still one wave
    assert len(huge) == _multipart.MAX_PARTS and huge[0] == (0, 256 * MIB)
    assert not _multipart.is_large(_multipart.THRESHOLD) and _multipart.is_large(_multipart.THRESHOLD + 1)


def test_parts_are_views_of_the_callers_bytes_and_join_to_them(monkeypatch):
    monkeypatch.setattr(_multipart, "PART_SIZE", 1000)
    data, client = os.urandom(3500), _Client()
    assert run_sync(_multipart.upload, client, "b/k", data, create_only=True)
    assert client.objects == {"b/k": data} and not client.open


def test_a_failed_part_cancels_the_others_and_aborts_the_upload(monkeypatch):
    monkeypatch.setattr(_multipart, "PART_SIZE", 1000)
    client = _Client(fail_part=2)
    with pytest.raises(ConnectionResetError):
        run_sync(_multipart.upload, client, "b/k", os.urandom(4000), create_only=False)
    assert client.objects == {} and client.open == {}
    assert sorted(client.cancelled) == [1, 3, 4]  # none still running when the upload was aborted


def test_a_refused_completion_is_not_created_and_leaves_no_upload(monkeypatch):
    monkeypatch.setattr(_multipart, "PART_SIZE", 1000)
    client = _Client(taken=True)
    assert run_sync(_multipart.upload, client, "b/k", os.urandom(2500), create_only=True) is False
    assert client.objects == {} and client.open == {}


# -- on S3 (moto) -----------------------------------------------------------------------------------------


def test_a_large_create_lands_exactly_with_its_parts_in_one_wave(s3_backend, key, small_parts):
    data = os.urandom(11 * MIB)  # parts of 5, 5 and 1 MiB
    faults = Faults(latency=0.002)
    storage = _faulty(s3_backend, key, faults)
    with faults.measure() as measured:
        assert run_sync(storage.create_exclusive, "big.bin", data) is True
    # start, the three parts at once, complete
    assert measured.requests == 5 and measured.waves == 3, measured.describe()
    assert len(measured.in_wave(2)) == 3 and faults.peak == 3, measured.describe()
    assert _sha(s3_backend.objects(key)["big.bin"]) == _sha(data)
    assert _parts_of(s3_backend, key, "big.bin") == 3
    assert _uploads(s3_backend, key) == []


def test_a_large_create_of_a_taken_path_is_refused_and_leaves_no_upload(s3_backend, key, small_parts):
    s3_backend.put(key, "big.bin", b"first")
    storage = FsspecStorage(s3_backend.store_uri(key))
    assert run_sync(storage.create_exclusive, "big.bin", os.urandom(11 * MIB)) is False
    assert s3_backend.objects(key) == {"big.bin": b"first"}
    assert _uploads(s3_backend, key) == []


def test_a_failed_part_leaves_no_object_and_no_upload(s3_backend, key, small_parts):
    faults = Faults()
    storage = _faulty(s3_backend, key, faults)
    faults.arm(at_call(3, "permanent"))  # the second part: forbidden, not retried
    with pytest.raises(StorageError):
        run_sync(storage.create_exclusive, "big.bin", os.urandom(11 * MIB))
    assert [(op, kind) for _, op, _, kind in faults.injected] == [("write", "permanent")]
    assert s3_backend.objects(key) == {}
    assert _uploads(s3_backend, key) == []


def test_a_large_overwrite_interrupted_by_a_transient_fault_is_retried_whole_and_lands(s3_backend, key, small_parts):
    s3_backend.put(key, "big.bin", b"old")
    data = os.urandom(11 * MIB)
    faults = Faults()
    storage = _faulty(s3_backend, key, faults)
    faults.arm(at_call(5, "lost_reply"))  # the completion lands, its answer is lost: the upload runs again
    previous = set_retry_policy(RetryPolicy(attempts=3, initial_delay=0.0, jitter=False))
    try:
        run_sync(storage.write_many, {"big.bin": data})
    finally:
        set_retry_policy(previous)
    assert [kind for *_, kind in faults.injected] == ["lost_reply"]
    assert _sha(s3_backend.objects(key)["big.bin"]) == _sha(data)
    assert _uploads(s3_backend, key) == []


def test_a_store_saves_and_reads_back_a_large_file_written_in_parts(s3_backend, key, small_parts):
    data = os.urandom(11 * MIB)
    store = MemoryStore.create(key=key)
    store.write_bytes("big.bin", data)
    store.save()
    got = MemoryStore.get_or_create(key=key).read_bytes("big.bin")
    assert got is not None and _sha(got) == _sha(data)
    assert _parts_of(s3_backend, key, "big.bin") == 3  # uploaded in parts
    assert _uploads(s3_backend, key) == []


def test_a_process_that_forked_keeps_its_uploads_and_their_parts(s3_backend, key):
    """Only a child forked after obstore started loses its runtime; the parent goes on using it (and with
    it, multipart uploads: a fork once sent every later upload of the parent to s3fs's single PUT)."""
    storage = FsspecStorage(s3_backend.store_uri(key))
    run_sync(storage.write_many, {"before.txt": b"1"})  # obstore's runtime is running now
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert getattr(FsspecStorage(s3_backend.store_uri(key))._io, "writes", None) is not None


@pytest.mark.parametrize("request_number", [1, 3, 5])  # the start, a part, the completion
def test_a_large_create_interrupted_at_any_request_leaves_nothing_or_the_whole_object(
    s3_backend, key, small_parts, request_number
):
    """A request of the upload (of start, three parts, completion) taking effect and then losing its reply,
    with no retry: the create fails, and S3 holds no object or exactly the bytes. Only a lost reply to the
    start leaves an upload behind: no id came back to abort it (it holds no parts; decision 0163)."""
    data = os.urandom(11 * MIB)
    faults = Faults()
    storage = _faulty(s3_backend, key, faults)
    faults.arm(at_call(request_number, "lost_reply"))
    previous = set_retry_policy(RetryPolicy(attempts=1))
    try:
        with pytest.raises(StorageError):
            run_sync(storage.create_exclusive, "big.bin", data)
    finally:
        set_retry_policy(previous)
    held = s3_backend.objects(key).get("big.bin")
    assert (held is None) if request_number < 5 else (held is not None and _sha(held) == _sha(data))
    left = _uploads(s3_backend, key)
    assert len(left) == (1 if request_number == 1 else 0), left


def test_a_save_of_a_large_file_sends_its_parts_in_one_wave(round_trips, durable_backend, key, small_parts):
    """Counted by the `round_trips` fixture: on S3 the new file's upload is its start, its three parts in one
    wave, and its completion (two round trips more than one PUT, whatever the size); the save's other requests
    keep their waves. Local disk writes it in one call."""
    store = MemoryStore.create(key=key)
    store.write_text("small.txt", "x")
    store.save()
    store.write_bytes("big.bin", os.urandom(11 * MIB))
    with round_trips.measure() as measured:
        store.save()
    upload = [call for call in measured.calls if call.path.endswith("/big.bin") and call.op == "write"]
    if durable_backend.name == "s3":
        waves = sorted({call.wave for call in upload})
        assert len(upload) == 5 and len(waves) == 3, measured.describe()
        assert [len([c for c in upload if c.wave == w]) for w in waves] == [1, 3, 1], measured.describe()
        assert measured.waves == 5, measured.describe()  # the upload's 3, the commit, projection and head
    else:
        assert len(upload) == 1 and measured.waves == 3, measured.describe()


def test_a_completion_racing_another_write_409_is_retried_whole_and_lands(s3_backend, key, small_parts, monkeypatch):
    """S3 answers a conditional completion that races another write of the key with 409
    ``ConditionalRequestConflict`` ("retry"); s3fs raises it as ``OSError(EIO)``: a passing failure, not a refusal."""
    import s3fs
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    data = os.urandom(11 * MIB)
    real, conflicts = s3fs.S3FileSystem._call_s3, [1]

    async def call_s3(self, method, *args, **kwargs):
        if method == "complete_multipart_upload" and conflicts:
            conflicts.pop()
            error = {"Code": "ConditionalRequestConflict", "Message": "A conflicting operation is in progress"}
            response = {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 409}}
            raise translate_boto_error(ClientError(response, "CompleteMultipartUpload"))
        return await real(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", call_s3)
    storage = FsspecStorage(s3_backend.store_uri(key))
    previous = set_retry_policy(RetryPolicy(attempts=3, initial_delay=0.0, jitter=False))
    try:
        assert run_sync(storage.create_exclusive, "big.bin", data) is True
    finally:
        set_retry_policy(previous)
    assert conflicts == [] and _sha(s3_backend.objects(key)["big.bin"]) == _sha(data)
    assert _uploads(s3_backend, key) == []
