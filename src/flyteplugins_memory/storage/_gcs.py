"""``gs://`` (``gcs://``): gcsfs's core `GCSFileSystem`, which honors ``STORAGE_EMULATOR_HOST``.

The core class, not ``gcsfs.GCSFileSystem`` (by default its ExtendedGcsFileSystem subclass, which on zonal
buckets writes through an appendable-object stream that ignores ``mode="create"``). Its create-only write is
an upload with ``ifGenerationMatch=0``, which GCS refuses with HTTP 412 when the object exists
(`storage._conditional`). The gcp-storage-emulator the tests use ignores every precondition: against it
the backend declares no atomic create, and requests are not made concurrently (it answers concurrent ones
with errors that gcsfs retries after a second of backoff).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fsspec

from ._backend import Backend
from ._contract import Capabilities

__all__ = ["GCS"]


def _filesystem(options: Mapping[str, Any]) -> fsspec.AbstractFileSystem:
    import gcsfs.core

    return gcsfs.core.GCSFileSystem(**options)


GCS = Backend(
    class_path="gcsfs.core.GCSFileSystem",
    protocols=("gs", "gcs"),
    atomic_create="upload with ifGenerationMatch=0 (HTTP 412 when taken)",
    capabilities=Capabilities(atomic_create=True, if_match=True, symlinks=False, cross_process=True),
    filesystem=_filesystem,
    emulator_env="STORAGE_EMULATOR_HOST",
    emulated=Capabilities(atomic_create=False, if_match=False, symlinks=False, cross_process=True),
)
