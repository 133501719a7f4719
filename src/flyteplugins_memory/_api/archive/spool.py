"""Reading an export archive into a local spool directory, checking everything before a byte is stored.

An archive is untrusted input. `spool` reads it once, as a stream (gzip, then tar), and copies each
member into a numbered file of a local directory, counting and hashing as it goes; then it checks the
members against the manifest. Any rule broken raises `UnsafeArchive` with the rule's `reason`, and since
nothing has been written to storage yet, a refused import leaves nothing behind there.

Sizes are counted as the bytes come out of the decompressor, not as headers declare them: the whole
decompressed stream (headers included) may not pass the total limit plus `HEADER_ALLOWANCE`, so a
compression bomb stops there whatever its tar headers claim. Header records that tarfile reads whole into
memory (GNU long names, pax) are bounded far tighter, from their declared size before they are read
(`MAX_HEADER_BYTES`): memory stays small whatever the total limit. The archive is read to its last byte:
a header tarfile cannot parse is refused (tarfile would take it for the end), and after the end only zero
padding and the rest of the gzip stream may follow (`_drain`), so the sha256 is the whole file's. Everything
here blocks: run it in a thread.
"""

from __future__ import annotations

import gzip
import hashlib
import pathlib
import tarfile
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, Self

from ..._rules.archive_format import (
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    Manifest,
    Target,
    logical_name,
    member_target,
    parse_manifest,
)
from ..._rules.paths import file_dir_clashes
from ..._rules.progress import Readable
from ...errors import UnsafeArchive

#: Decompressed bytes allowed beyond the members' data: tar headers, padding, the end marker.
HEADER_ALLOWANCE = 4 << 20
CHUNK = 1 << 20
#: Compressed bytes read after the tar's end marker (the rest of the gzip stream: its padding, trailer).
TRAILER_BYTES = 1 << 20
#: The most bytes of header records one member may carry (GNU long names and links, pax records, 512 per
#: header block counted too): tarfile reads each record whole into memory, and a name is a few KiB at most.
MAX_HEADER_BYTES = 64 << 10
_EXTENSIONS = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


@dataclass(frozen=True)
class Limits:
    """The most decompressed bytes one member, and all of them together, may hold."""

    member: int
    total: int


@dataclass
class Spooled:
    """A checked archive: its manifest, each member's target and spool file, and the archive's sha256."""

    manifest: Manifest
    members: dict[str, tuple[Target, pathlib.Path]] = field(default_factory=dict)
    sha256: str = ""


class _Hashing:
    """Reads through to `raw`, hashing the compressed bytes (the archive's own checksum), refusing once
    `limit` (if set) bytes have been read."""

    def __init__(self, raw: Readable):
        self.raw, self.hash, self.count = raw, hashlib.sha256(), 0
        self.limit: int | None = None

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.hash.update(data)
        self.count += len(data)
        if self.limit is not None and self.count > self.limit:
            raise UnsafeArchive(f"The archive goes on over {TRAILER_BYTES} bytes after its end", reason="not_archive")
        return data


