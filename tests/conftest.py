"""Shared fixtures: the four storage backends, each with an independent view of what landed in storage.

S3 runs against a session-scoped moto server and GCS against gcp-storage-emulator, both on 127.0.0.1
with an OS-assigned port; nothing leaves the machine. What the fixtures build lives in ``tests/support/``
(on ``sys.path`` through pyproject's ``pythonpath``): `backends.Backend` and `backends.make_backend`.
"""

from __future__ import annotations

import contextvars
import os
import uuid
from collections.abc import Iterator

import pytest

import flyteplugins_memory
from backends import Backend, free_port, make_backend
from clock import Clock
from flyteplugins_memory.testing.moto import atomic_conditional_puts

# a developer's shell may opt in to `install()` (FLYTEPLUGINS_MEMORY_INSTALL): the suite starts from upstream's
# names, as CI does (the tests of `install()` set it themselves, in a child process or by calling it)
os.environ.pop(flyteplugins_memory.INSTALL_ENV, None)
flyteplugins_memory.uninstall()

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import ThreadedWSGIServer

    atomic_conditional_puts()  # as S3 decides them; see flyteplugins_memory.testing.moto
    # werkzeug listens with a backlog of 128: a bulk save's burst of new connections (one per upload in
    # flight, `storage._adaptive`) overflowed it, and each lost SYN came back after the kernel's 1 s. S3 has
    # no such queue to overflow.
    ThreadedWSGIServer.request_queue_size = 4096
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ["STORAGE_EMULATOR_HOST"] = endpoint
    yield endpoint
    server.stop()


@pytest.fixture
def raw_data_context():
    """Return a function that binds the Flyte raw-data path for the rest of the test."""
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath

    stack = []

    def bind(path: str) -> None:
        manager = internal_ctx().new_raw_data_path(RawDataPath(path=path))
        manager.__enter__()
        stack.append(manager)

    yield bind
    while stack:
        stack.pop().__exit__(None, None, None)


def _bound(name: str, request, tmp_path, bind) -> Backend:
    """Backend `name`, with Flyte's raw-data path bound to it for the rest of the test."""
    chosen = make_backend(name, tmp_path, request)
    bind(chosen.raw_data_path)
    return chosen


@pytest.fixture(params=["local", "memory", "s3", "gcs"])
def backend(request, tmp_path, raw_data_context) -> Backend:
    return _bound(request.param, request, tmp_path, raw_data_context)


def _one_backend(name: str):
    """The fixture ``<name>_backend``: that one backend, for tests that need it and no other."""

    @pytest.fixture(name=f"{name}_backend")
    def one(request, tmp_path, raw_data_context) -> Backend:
        return _bound(name, request, tmp_path, raw_data_context)

    return one


local_backend = _one_backend("local")
memory_backend = _one_backend("memory")
s3_backend = _one_backend("s3")
gcs_backend = _one_backend("gcs")


@pytest.fixture(params=["local_backend", "s3_backend"])
def durable_backend(request) -> Backend:
    """Local disk, then moto S3: two backends whose stores outlive the process (``memory://`` does not),
    one of each kind; GCS runs in `backend`'s four. The one fixture of every test that runs on both."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def durable_backend_and_endpoint(durable_backend, moto_endpoint) -> tuple[Backend, str | None]:
    """`durable_backend`, with the S3 endpoint (None locally) that a child process needs to reach it."""
    return durable_backend, (moto_endpoint if durable_backend.name == "s3" else None)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """Gc's clock and the commit path's monotonic time, moved forward by the test (the model of the whole
    store) instead of by sleeping."""
    from flyteplugins_memory._journal import commit as _commit
    from flyteplugins_memory._journal import gc as _gc

    moved = Clock()
    monkeypatch.setattr(_gc, "clock", moved)
    monkeypatch.setattr(_commit, "time", moved)
    # checkpoint every few commits, so saves, opens and refreshes cross checkpoints all the time
    monkeypatch.setattr(_commit, "CHECKPOINT_COMMITS", 3)
    return moved


@pytest.fixture
def key() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


class IOCounter:
    """Counts the object operations the store asks of storage, by kind (one per object touched)."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, str]] = []

    def reset(self) -> None:
        self.ops.clear()

    def count(self, kind: str | None = None) -> int:
        return sum(1 for k, _ in self.ops if kind is None or k == kind)

    def names(self, kind: str) -> list[str]:
        return [n for k, n in self.ops if k == kind]


