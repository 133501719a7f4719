"""Local disk (``/path``, ``file://``): fsspec's `LocalFileSystem`, creating parent directories as it writes.

Its create-only write links a fully written temp file into place: ``link()`` fails if the name is taken, so
of two writers exactly one creates it, and no reader ever sees half an object. Local disk can hold symlinks,
which the store refuses wherever it reads or lists (`Capabilities.symlinks`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ._backend import Backend
from ._contract import Capabilities
from ._workdir import new_file

__all__ = ["LOCAL"]


def _filesystem(options: Mapping[str, Any]) -> fsspec.AbstractFileSystem:
    return LocalFileSystem(auto_mkdir=True)  # the prefix's options configure remote filesystems only


def _create(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> bool:
    temp = os.path.join(os.path.dirname(path), f".~fpm-{uuid.uuid4().hex}")
    with new_file(temp) as handle:
        handle.write(data)
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(temp)
    return True


LOCAL = Backend(
    class_path="fsspec.implementations.local.LocalFileSystem",
    protocols=("file", "local"),
    atomic_create="temp file linked into place; link() fails if taken",
    capabilities=Capabilities(atomic_create=True, if_match=False, symlinks=True, cross_process=True),
    filesystem=_filesystem,
    create=_create,
)
