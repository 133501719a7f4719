"""fsspec options for the filesystems of stores under a URI prefix (an endpoint, credentials, a profile).

By default a store's filesystem is configured from Flyte's storage settings (`storage._fsspec.filesystem_for`).
`set_storage_options` adds keyword arguments for the filesystem of every store whose URI starts with a
prefix, for a backend Flyte does not configure (MinIO or R2 at their own endpoint, Azure's account) or a
test server. The longest matching prefix wins; its options are given to the fsspec filesystem's
constructor, over what Flyte's settings provide.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["set_storage_options"]

_options: dict[str, Mapping[str, Any]] = {}
_lock = threading.Lock()


def set_storage_options(prefix: str, options: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Give the filesystem of every store under `prefix` these fsspec `options`; returns the previous ones.

    ``None`` removes the prefix's options. Matching is by whole path segments: ``s3://bucket`` covers
    ``s3://bucket/agents/...`` but not ``s3://bucket-2/...``. Stores opened before the call keep the
    filesystem they have.

    Example:
        set_storage_options("s3://memories", {"endpoint_url": "http://minio:9000", "key": "k", "secret": "s"})
    """
    if not isinstance(prefix, str) or ("://" not in prefix and not prefix.startswith("/")):
        raise ValueError(f"A URI prefix (s3://bucket, /path) is required, got {prefix!r}")
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"Storage options must be a mapping, got {type(options).__name__}")
    key = prefix.rstrip("/")
    with _lock:
        previous = _options.pop(key, None)
        if options is not None:
            _options[key] = MappingProxyType(dict(options))
    return previous


def storage_options_for(uri: str) -> dict[str, Any]:
    """The options registered for the longest prefix of `uri` (empty if none)."""
    with _lock:
        matches = [p for p in _options if uri == p or uri.startswith(p + "/")]
        return dict(_options[max(matches, key=len)]) if matches else {}
