"""The working root in upstream's layout: what a handle writes or reads is there as upstream has it.

Upstream's doc promises that ``store.root`` holds the files, ``meta/`` sidecars, ``audit/log.jsonl`` and
``versions/`` as they are written, and agents run code tools in that directory. So every write and delete
lands here at once (file, sidecar, version snapshot, audit line), and every committed file a handle reads
is cached here with its sidecar. What a handle never touched is fetched by ``prefetch()``.

Every file is replaced atomically (temp file, then rename) and an audit line is one ``write`` call, so a
reader of the root never sees half of one. The functions below block; `RootWriter` runs them, in order,
on one writer thread: a write or delete only queues its mirroring (local files cost far more than the
call itself, and the bytes are safe in memory and, after ``save()``, in storage), and everything that
shows the root to the outside (``store.root``, ``prefetch``, ``flush_messages``, reading a cached file)
waits for the queue first, so whoever looks at the root sees every call made before they looked.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import logging
import os
import pathlib
import shutil
from collections.abc import Callable, Collection, Mapping
from typing import Any

from .._rules.codecs import MemoryMeta, encode_audit_event, encode_meta
from .._rules.layout import AUDIT_LOG_PATH, sidecar_name
from .._rules.writes import WritePlan
from ..storage._workdir import WorkDir

logger = logging.getLogger(__name__)


def _new_writer() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="flyteplugins-memory-root")


#: One thread mirrors every handle's root, in submission order.
_WRITER = _new_writer()


def _renew_writer_after_fork() -> None:
    # a forked child has no copy of the writer thread, yet the executor believes it has an idle one
    global _WRITER  # noqa: PLW0603 - the one module-level executor, replaced only in a forked child
    _WRITER = _new_writer()


os.register_at_fork(after_in_child=_renew_writer_after_fork)

#: Temporary roots of collected handles, removed by the writer once it reaches them.
_DOOMED: collections.deque[pathlib.Path] = collections.deque()
#: Queued mirror operations a handle may have before a write waits for the oldest (the bytes they hold
#: are the handle's unsaved contents anyway, so this bounds bookkeeping, not copies of data).
MAX_QUEUED = 4096
#: A change of at most this many bytes to a root the caller chose is mirrored on the calling thread when
#: nothing of its handle is queued: a few small local writes cost less than two thread hops
#: (docs/decisions/0159).
INLINE_MAX_BYTES = 64 * 1024


class RootWriter:
    """Runs one handle's mirror operations in order, off the caller's path, with a barrier."""

    def __init__(self, on_failure: Callable[[str], None]):
        self._queued: collections.deque[concurrent.futures.Future[Any]] = collections.deque()
        self._on_failure = on_failure

    def later(self, path: str, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        """Queue `fn(*args)`; a failure is logged and reported for `path` (whose copy is then untrusted)."""
        future = _submit(self._guarded, path, fn, *args)
        self._queued.append(future)
        while self._queued and self._queued[0].done():
            self._queued.popleft()
        return future

    async def now(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` after everything queued, and wait for it (its failure is raised)."""
        future = _submit(fn, *args)
        self._queued.append(future)
        return await asyncio.wrap_future(future)

    async def now_or_here(self, size: int, fn: Callable[..., Any], *args: Any) -> Any:
        """`now`, run on the calling thread itself if nothing is queued before it and the `size` bytes it
        writes are few (its order among this handle's operations is the same either way)."""
        self._forget_done()
        if self._queued or size > INLINE_MAX_BYTES:
            return await self.now(fn, *args)
        return fn(*args)

    def soon(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Queue `fn(*args)` after everything queued; its outcome as a future of the running loop, which
        the caller need not await (a callback on it runs on the loop)."""
        future = _submit(fn, *args)
        self._queued.append(future)
        return asyncio.wrap_future(future)

    async def make_room(self) -> None:
        while len(self._queued) >= MAX_QUEUED:
            await asyncio.wrap_future(self._queued.popleft())

    async def settled(self) -> None:
        """Wait until everything queued so far is on disk (or failed)."""
        if self._queued:
            await asyncio.wrap_future(_submit(lambda: None))
            self._forget_done()

    def settle_blocking(self) -> None:
        if self._queued:
            _submit(lambda: None).result()
            self._forget_done()

    def _forget_done(self) -> None:
        # only what has run: operations queued while we waited are still pending
        while self._queued and self._queued[0].done():
            self._queued.popleft()

    def _guarded(self, path: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # the data is safe in memory; only the local copy is missing
            logger.warning("Could not mirror %r into the working root: %s", path, exc)
            self._on_failure(path)


def remove_when_idle(root: pathlib.Path) -> None:
    """Remove a temporary root after everything queued for it has run. Safe to call from a weakref
    finalizer, which may run inside any code (even inside an executor's locked `submit`): it only
    appends to a deque; the next submission, or interpreter exit, does the removal."""
    _DOOMED.append(root)


def _submit(fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
    while _DOOMED:
        _WRITER.submit(shutil.rmtree, _DOOMED.popleft(), True)
    return _WRITER.submit(fn, *args)


@atexit.register
def _remove_doomed() -> None:  # runs after the writer thread has finished its queue
    while _DOOMED:
        shutil.rmtree(_DOOMED.popleft(), ignore_errors=True)


#: Given a path about to be written, the locally cached files no longer in the store that may stand in
#: its way (a file where one of its directories goes, or files below where it goes).
StaleAround = Callable[[str], Collection[str]]


def record_change(workdir: WorkDir, plan: WritePlan, stale: StaleAround) -> None:
    """Mirror one write or delete: the file (or its removal) first, so a failure records nothing else."""
    if plan.record is None:
        workdir.remove(plan.path)
        workdir.remove(sidecar_name(plan.path))
    else:
        _replace(workdir, plan.path, plan.data, stale)
        if plan.meta is not None:
            workdir.write(sidecar_name(plan.path), encode_meta(plan.meta))
    if plan.version:
        workdir.write(plan.version, plan.data)
    if plan.event:
        workdir.append(AUDIT_LOG_PATH, encode_audit_event(plan.event))


def cache_committed(
    workdir: WorkDir,
    contents: Mapping[str, bytes],
    metas: Mapping[str, MemoryMeta | None],
    stale: StaleAround,
    still_current: Callable[[str, bytes], bool],
) -> list[str]:
    """Cache verified committed files and their sidecars, best effort (the bytes reach the reader either
    way); returns the paths cached. A path the handle wrote or deleted since the fetch began is skipped
    (checked here, on the writer thread, after that write's own mirroring ran)."""
    stored = []
    for path, data in contents.items():
        if not still_current(path, data):
            continue
        try:
            _replace(workdir, path, data, stale)
            if (meta := metas.get(path)) is not None:
                workdir.write(sidecar_name(path), encode_meta(meta))
        except OSError as exc:
            logger.warning("Could not cache %r locally (it is fetched again when read): %s", path, exc)
            continue
        stored.append(path)
    return stored


def forget(workdir: WorkDir, paths: Collection[str]) -> None:
    """Remove the local copies (file and sidecar) of `paths`, best effort."""
    for path in paths:
        try:
            workdir.remove(path)
            workdir.remove(sidecar_name(path))
        except OSError as exc:
            logger.warning("Could not remove the local copy of %r: %s", path, exc)


def remove_tree(workdir: WorkDir, name: str) -> None:
    """Remove a directory of the root (a purged path's local version snapshots)."""
    shutil.rmtree(workdir.resolve(name), ignore_errors=True)


def write_text_file(workdir: WorkDir, name: str, data: bytes) -> None:
    """Replace one bookkeeping file of the root (``messages.json``, ``audit/log.jsonl``)."""
    workdir.write(name, data)


def _replace(workdir: WorkDir, path: str, data: bytes, stale: StaleAround) -> None:
    """Write `path`; if cached files that are no longer part of the store stand in the way (``x``
    where ``x/y`` goes, or ``x/y`` where ``x`` goes), remove them and try once more."""
    try:
        workdir.write(path, data)
    except OSError:
        blocking = [p for p in stale(path) if workdir.exists(p)]
        if not blocking:
            raise
        for name in blocking:
            workdir.remove(name)
        workdir.write(path, data)
