"""S3 uploads through obstore: the bucket, endpoint and credentials of the s3fs filesystem, less client CPU.

Why: a bulk save is two PutObjects per new file, and on S3 the client's CPU per request decides how fast
it goes. Measured on moto (docs/performance.md): 1,000 create-only PUTs of 1 KiB cost s3fs/aiobotocore
about 2.5 s of client CPU (signing, user agent, endpoint rules; against moto, a new connection each), obstore (Rust,
what flyte itself moves S3 data with) about 0.5 s; and botocore copies a PutObject's body (a 100 MB file
took twice its size in memory) where obstore sends the caller's buffer.

Scope: uploads only, plain and create-only (``If-None-Match: *``, HTTP 412 is "not created"). Uploads
larger than `storage._multipart.THRESHOLD` go as multipart uploads with their parts in parallel, through
s3fs's own client (obstore makes no conditional multipart upload): `storage._multipart`. Reads,
listings, deletes and existence checks stay on s3fs, which remains the seam (`storage._fsio`). Only for an
``s3fs.S3FileSystem`` (plain, or inside the fault injector of `flyteplugins_memory.testing`, whose hook
every upload then passes) whose options this module maps entirely (`writes_for`): explicit keys, an
endpoint and a region, nothing else that changes how s3fs talks to S3. Any other configuration (a
profile, an IAM role, extra request arguments, an ``AWS_*`` setting obstore would read from the
environment and s3fs would not) keeps every request on s3fs, as before.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import fsspec

from . import _multipart
from ._adaptive import get_max_in_flight
from ._backend import class_path

#: s3fs constructor options that change nothing about the requests (or that this module maps itself).
_HARMLESS = frozenset(
    {"max_concurrency", "use_listings_cache", "skip_instance_cache", "asynchronous", "loop", "config_kwargs"}
)
_MAPPED = frozenset({"endpoint_url", "key", "secret", "token", "client_kwargs", "anon"})
#: ``AWS_*`` variables that obstore would read but that the explicit configuration below overrides, or
#: that neither client uses for requests to S3; any other one set keeps uploads on s3fs.
_OVERRIDDEN_ENV = frozenset(
    {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_MAX_ATTEMPTS",
        "AWS_RETRY_MODE",
        "AWS_DEFAULT_OUTPUT",
        "AWS_PAGER",
    }
)

#: Uploads in flight at once per configuration and event loop. Unbounded, a bulk save opened a connection
#: per file at once, overflowing the server's accept queue (moto's: 128): the lost connection attempts
#: came back after the kernel's 1 s retransmission delay, and a 1,000-file save took twice as long.
MAX_IN_FLIGHT = 32

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: How obstore words a failure that may pass: no answer, or a status asking to come back later.
_TRANSIENT = re.compile(r"error sending request|timed out|connection|status code: (408|429|5\d\d)", re.IGNORECASE)

_stores: dict[tuple[str, ...], Any] = {}
_lock = threading.Lock()


def _runtime_running() -> bool:
    """Whether obstore's tokio runtime has started its worker threads in this process (told by their
    names on Linux; elsewhere, whether obstore was imported at all)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return "obstore" in sys.modules
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if comm.read().startswith("tokio-"):
                    return True
        except OSError:
            continue
    return False


#: A process forked after obstore's runtime started has none (its threads are not copied) and an async
#: obstore call there never completes: such a child leaves every request to s3fs.
#: The parent keeps its runtime (and its setting): set just before a fork, put back in the parent after it.
_unusable = False
_before_fork = False


def _note_fork() -> None:
    global _unusable, _before_fork  # noqa: PLW0603 - set in the parent just before a fork, inherited by the child
    _before_fork = _unusable
    _unusable = _unusable or _runtime_running()


def _forked_parent() -> None:
    global _unusable  # noqa: PLW0603 - the parent's runtime threads still run: it goes on using obstore
    _unusable = _before_fork


os.register_at_fork(before=_note_fork, after_in_parent=_forked_parent)


