"""The archive file itself: where `export` writes one and `import_store` reads one, at a local path or an
fsspec URI. Everything here blocks: run it in a thread.

Two promises live here. A backend's own failure while the archive is opened, read or written (botocore's
`NoCredentialsError`, a refused request, a full disk) arrives as `StorageError`, never as the backend's
exception. And a failed export never touches what `dest` held (yesterday's backup): S3 and GCS publish
an object only when its upload completes, so the archive is uploaded to `dest` and a failed upload is
discarded (aborted, and marked closed so that no finalizer completes it later); on any other filesystem
it is written beside `dest` and moved over it once complete (a rename on local disk).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from fsspec.implementations.local import LocalFileSystem

from ...errors import ArchiveExists, ArchiveNotFound, MemoryStoreError, StorageError

__all__ = ["ArchiveOut", "open_archive"]

#: Protocols whose files publish an object only when the upload completes, and whose `discard` aborts it.
UPLOADS_ON_COMPLETION = {"s3", "s3a", "gs", "gcs"}

T = TypeVar("T")


def _translated(what: str, call: Callable[[], T]) -> T:
    """`call()`, with a backend's failure as `StorageError` (ours pass through as they are)."""
    try:
        return call()
    except MemoryStoreError:
        raise
    except Exception as exc:
        raise StorageError(f"{what}: {exc}") from exc


class _Reading:
    """A readable archive whose backend failures are `StorageError`."""

    def __init__(self, raw: Any, source: str):
        self.raw, self.source = raw, source
        size = getattr(raw, "size", None)  # fsspec's files know it
        self.size = size if isinstance(size, int) else 0

    def read(self, size: int = -1, /) -> bytes:
        return _translated(f"Could not read the archive at {self.source}", lambda: self.raw.read(size))

    def close(self) -> None:
        _translated(f"Could not close the archive at {self.source}", self.raw.close)


def open_archive(source: str, filesystem: Any) -> _Reading:
    """The archive at `source` opened for reading (`ArchiveNotFound` if nothing is there)."""
    path = str(filesystem._strip_protocol(source))
    try:
        return _Reading(filesystem.open(path, "rb"), source)
    except FileNotFoundError:
        raise ArchiveNotFound(f"No archive at {source}") from None
    except IsADirectoryError:
        raise ArchiveNotFound(f"No archive at {source}: it is a directory") from None
    except Exception as exc:
        raise StorageError(f"Could not read the archive at {source}: {exc}") from exc


class ArchiveOut:
    """An archive being written to `target`; `publish` makes it the file at `target`, `abandon` drops it."""

    def __init__(self, target: str, filesystem: Any, *, overwrite: bool):
        self.target, self.fs = target, filesystem
        self.path = str(filesystem._strip_protocol(target))
        if not overwrite and _translated(f"Could not reach {target}", lambda: filesystem.exists(self.path)):
            raise ArchiveExists(f"There is already something at {target} (overwrite=True replaces it)")
        self.local = isinstance(filesystem, LocalFileSystem)
        self.direct = bool(set(_as_tuple(filesystem.protocol)) & UPLOADS_ON_COMPLETION)
        # beside `dest` (on local disk one filesystem, so the rename is atomic), under a name no one else uses
        self.written = self.path if self.direct else f"{self.path}.{uuid.uuid4().hex[:12]}.partial"
        self.raw = _translated(f"Could not write the archive at {target}", lambda: filesystem.open(self.written, "wb"))

    def write(self, data: bytes) -> int:
        return _translated(f"Could not write the archive at {self.target}", lambda: self.raw.write(data))

    def publish(self) -> int:
        """Close the archive and put it at `target`; its size in bytes."""
        what = f"Could not write the archive at {self.target}"
        _translated(what, self.raw.close)
        if self.local:
            _translated(what, lambda: os.replace(self.written, self.path))
        elif not self.direct:
            _translated(what, lambda: self.fs.mv(self.written, self.path))
        return int(_translated(what, lambda: self.fs.size(self.path)) or 0)

    def abandon(self) -> None:
        """Best effort after a failure: what was written goes, what `target` held stays."""
        try:
            if self.direct:
                self.raw.discard()  # the upload aborted, never completed
                self.raw.closed = True  # else its finalizer would close it: that completes the upload
            else:
                self.raw.close()
                if self.fs.exists(self.written):
                    self.fs.rm_file(self.written)
        except Exception:
            pass  # the original failure is what the caller must see


def _as_tuple(protocol: str | tuple[str, ...]) -> tuple[str, ...]:
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)
