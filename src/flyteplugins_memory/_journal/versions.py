"""Version snapshots on demand: listed and read from storage only when asked for, never on open."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .._rules.inventory import take_inventory
from .._rules.layout import Kind, classify, versions_dir_name
from ..errors import InvalidPath, NotText, UnsafeStoreContent, VersionNotFound
from ..storage._contract import ObjectStorage


async def list_versions(remote: ObjectStorage | None, pending: Collection[str], rel: str) -> list[str]:
    """Saved (one listing of the path's version directory) and pending snapshot names of `rel`, oldest first."""
    directory = versions_dir_name(rel)
    saved: list[str] = []
    if remote is not None:
        saved = take_inventory(await remote.list(under=directory)).versions.get(rel, [])
    unsaved = [name for name in pending if name.startswith(directory + "/")]
    return sorted(set(saved) | set(unsaved), key=version_order)


def version_order(name: str) -> tuple[str, int, str, str]:
    """Sort key putting snapshots oldest first: by their second (``<ts>_...``), then by the token ours
    append (microsecond and counter), upstream's unsalted name first within its second."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".txt")
    ts, _, rest = stem.partition("_")
    token = rest.rpartition("_")[2] if "_" in rest else ""
    ours = len(token) == 12 and token[:8].isdigit()
    return (ts, 1 if "_" in rest else 0, token if ours else "", name)


async def read_version(remote: ObjectStorage | None, pending: Mapping[str, bytes], name: str) -> str:
    """Text of the snapshot `name`; `NotText` if it holds binary content (see `read_version_bytes`)."""
    return decode_text(await read_version_bytes(remote, pending, name), name)


def decode_text(data: bytes, name: str) -> str:
    """`data` as UTF-8 text; `NotText` if it is binary content."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(f"{name!r} is not valid UTF-8 text (binary content: read it as bytes)") from exc


async def read_version_bytes(remote: ObjectStorage | None, pending: Mapping[str, bytes], name: str) -> bytes:
    """Bytes of the snapshot `name`, exactly as written (a snapshot of binary content holds its bytes
    under upstream's ``<ts>_<sha>.txt`` name); raises `InvalidPath` for other names and `VersionNotFound`
    if absent."""
    if not names_a_version(name):
        raise InvalidPath(f"{name!r} does not name a version snapshot")
    data = pending.get(name)
    if data is None and remote is not None:
        data = await remote.read(name)
    if data is None:
        raise VersionNotFound(f"No version snapshot {name!r}")
    return data


def names_a_version(name: object) -> bool:
    """Whether the caller's `name` is a snapshot's name (an unsafe one is bad input here, not a corrupt
    store, which is what `classify` says of names it finds in storage)."""
    try:
        return isinstance(name, str) and classify(name).kind is Kind.VERSION
    except UnsafeStoreContent:
        return False