class _CheckedHeader(tarfile.TarInfo):
    """A member header whose extension records are refused, before tarfile reads them, once they pass
    `MAX_HEADER_BYTES` for one member (`_Tar.header_bytes` counts a chain of them), and which refuses sparse
    members (an export writes none; their maps are read block by block without a bound).

    Hooks tarfile's private ``_proc_member`` (and the two sparse readers): the only place a header's
    declared size is known before its record is read. Were it renamed, `_Bounded` still stops the stream."""

    def _proc_member(self, tar: _Tar) -> tarfile.TarInfo:
        if self.type not in _EXTENSIONS:
            tar.header_bytes = 0  # the member a chain of extension records belongs to
        else:
            tar.header_bytes += tarfile.BLOCKSIZE + self.size
            if tar.header_bytes > MAX_HEADER_BYTES:
                raise UnsafeArchive(
                    f"The archive has a tar header record of {self.size} bytes, over {MAX_HEADER_BYTES}",
                    reason="header_too_large",
                )
        return super()._proc_member(tar)  # pyright: ignore[reportAttributeAccessIssue]

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Self:
        try:
            return super().frombuf(buf, encoding, errors)
        except tarfile.HeaderError as exc:
            # past the first member tarfile takes any header it cannot parse (or one cut short) for the
            # archive's end and reads no further: only the stream's end or a zero block may be that
            if buf and buf != bytes(tarfile.BLOCKSIZE):
                raise UnsafeArchive(f"The archive holds a malformed tar header: {exc}", reason="not_archive") from exc
            raise

    def _proc_sparse(self, tar: _Tar) -> tarfile.TarInfo:
        raise UnsafeArchive(f"Archive member {self.name!r} is a sparse file", reason="special_file")

    def _proc_gnusparse_10(self, *_: object) -> None:
        raise UnsafeArchive(f"Archive member {self.name!r} is a sparse file", reason="special_file")


class _Tar(tarfile.TarFile):
    """A tar stream read with `_CheckedHeader`s."""

    tarinfo = _CheckedHeader
    #: bytes of the extension records read so far for the member whose header comes next
    header_bytes = 0


class _Bounded:
    """Reads through to the decompressed stream, refusing once it has yielded more than `limit` bytes."""

    def __init__(self, stream: IO[bytes], limit: int):
        self.stream, self.limit, self.count = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size if size >= 0 else CHUNK)
        self.count += len(data)
        if self.count > self.limit:
            raise UnsafeArchive(
                f"The archive decompresses to more than {self.limit} bytes (a compression bomb?)",
                reason="total_too_large",
            )
        return data