#: inside a bulk call of `io_counter` (which counts its objects once, however it makes them)
_in_bulk: contextvars.ContextVar[bool] = contextvars.ContextVar("in_bulk", default=False)


@pytest.fixture
def io_counter(monkeypatch) -> IOCounter:
    from flyteplugins_memory.storage._fsspec import FsspecStorage
    from helpers import logical_names

    counter = IOCounter()

    def wrap(method: str, kind: str, names_of, bulk: bool = False):
        original = getattr(FsspecStorage, method)

        async def counted(self, *args, **kwargs):
            if not _in_bulk.get():  # per task: a save runs a bulk call beside single ones (`_journal.commit`)
                counter.ops.extend((kind, n) for n in logical_names(self, names_of(*args, **kwargs)))
            if not bulk:
                return await original(self, *args, **kwargs)
            token = _in_bulk.set(True)
            try:
                return await original(self, *args, **kwargs)
            finally:
                _in_bulk.reset(token)

        monkeypatch.setattr(FsspecStorage, method, counted)

    wrap("read", "get", lambda name: [name])
    wrap("read_many", "get", list)
    wrap("write_many", "put", list)
    wrap("create_exclusive", "put", lambda name, data: [name])
    wrap("create_many", "put", list, bulk=True)  # one create per object (`_journal.preserve`'s copies)
    wrap("exists", "head", lambda name: [name])
    wrap("stat", "list", lambda under="": [under])
    wrap("remove_many", "delete", list)
    wrap("remove_all", "delete", list)
    copy_checked = FsspecStorage.copy_checked

    async def copied(self, name, target, sha256):  # counted only where the backend copies (local disk)
        result = await copy_checked(self, name, target, sha256)
        if result is not None and not _in_bulk.get():
            counter.ops.extend(("copy", n) for n in logical_names(self, [name]))
        return result

    monkeypatch.setattr(FsspecStorage, "copy_checked", copied)
    return counter


