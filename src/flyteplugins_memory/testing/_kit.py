"""What a conformance test stands on: where stores go (`StoreRoot`), and `Kit`, which opens stores there
and looks at what landed through the backend's own fsspec filesystem, not through the store."""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pytest
from fsspec.utils import get_protocol

from .._api.store import MemoryStore
from .._rules.journal_location import journal_root
from .._rules.location import storage_root, store_path
from ..storage._contract import Capabilities
from ..storage._fsspec import FsspecStorage, filesystem_for
from ..storage._options import set_storage_options

T = TypeVar("T")

#: Protocols whose objects upstream's store (through ``flyte.storage``) can reach, given credentials.
UPSTREAM_PROTOCOLS = frozenset({"file", "local", "s3", "gs", "gcs"})


def objects_under(fs: Any, prefix: str) -> dict[str, bytes]:
    """Every object under `prefix`, by its name below it, read through `fs` itself (listing cache
    dropped first, so what another writer just stored shows)."""
    fs.invalidate_cache()
    try:
        paths = fs.find(prefix)
    except FileNotFoundError:
        return {}
    return {p[len(prefix) + 1 :]: cast(bytes, fs.cat_file(p)) for p in paths}


@dataclass(frozen=True)
class StoreRoot:
    """Where the kit may create stores, and how to reach it.

    Attributes:
        uri: A raw-data location, as a Flyte task would have it (``s3://bucket/raw``, ``/tmp/x``). Stores
            go where ours and upstream's put them: ``{storage_root}/agents/memory-store/v0/...`` (for an
            object store, ``storage_root`` is the bucket), under an org of the kit's own and a project
            unique to the test, so runs never meet.
        storage_options: fsspec options for the filesystem at `uri` (endpoint, credentials), given to
            the store through `flyteplugins_memory.set_storage_options` for the test's duration.
        upstream: Whether upstream's ``flyte.ai.agents.MemoryStore`` can reach `uri` with the current
            ``flyte.init`` configuration (its storage goes through ``flyte.storage``, not these options).
            None decides by protocol (local disk, s3, gs); False skips the interop tests, naming `why_not`.
        why_not: Why upstream cannot reach `uri` (shown in the skip reason).
    """

    uri: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    upstream: bool | None = None
    why_not: str = ""

    def upstream_reachable(self) -> bool:
        if self.upstream is not None:
            return self.upstream
        return get_protocol(self.uri) in UPSTREAM_PROTOCOLS


class Kit:
    """Stores under one `StoreRoot` for one test, and a direct view of what they hold in storage."""

    org = "conformance-kit"
    domain = "development"

    def __init__(self, root: StoreRoot):
        self.root = root
        self.project = f"p-{uuid.uuid4().hex[:12]}"
        self.fs = filesystem_for(root.uri)  # the backend's own filesystem, built from the same options
        self.capabilities: Capabilities = FsspecStorage(self.uri("probe")).capabilities

    # -- stores -------------------------------------------------------------------------------------------

    def where(self) -> dict[str, str]:
        return {"org": self.org, "project": self.project, "domain": self.domain}

    def create(self, key: str, **options: Any) -> MemoryStore:
        return MemoryStore.create(key=key, **self.where(), **options)

    def open(self, key: str, **options: Any) -> MemoryStore:
        return MemoryStore.get_or_create(key=key, **self.where(), **options)

    def upstream(self, key: str, **options: Any) -> Any:
        from flyte.ai.agents import MemoryStore as UpstreamStore

        return UpstreamStore.get_or_create(key=key, **self.where(), **options)

    def uri(self, key: str) -> str:
        return store_path(storage_root(self.root.uri), self.org, self.project, self.domain, key)

    # -- what landed in storage, read directly ------------------------------------------------------------

    def prefix(self, key: str) -> str:
        return str(self.fs._strip_protocol(self.uri(key))).rstrip("/")

    def objects(self, key: str) -> dict[str, bytes]:
        """Every object under the store prefix of `key` (what upstream downloads), by relative name."""
        return self._walk(self.prefix(key))

    def journal(self, key: str) -> dict[str, bytes]:
        """Every object of the journal of `key` (it lives outside the store prefix)."""
        return self._walk(journal_root(self.prefix(key)))

    def upstream_view(self, key: str) -> dict[str, bytes]:
        """The objects of upstream's layout (an old journal inside the prefix excluded)."""
        return {n: d for n, d in self.objects(key).items() if not n.startswith("meta/.journal/")}

    def put(self, key: str, name: str, data: bytes) -> None:
        """Place an object under the store prefix of `key` behind the store's back."""
        self.fs.pipe_file(f"{self.prefix(key)}/{name}", data)

    def _walk(self, prefix: str) -> dict[str, bytes]:
        return objects_under(self.fs, prefix)

    # -- capabilities -------------------------------------------------------------------------------------

    def need(self, capability: str, why: str) -> None:
        """Skip the test, naming `capability`, unless the backend declares it."""
        if not getattr(self.capabilities, capability):
            pytest.skip(f"backend lacks capability {capability!r} ({type(self.fs).__name__}): {why}")


@contextlib.contextmanager
def bound(root: StoreRoot) -> Iterator[None]:
    """Flyte's raw-data path set to `root.uri`, and its storage options registered, for a test."""
    from flyte._context import internal_ctx
    from flyte.models import RawDataPath

    previous = set_storage_options(root.uri, root.storage_options) if root.storage_options else None
    try:
        with internal_ctx().new_raw_data_path(RawDataPath(path=root.uri)):
            yield
    finally:
        if root.storage_options:
            set_storage_options(root.uri, previous)


def at_once(calls: list[Callable[[], T]]) -> list[T | BaseException]:
    """Run `calls` in threads at the same time (each in a copy of this context: the raw-data path);
    their results or exceptions, in order."""

    def run(call: Callable[[], T], context: contextvars.Context) -> T | BaseException:
        try:
            return context.run(call)
        except BaseException as exc:
            return exc

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(run, call, contextvars.copy_context()) for call in calls]
        return [f.result() for f in futures]
