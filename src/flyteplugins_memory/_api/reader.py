"""`MemoryReader`: the read surface every view of a store shares, as a protocol a type checker checks.

A handle (`MemoryStore`), a scope of one (`ScopedStore`, paths relative to its prefix) and the store as of a
commit (`StoreAt`) read files alike: code that only reads (a tool that searches notes, a report, a
check) takes a `MemoryReader` and works on any of them. Each member is an I/O call, like every call of
the store: ``reader.read_text(path)`` blocks, ``await reader.read_text.aio(path)`` awaits.

The members are typed by their results; their parameters are each class's own (the same names and
defaults on all three, which tests/api/test_api.py checks at run time). ``exists`` is left out: on
`MemoryStore` it is also upstream's key-existence classmethod (``MemoryStore.exists(key=...)``), a
different callable.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .._base.syncify import SyncMethod
from .._rules.codecs import MemoryMeta
from ..storage._byte_stream import ByteStream

__all__ = ["MemoryReader"]


@runtime_checkable
class MemoryReader(Protocol):
    """What reads a store's files: `MemoryStore`, `ScopedStore` and `StoreAt` are each one."""

    #: UTF-8 contents of a file, or the default (``""``) when there is none; `NotText` for binary content
    read_text: SyncMethod[Any, ..., str]
    #: contents of a file, or the default (None)
    read_bytes: SyncMethod[Any, ..., bytes | None]
    #: a file as a binary file object read in parts, never held whole (`PathNotFound` when there is none)
    open_bytes: SyncMethod[Any, ..., ByteStream]
    #: JSON-decoded contents of a file, or the default (None) when it is missing or empty
    read_json: SyncMethod[Any, ..., Any]
    #: sorted paths of the files under a directory (``where=``: only those whose metadata matches)
    list_paths: SyncMethod[Any, ..., list[str]]
    #: a file's metadata sidecar, or None
    get_meta: SyncMethod[Any, ..., MemoryMeta | None]
    #: the sha256 of a file's content, or ``""``
    current_sha: SyncMethod[Any, ..., str]
