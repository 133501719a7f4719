"""Which storage backends may hold a store: those whose create-only write we verified to be atomic.

The commit point of a save is one create-only write (`storage._conditional.create_exclusive`). fsspec accepts
``pipe_file(..., mode="create")`` on every filesystem, but its default implementation checks and then
writes, and a filesystem may ignore `mode` altogether: two writers would then both "create" one commit
slot and one save would vanish without an error. So a store opens only on the filesystem classes below
(matched exactly: a subclass may change exactly the behaviour we rely on). Any other backend raises
`UnsupportedBackend` before anything is read or written, unless the user opts in by protocol, with
`allow_unverified_backend` or the ``FLYTEPLUGINS_MEMORY_UNVERIFIED_BACKENDS`` environment variable, and
so accepts that concurrent saves of one key may lose one another there.

Each verified backend is declared in a module of its own (`storage._local`, `_memory`, `_s3`, `_gcs`: its
class, protocols, `Capabilities`, how its filesystem is built and how it creates an object only if absent);
this registry maps a filesystem or a protocol to it. An opted-in backend declares none of the guarantees it
was not verified for. The fault injector of `flyteplugins_memory.testing` is the one
wrapper recognised: it forwards every call to the filesystem it wraps, so it is as verified as that one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

import fsspec
from fsspec.utils import get_protocol

from ..errors import UnsupportedBackend
from ._backend import Backend, class_path
from ._contract import Capabilities
from ._gcs import GCS
from ._local import LOCAL
from ._memory import MEMORY
from ._s3 import S3

__all__ = ["UNVERIFIED_BACKENDS_ENV", "allow_unverified_backend"]

#: Comma-separated protocols (``"abfs,oss"``) allowed although their create-only writes are not verified.
UNVERIFIED_BACKENDS_ENV = "FLYTEPLUGINS_MEMORY_UNVERIFIED_BACKENDS"

#: The verified backends, one module each, by their filesystem class (``module.qualname``, matched exactly).
BACKENDS: dict[str, Backend] = {backend.class_path: backend for backend in (LOCAL, MEMORY, S3, GCS)}
#: Filesystem classes and how each makes a create-only write atomic.
VERIFIED: dict[str, str] = {path: backend.atomic_create for path, backend in BACKENDS.items()}
#: An opted-in backend: nothing verified; assumed shared between processes, as remote storage is.
UNVERIFIED = Capabilities(atomic_create=False, if_match=False, symlinks=False, cross_process=True)
#: Wrappers we ship that forward every call, create-only writes included, to their ``target``.
FORWARDING_WRAPPERS = frozenset({"flyteplugins_memory.testing.faults.FaultyFileSystem"})

_allowed: set[str] = set()
_lock = threading.Lock()


def underlying(fs: fsspec.AbstractFileSystem) -> fsspec.AbstractFileSystem:
    """`fs`, or the filesystem one of our forwarding wrappers wraps (matched by exact class)."""
    while class_path(fs) in FORWARDING_WRAPPERS:
        fs = fs.target  # type: ignore[attr-defined]
    return fs


def is_verified(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether `fs` is exactly one of the filesystem classes whose create-only write we verified."""
    return class_path(underlying(fs)) in VERIFIED


def backend_of(fs: fsspec.AbstractFileSystem) -> Backend | None:
    """The verified backend `fs` is exactly (through our forwarding wrappers), or None."""
    return BACKENDS.get(class_path(underlying(fs)))


def backend_for_protocol(protocol: str) -> Backend | None:
    """The verified backend serving URIs of `protocol` (``s3``, ``gs``...), or None."""
    return next((backend for backend in BACKENDS.values() if protocol in backend.protocols), None)


def capabilities_of(fs: fsspec.AbstractFileSystem) -> Capabilities:
    """What a store on `fs` can rely on: declared per verified backend, none of the guarantees otherwise."""
    backend = backend_of(fs)
    return UNVERIFIED if backend is None else backend.declared()


def allow_unverified_backend(protocol: str, allowed: bool = True) -> bool:
    """Let stores live on `protocol` although its create-only writes are not known to be atomic (or,
    with ``allowed=False``, stop doing so); returns whether it was allowed before.

    Only do this for a backend whose ``pipe_file(path, data, mode="create")`` is atomic, or where one
    writer at a time saves each key: otherwise two concurrent saves can both claim one commit and one
    of them is lost silently. Also settable per process with the environment variable
    ``FLYTEPLUGINS_MEMORY_UNVERIFIED_BACKENDS`` (comma-separated protocols).
    """
    name = _normalized(protocol)
    with _lock:
        before = name in _allowed
        (_allowed.add if allowed else _allowed.discard)(name)
    return before


def allowed_protocols() -> frozenset[str]:
    """Protocols opted in, by `allow_unverified_backend` or the environment variable."""
    from_env = {_normalized(p) for p in os.environ.get(UNVERIFIED_BACKENDS_ENV, "").split(",") if p.strip()}
    with _lock:
        return frozenset(_allowed | from_env)


def require_supported(uri: str, fs: fsspec.AbstractFileSystem) -> None:
    """Raise `UnsupportedBackend` unless `fs` is verified or one of its protocols was opted in."""
    if is_verified(fs):
        return
    protocol = get_protocol(uri)
    if ({protocol} | set(_protocols_of(fs))) & allowed_protocols():
        return
    raise UnsupportedBackend(
        f"Storage backend {class_path(fs)} (for {uri}) is not known to make create-only writes atomic, "
        "which every save relies on (verified: local disk, memory://, s3:// with s3fs, gs:// with gcsfs). "
        "If its pipe_file(..., mode='create') is atomic, or only one writer at a time saves each key, "
        f"opt in with flyteplugins_memory.allow_unverified_backend({protocol!r}) or "
        f"{UNVERIFIED_BACKENDS_ENV}={protocol}."
    )


def _protocols_of(fs: fsspec.AbstractFileSystem) -> Iterable[str]:
    protocol = getattr(fs, "protocol", ())  # a duck-typed wrapper may have none
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _normalized(protocol: str) -> str:
    name = protocol.strip().lower().removesuffix("://")
    if not name:
        raise ValueError(f"A protocol name is required, got {protocol!r}")
    return name
