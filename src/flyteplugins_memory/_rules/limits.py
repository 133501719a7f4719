"""Pure: whether every name a path is stored under fits the limits of where it is stored.

A file at `path` is stored under several names, in the store and in the handle's local working root
(which has upstream's layout on every backend, because agents run code tools in it):

    <path>                                                  its own segments
    meta/<quote(path, safe="")>.json                        its sidecar: ONE segment, and quoting can
                                                            triple a byte (``/`` is ``%2F``, ``é`` is ``%C3%A9``)
    versions/<quote(path, safe="")>/<ts>_<sha>[_<salt>].txt its version snapshots
    .~fpm-<32 hex>                                          temp files beside them while written (fixed length)

Local file systems allow 255 bytes per segment and 4,095 per path; S3 and GCS allow 1,024 bytes per
object key (everything after the bucket, the store prefix included). A path whose names would not fit is
refused with `InvalidPath` when it is written (or, when the store's location is not known yet, when it is
saved, before anything is uploaded), instead of failing in the middle of a save with "File name too long"
and leaving upstream's view without the file. Version names count even for stores without versions: a
later handle with ``keep_versions=True`` must be able to write the same path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from fsspec.core import split_protocol

from ..errors import InvalidPath
from .layout import sidecar_name
from .writes import longest_version_name

#: Bytes per file or directory name on local disk (Linux, macOS); upstream's layout is on local disk too.
NAME_MAX = 255
#: Bytes of a whole local path (Linux's PATH_MAX of 4,096 counts the terminating NUL).
LOCAL_PATH_MAX = 4095
#: Bytes of an object key on S3 and of an object name on GCS (the bucket does not count).
OBJECT_KEY_MAX = 1024
#: Temp files are ``.~fpm-<uuid4 hex>`` in the target's directory
#: (see `storage._workdir`, `storage._conditional`, `storage._fsspec`).
TEMP_NAME_BYTES = len(".~fpm-") + 32


@dataclass(frozen=True)
class KeyLimit:
    """How long a full stored name may be on one backend."""

    max_bytes: int
    #: the first segment of the path names the bucket, which is not part of the key (S3, GCS)
    bucket_first: bool = False
    #: each name is first written as a fixed-length temp file in the same directory (local disk)
    temp_beside: bool = False


#: By protocol; a backend not listed (one opted in with `allow_unverified_backend`) gets the object-store
#: limit counted over its whole path, the strictest reading. ``memory://`` has no limit.
KEY_LIMITS: dict[str | None, KeyLimit | None] = {
    None: KeyLimit(LOCAL_PATH_MAX, temp_beside=True),
    "file": KeyLimit(LOCAL_PATH_MAX, temp_beside=True),
    "local": KeyLimit(LOCAL_PATH_MAX, temp_beside=True),
    "memory": None,
    "s3": KeyLimit(OBJECT_KEY_MAX, bucket_first=True),
    "s3a": KeyLimit(OBJECT_KEY_MAX, bucket_first=True),
    "gs": KeyLimit(OBJECT_KEY_MAX, bucket_first=True),
    "gcs": KeyLimit(OBJECT_KEY_MAX, bucket_first=True),
}


def stored_names(rel: str) -> dict[str, str]:
    """The names a normalized path is stored under, by what they are (the longest version name possible)."""
    version = longest_version_name(rel)
    return {"file": rel, "sidecar": sidecar_name(rel), "version snapshot": version}


def check_path_fits(rel: str, remote_uri: str | None) -> None:
    """Raise `InvalidPath` if a name of `rel` is too long locally, or (if known) in the store at `remote_uri`."""
    names = stored_names(rel)
    size = len if rel.isascii() else _size  # every name of an ASCII path is ASCII: a byte per character
    for what, name in names.items():
        longest = max(name.split("/"), key=size)
        if size(longest) > NAME_MAX:
            raise InvalidPath(
                f"Path {_short(rel)} is too long to store: its {what} name {_short(longest)} has "
                f"{_size(longest)} bytes, over the {NAME_MAX}-byte limit of a file name"
            )
    if remote_uri is not None:
        _check_keys(rel, names, remote_uri, size)


def check_paths_fit(paths: Iterable[str], remote_uri: str) -> None:
    """`check_path_fits` for each of `paths`, in the store at `remote_uri`."""
    for rel in paths:
        check_path_fits(rel, remote_uri)


def written_paths(changes: Mapping[str, object | None]) -> list[str]:
    """The paths a set of changes writes (a deletion, None, writes nothing under the path's names)."""
    return [path for path, record in changes.items() if record is not None]


@functools.lru_cache(maxsize=64)
def _key_space(remote_uri: str) -> tuple[KeyLimit | None, str]:
    """The name limit of the store at `remote_uri` and the prefix its names are keyed under (a handle
    checks every write against one store: parsed once)."""
    protocol, path = split_protocol(remote_uri.rstrip("/"))
    limit = KEY_LIMITS.get(protocol, KeyLimit(OBJECT_KEY_MAX))
    if limit is None:
        return None, ""
    return limit, path.partition("/")[2] if limit.bucket_first else path


def _check_keys(rel: str, names: dict[str, str], remote_uri: str, size: Callable[[str], int]) -> None:
    limit, prefix = _key_space(remote_uri)
    if limit is None:
        return
    if not prefix.isascii():
        size = _size
    for what, name in names.items():
        key = f"{prefix}/{name}" if prefix else name
        key_size = size(key)
        if limit.temp_beside:
            directory, _, base = key.rpartition("/")
            key_size = size(directory) + 1 + max(size(base), TEMP_NAME_BYTES)
        if key_size > limit.max_bytes:
            raise InvalidPath(
                f"Path {_short(rel)} is too long to store at {_short(remote_uri)}: its {what} would be a "
                f"{key_size}-byte name, over the backend's limit of {limit.max_bytes} bytes"
            )


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _short(text: str, keep: int = 60) -> str:
    return repr(text) if len(text) <= keep else repr(text[: keep - 3] + "...")
