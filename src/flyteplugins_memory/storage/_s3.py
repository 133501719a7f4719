"""``s3://``: s3fs's `S3FileSystem`, configured from Flyte's storage settings (or the ``FLYTE_AWS_*``
environment) under the options set for the prefix (`set_storage_options`, which win).

Its create-only write is a ``PutObject`` with ``If-None-Match: *`` (s3fs ``mode="create"``), which S3 refuses
with HTTP 412 when the object exists (`storage._conditional`); it also offers conditional overwrites
(``If-Match``). Uploads go through obstore where the configuration allows it (`storage._s3_writes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import fsspec

from ._adaptive import get_max_in_flight
from ._backend import Backend
from ._contract import Capabilities

__all__ = ["S3"]


def _filesystem(options: Mapping[str, Any]) -> fsspec.AbstractFileSystem:
    import s3fs

    # max_concurrency=1: otherwise every GET is preceded by a HEAD (and a LIST when the object is
    # missing) to decide on a ranged parallel download, tripling the requests of an open. A connection pool
    # as wide as the requests we let fly (`storage._adaptive`): aiobotocore's default of 10 would queue them.
    pool = {"config_kwargs": {"max_pool_connections": get_max_in_flight()}}
    return s3fs.S3FileSystem(**{"max_concurrency": 1, **pool, **_flyte_options(), **options})


def _flyte_options() -> dict[str, Any]:
    """s3fs options from Flyte's storage settings (``flyte.init(storage=flyte.storage.S3(...))``), else
    from the environment (``S3.auto()``)."""
    import flyte.storage
    from flyte._initialize import get_storage
    from flyte.errors import InitializationError

    try:
        config = get_storage()
    except InitializationError:
        config = None
    if not isinstance(config, flyte.storage.S3):
        config = flyte.storage.S3.auto()
    options: dict[str, Any] = {}
    if config.endpoint:
        options["endpoint_url"] = config.endpoint
    if config.access_key_id and config.secret_access_key:
        options["key"], options["secret"] = config.access_key_id, config.secret_access_key
    if config.region:
        options["client_kwargs"] = {"region_name": config.region}
    return options


S3 = Backend(
    class_path="s3fs.core.S3FileSystem",
    protocols=("s3",),
    atomic_create="PutObject with If-None-Match: * (HTTP 412 when taken)",
    capabilities=Capabilities(atomic_create=True, if_match=True, symlinks=False, cross_process=True),
    filesystem=_filesystem,
)