def spool(raw: Readable, into: pathlib.Path, limits: Limits) -> Spooled:
    """Read the archive in `raw` into directory `into` and check it (see the module docstring)."""
    hashing = _Hashing(raw)
    try:
        stream = _Bounded(gzip.GzipFile(fileobj=hashing, mode="rb"), limits.total + HEADER_ALLOWANCE)  # type: ignore[arg-type]
        with _Tar.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
            found, manifest = _read_members(tar, into, limits)
            read_ahead = _read_ahead(tar)
        _drain(hashing, stream, read_ahead)
    except (tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise UnsafeArchive(f"Not a gzip-compressed tar archive: {exc}", reason="not_archive") from exc
    checked = _check_against(manifest, found)
    _refuse_clashes(checked)
    return Spooled(manifest, checked, hashing.hash.hexdigest())


def _read_ahead(tar: tarfile.TarFile) -> bytes:
    """The bytes after the tar's end-of-archive block that tarfile already read from the stream (its
    record buffer: private, hence the getattr; a test pins it)."""
    read = getattr(tar.fileobj, "buf", b"")
    return read if isinstance(read, bytes) else b""


def _drain(hashing: _Hashing, stream: _Bounded, read_ahead: bytes) -> None:
    """Read on from the tar's end to the archive's, so that its sha256 is the whole file's: only the tar's
    zero padding may follow (`read_ahead`, then the rest of the decompressed stream), and only gzip (which
    refuses anything else: `BadGzipFile`), within `TRAILER_BYTES` of compressed input (gzip skips zero
    padding a byte at a time)."""
    hashing.limit = hashing.count + TRAILER_BYTES
    chunk = read_ahead or stream.read(CHUNK)
    while chunk:
        if chunk.strip(b"\0"):
            raise UnsafeArchive("The archive holds data after the end of its tar", reason="not_archive")
        chunk = stream.read(CHUNK)
    if hashing.read(1):  # gzip reads its input to the end; anything it left is not part of the archive
        raise UnsafeArchive("The archive holds data after the end of its gzip stream", reason="not_archive")


def _read_members(tar: tarfile.TarFile, into: pathlib.Path, limits: Limits) -> tuple[dict[str, Any], Manifest]:
    found: dict[str, Any] = {}
    manifest: bytes | None = None
    total = 0
    for index, info in enumerate(tar):
        if manifest is not None:
            raise UnsafeArchive(f"Archive member {info.name!r} follows the manifest", reason="unlisted_member")
        target = _admit(info, found, limits, total)
        total += info.size
        spooled = into / f"{index:08d}"
        sha, size = _copy_out(tar, info, spooled, limits)
        if target is None:
            manifest = spooled.read_bytes()
        else:
            found[info.name] = (target, spooled, sha, size)
    if manifest is None:
        raise UnsafeArchive("The archive has no manifest.json at its end", reason="bad_manifest")
    return found, parse_manifest(manifest)


def _admit(info: tarfile.TarInfo, found: dict[str, Any], limits: Limits, total: int) -> Target | None:
    """The target of member `info` (None for the manifest), if its name, type and size pass the rules."""
    name = info.name
    target = None if name == MANIFEST_NAME else member_target(name)
    if info.issym() or info.islnk():
        raise UnsafeArchive(f"Archive member {name!r} is a link", reason="link")
    if not info.isreg():
        raise UnsafeArchive(f"Archive member {name!r} is not a regular file", reason="special_file")
    if name in found:
        raise UnsafeArchive(f"Archive member {name!r} appears twice", reason="duplicate")
    cap = MAX_MANIFEST_BYTES if target is None else limits.member
    if info.size > cap:
        raise UnsafeArchive(f"Archive member {name!r} holds {info.size} bytes, over {cap}", reason="member_too_large")
    if total + info.size > limits.total:
        raise UnsafeArchive(f"The archive holds more than {limits.total} bytes", reason="total_too_large")
    return target


def _copy_out(tar: tarfile.TarFile, info: tarfile.TarInfo, path: pathlib.Path, limits: Limits) -> tuple[str, int]:
    """Copy member `info` to `path`, returning its sha256 and the bytes actually read."""
    source = tar.extractfile(info)
    assert source is not None  # a regular file always has data
    digest, size = hashlib.sha256(), 0
    with path.open("wb") as out:
        while chunk := source.read(CHUNK):
            size += len(chunk)
            if size > limits.member:
                raise UnsafeArchive(
                    f"Archive member {info.name!r} is over {limits.member} bytes", reason="member_too_large"
                )
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest(), size


def _refuse_clashes(members: dict[str, tuple[Target, pathlib.Path]]) -> None:
    """Refuse a name that is a file and also a directory of another (``store/a.md`` beside
    ``store/a.md/evil.md``): no filesystem holds both, and an object store that does makes a store that
    upstream cannot download. Names as stored, journal ones included: at a bucket root they share a tree."""
    clashes = file_dir_clashes(logical_name(target) for target, _ in members.values())
    if clashes:
        raise UnsafeArchive(
            f"The archive holds {clashes[0]!r} both as a file and as a directory", reason="file_and_directory"
        )


def _check_against(manifest: Manifest, found: dict[str, Any]) -> dict[str, tuple[Target, pathlib.Path]]:
    """The members, once each one is listed in the manifest with its size and sha256, and each listed one
    is there."""
    unlisted = sorted(set(found) - set(manifest.members))
    if unlisted:
        raise UnsafeArchive(f"Archive member {unlisted[0]!r} is not in the manifest", reason="unlisted_member")
    missing = sorted(set(manifest.members) - set(found))
    if missing:
        raise UnsafeArchive(f"The manifest lists {missing[0]!r}, which the archive lacks", reason="missing_member")
    for name, (_, _, sha, size) in found.items():
        entry = manifest.members[name]
        if entry["sha256"] != sha or entry["size"] != size:
            raise UnsafeArchive(f"Archive member {name!r} does not match its checksum", reason="checksum")
    return {name: (target, path) for name, (target, path, _, _) in found.items()}