class S3Writes:
    """PutObject (plain and create-only) for one configuration, one obstore client per bucket; large
    uploads as parallel multipart uploads through `fs`, the s3fs filesystem of that configuration."""

    def __init__(
        self,
        endpoint: str,
        region: str,
        key: str,
        secret: str,
        token: str | None,
        *,
        fs: Any = None,
        bind: Callable[[Any], Any] | None = None,
    ):
        self._config = (endpoint, region, key, secret, token or "")
        # the s3fs filesystem, and how to have it on the running loop (`storage._fsio.bound_to_running_loop`,
        # given by the caller: that module imports this one); either missing, every upload is one PUT
        self._fs, self._bind = fs, bind
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    @staticmethod
    def handles(path: str) -> bool:
        """Whether obstore can name `path` (``bucket/key``) exactly as s3fs does: it refuses empty, ``.``
        and ``..`` segments and control characters, which then go through s3fs."""
        bucket, _, key = path.partition("/")
        if _unusable or not bucket or _CONTROL.search(key):
            return False
        return all(segment not in ("", ".", "..") for segment in key.split("/"))

    async def put(self, path: str, data: bytes) -> None:
        """Write `data` at s3fs path `path` (``bucket/key``)."""
        if self._in_parts(data):
            await _multipart.upload(self._parts_client(), path, data, create_only=False)
            return
        await self._put(path, data, "overwrite")

    async def create(self, path: str, data: bytes) -> bool:
        """Write `data` at `path` only if nothing is there (``If-None-Match: *``); False if it was taken."""
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        if self._in_parts(data):
            return await _multipart.upload(self._parts_client(), path, data, create_only=True)
        try:
            await self._put(path, data, "create")
        except (AlreadyExistsError, PreconditionError):
            return False
        return True

    async def _put(self, path: str, data: bytes, mode: str) -> None:
        import obstore
        from obstore.exceptions import BaseError, PermissionDeniedError, UnauthenticatedError

        bucket, _, key = path.partition("/")
        try:
            async with self._slot():
                await obstore.put_async(self._store(bucket), key, data, mode=mode)  # type: ignore[arg-type]
        except (PermissionDeniedError, UnauthenticatedError) as exc:
            raise PermissionError(str(exc)) from exc
        except BaseError as exc:
            if _TRANSIENT.search(str(exc)):  # `_base.retry` tells passing failures by builtin type
                raise ConnectionError(str(exc)) from exc
            raise

    def _in_parts(self, data: bytes) -> bool:
        return self._fs is not None and self._bind is not None and _multipart.is_large(len(data))

    def _parts_client(self) -> _multipart.S3Multipart:
        assert self._bind is not None  # `_in_parts` said so
        return _multipart.S3Multipart(self._bind(self._fs), self._request)

    async def _request(self, op: str, path: str, send: Callable[[], Awaitable[Any]]) -> Any:
        """One request of a multipart upload, holding a slot as a PUT does (each part is a connection)."""
        async with self._slot():
            return await send()

    def through(self, wrapper: Any) -> S3Writes:
        """These uploads, each passed through `wrapper`'s hook (``_through(op, path, call)``, as the fault
        injector of `flyteplugins_memory.testing` has), so a wrapped filesystem sees every call."""
        return _Wrapped(self, wrapper)

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:
            slots = self._slots[loop] = asyncio.Semaphore(max(MAX_IN_FLIGHT, get_max_in_flight()))
        return slots

    def _store(self, bucket: str) -> Any:
        """One client per bucket and configuration for the process: a client holds its connection pool."""
        cache_key = (bucket, *self._config)
        with _lock:
            store = _stores.get(cache_key)
            if store is None:
                store = _stores[cache_key] = _new_store(bucket, *self._config)
        return store


class _Wrapped(S3Writes):
    def __init__(self, inner: S3Writes, wrapper: Any):
        self.__dict__.update(inner.__dict__)
        self._wrapper = wrapper

    async def put(self, path: str, data: bytes) -> None:
        if self._in_parts(data):  # each request of the upload passes the hook (`_request`)
            await super().put(path, data)
            return
        await self._wrapper._through("write", path, super().put(path, data))

    async def create(self, path: str, data: bytes) -> bool:
        if self._in_parts(data):
            return await super().create(path, data)
        _, created = await self._wrapper._through("write", path, super().create(path, data))
        return bool(created)

    async def _request(self, op: str, path: str, send: Callable[[], Awaitable[Any]]) -> Any:
        _, answer = await self._wrapper._through(op, path, super()._request(op, path, send))
        return answer


def _new_store(bucket: str, endpoint: str, region: str, key: str, secret: str, token: str) -> Any:
    from obstore.store import S3Store

    credential = {"access_key_id": key, "secret_access_key": secret, "token": token or None, "expires_at": None}
    # path style, as flyte's own obstore client by default
    config: dict[str, Any] = {"region": region, "virtual_hosted_style_request": False}
    if endpoint:
        config["endpoint"] = endpoint
    return S3Store(
        bucket,
        config=config,  # type: ignore[arg-type]  # S3Config is a TypedDict that is not importable at run time
        client_options={"allow_http": endpoint.startswith("http://")},
        retry_config={"max_retries": 0},  # `storage._fsspec`'s retry policy governs, as for every other call
        credential_provider=lambda: credential,  # type: ignore[arg-type,return-value]  # exactly s3fs's keys
    )


def writes_for(
    fs: fsspec.AbstractFileSystem, bind: Callable[[fsspec.AbstractFileSystem], Any] | None = None
) -> S3Writes | None:
    """obstore uploads equivalent to `fs`'s, or None when `fs` is not a plain s3fs filesystem whose
    configuration maps entirely (see the module docstring), or obstore is missing. With `bind` (`fs` on
    the running loop), large uploads go as multipart uploads through `fs` (`storage._multipart`)."""
    if _unusable or class_path(fs) != "s3fs.core.S3FileSystem":
        return None
    options: Mapping[str, Any] = fs.storage_options
    endpoint = options.get("endpoint_url") or ""
    if set(options) - _HARMLESS - _MAPPED or options.get("anon") or _foreign_env(endpoint):
        return None
    if set(options.get("config_kwargs") or {}) - {"max_pool_connections"}:  # the pool's width changes no request
        return None
    client = options.get("client_kwargs") or {}
    if set(client) - {"region_name"} or not (options.get("key") and options.get("secret")):
        return None
    region = client.get("region_name") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region and endpoint:
        region = "us-east-1"  # what botocore signs with for a custom endpoint and no region
    if not region or not _obstore_available():
        return None  # AWS itself with no known region: s3fs follows region redirects, obstore does not
    return S3Writes(endpoint, region, options["key"], options["secret"], options.get("token"), fs=fs, bind=bind)


def _foreign_env(endpoint: str) -> bool:
    """Whether an ``AWS_*`` setting in the environment would make the two clients differ. A CA bundle
    (botocore verifies TLS with it, obstore with its own roots) only matters where TLS is used."""
    allowed = _OVERRIDDEN_ENV | ({"AWS_CA_BUNDLE"} if endpoint.startswith("http://") else set())
    return any(name.startswith("AWS_") and name not in allowed for name in os.environ)


def _obstore_available() -> bool:
    try:
        import obstore.store  # noqa: F401
    except ImportError:
        return False
    return True