#: The long walks and multi-process runs: `make test-slow` runs them (``-m slow``), `make test` the rest
#: (``-m "not slow"``), so that `make test` stays inside its 10-minute budget on 2 cores. `.ci/run` runs both.
SLOW_FILES = {"test_faults.py", "test_multiprocess.py", "test_load.py", "test_model.py", "test_bulk_faults.py"}
SLOW_TESTS = {
    "test_log_reads_the_same_on_200_commits_as_on_20",
    "test_a_store_the_release_before_wrote_opens_saves_and_logs_here",
    "test_a_handle_of_the_release_before_cannot_commit_after_this_version",
    # partitioned checkpoints: the hostile corpus and races (the counts of open/save/checkpoint stay fast)
    "test_a_hostile_part_is_refused_and_nothing_is_written",
    "test_a_path_under_a_file_that_a_hostile_part_also_holds_as_a_directory_is_refused",
    "test_a_refresh_racing_a_lookup_never_meets_an_unloaded_part",
    "test_a_store_the_previous_version_wrote_opens_and_saves_here",
    "test_the_previous_version_refuses_a_partitioned_store_as_too_new",
    "test_a_handle_whose_checkpoint_gc_collected_gets_state_collected_for_its_parts",
    "test_gc_benchmark_prints_the_short_history_beside_the_long_one",
}
#: single parametrizations whose walk over S3 costs minutes on a busy 2-core machine (their local runs stay)
SLOW_ITEMS = {
    # make test's 10 minutes: the S3, GCS and memory runs of its longest tests (their local runs stay)
    "test_the_whole_store_matches_the_model[s3_backend]",
    "test_the_store_window_is_used_by_saves_at_checkpoints[gcs]",
    "test_gc_with_an_empty_window_keeps_only_the_newest_state[gcs]",
    "test_hostile_store_gives_a_typed_error_or_a_safe_result[s3-huge-transcript]",
    "test_hostile_store_gives_a_typed_error_or_a_safe_result[memory-huge-transcript]",
    "test_quickstart[s3]",
    "test_purge_removes_labels_from_index_parts_and_recuts_them[s3_backend]",
    "test_purge_removes_an_accepted_proposals_text_and_discards_the_paths_drafts[s3_backend]",
    # 1,000-file stores on S3, counted (their local runs stay)
    "test_open_list_and_transcript_of_1000_files_take_2_round_trips[s3_backend]",
    "test_open_and_full_listing_of_a_1000_file_store_is_5_requests[s3_backend]",
    "test_a_bulk_save_costs_at_most_two_requests_per_file[s3_backend]",
    "test_a_move_that_dies_at_any_step_leaves_an_openable_store[s3_backend]",
    "test_benchmark_prints_a_side_by_side_table",
    "test_export_benchmark_prints_its_table",
    # gc over long histories: the other backends' runs stay
    "test_gc_costs_what_it_removes_not_the_history[gcs]",
    "test_gc_with_an_empty_window_keeps_only_the_newest_state[s3]",
    # gc under the retention policy killed at every storage call: the local "permanent" walk stays
    "test_gc_killed_at_any_storage_call_loses_nothing_and_a_second_gc_finishes[local_backend-lost_reply]",
    "test_gc_killed_at_any_storage_call_loses_nothing_and_a_second_gc_finishes[s3_backend-permanent]",
    "test_gc_killed_at_any_storage_call_loses_nothing_and_a_second_gc_finishes[s3_backend-lost_reply]",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES or item.originalname in SLOW_TESTS or item.name in SLOW_ITEMS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def storage_faults(monkeypatch):
    """A `Faults` plan every storage call goes through (disarmed until a test arms it), with two quick
    attempts per call: for tests of what a call that fails leaves behind."""
    from flyteplugins_memory import RetryPolicy, set_retry_policy
    from flyteplugins_memory.storage import _fsspec as _storage
    from flyteplugins_memory.testing.faults import Faults, FaultyFileSystem

    faults = Faults()
    real = _storage.filesystem_for
    monkeypatch.setattr(_storage, "filesystem_for", lambda uri: FaultyFileSystem(real(uri), faults))
    previous = set_retry_policy(RetryPolicy(attempts=2, initial_delay=0.0, max_delay=0.0, jitter=False))
    yield faults
    set_retry_policy(previous)


@pytest.fixture
def round_trips(durable_backend, monkeypatch):
    """Every storage call of `durable_backend` counted with its wave (`Faults.measure`: requests and
    sequential round trips, never times); each call waits 2 ms first, so calls issued together overlap."""
    from flyteplugins_memory.storage import _fsspec as _storage
    from flyteplugins_memory.testing.faults import Faults, FaultyFileSystem

    faults = Faults(latency=0.002)
    real = _storage.filesystem_for
    monkeypatch.setattr(_storage, "filesystem_for", lambda uri: FaultyFileSystem(real(uri), faults))
    return faults


@pytest.fixture
def small_index_parts(monkeypatch):
    """Index parts of a few KiB (so none is named in the head's open hint): a checkpoint of a few dozen files
    names several, and a few hundred files make the many-part index of a store a hundred times larger."""
    from flyteplugins_memory._rules import parts as _parts

    monkeypatch.setattr(_parts, "PART_TARGET_BYTES", 2048)
    monkeypatch.setattr(_parts, "PART_MAX_BYTES", 4096)
    monkeypatch.setattr(_parts, "PART_MIN_BYTES", 512)
    monkeypatch.setattr(_parts, "INLINE_MAX_BYTES", 2048)
