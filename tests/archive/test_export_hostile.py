"""`import_store` refuses every kind of hostile archive with `UnsafeArchive` (its `reason` names the rule)
and leaves nothing in storage: absolute paths, '..', symlinks, hardlinks, devices, fifos, duplicates,
members not in the manifest and listed ones missing, checksum mismatches, an oversized member, a total
over the limit, a compression bomb (stopped as it decompresses), not a gzip/tar, an unknown manifest
format. Each archive is built here with `tarfile` from a real export; local disk, the important ones on
S3 (moto) too, with the archive in the bucket."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import tracemalloc
from collections.abc import Callable

import pytest

from flyteplugins_memory import InvalidArgument, MemoryStore, MemoryStoreError, UnsafeArchive
from flyteplugins_memory._api.archive import spool as _archive_spool

Entry = tuple[tarfile.TarInfo, bytes | None]


def exported(key: str, tmp_path) -> tuple[list[tuple[str, bytes]], dict]:
    """The members (manifest aside) and the manifest of a real export of a small store."""
    store = MemoryStore.create(key=key)
    store.write_text("notes/a.md", "a")
    store.save()
    store.export(tmp_path / "real.tar.gz")
    with tarfile.open(tmp_path / "real.tar.gz", "r:gz") as tar:
        read = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    manifest = json.loads(dict(read)["manifest.json"])
    return [(n, d) for n, d in read if n != "manifest.json"], manifest


def regular(name: str, data: bytes) -> Entry:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> Entry:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def listed(manifest: dict, name: str, data: bytes) -> None:
    manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def build(entries: list[Entry], manifest: dict | None) -> bytes:
    """A gzip'd tar of `entries`, then `manifest` (unless None) as its last member."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
        if manifest is not None:
            body = json.dumps(manifest).encode()
            info, _ = regular("manifest.json", body)
            tar.addfile(info, io.BytesIO(body))
    return raw.getvalue()


def hostile(kind: str, members: list[tuple[str, bytes]], manifest: dict) -> tuple[bytes, str, dict]:
    """Archive of hostile `kind`, the reason it must be refused for, and the import's extra arguments."""
    entries = [regular(n, d) for n, d in members]
    evil = b"owned"
    limits: dict = {}
    if kind in ("absolute_path", "parent_path", "unknown_member", "unsafe_path", "file_over_journal_file"):
        name = {
            "absolute_path": "/etc/evil",
            "parent_path": "store/../../evil",
            "unknown_member": "elsewhere/evil",
            "unsafe_path": "store/a//b",
            "file_over_journal_file": "journal/head.json/evil",
        }[kind]
        if kind == "file_over_journal_file":
            kind = "unknown_member"
        entries.append(regular(name, evil))
        listed(manifest, name, evil)
    elif kind in ("symlink", "hardlink"):
        entries.append(special("store/link", tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE, "/etc/passwd"))
        return build(entries, manifest), "link", limits
    elif kind in ("device", "fifo", "directory"):
        kinds = {"device": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE, "directory": tarfile.DIRTYPE}
        entries.append(special("store/dev", kinds[kind]))
        return build(entries, manifest), "special_file", limits
    elif kind in CLASHES:  # a name that is a file and also a directory of another one
        name = CLASHES[kind]
        entries.append(regular(name, evil))
        listed(manifest, name, evil)
        return build(entries, manifest), "file_and_directory", limits
    elif kind == "duplicate":
        entries.append(regular(*members[0]))
    elif kind == "unlisted_member":
        entries.append(regular("store/extra.md", evil))
    elif kind == "missing_member":
        listed(manifest, "store/gone.md", evil)
    elif kind == "checksum":
        name, data = members[-1]
        entries[-1] = regular(name, data[:-1] + bytes([data[-1] ^ 1]))
    elif kind == "member_too_large":
        limits = {"max_member_bytes": max(len(d) for _, d in members) - 1}
    elif kind == "total_too_large":
        limits = {"max_total_bytes": sum(len(d) for _, d in members) - 1}
    elif kind == "unknown_format":
        manifest = {**manifest, "format": 99}
    elif kind == "no_manifest":
        return build(entries, None), "bad_manifest", limits
    return build(entries, manifest), kind, limits


#: beside the exported ``store/notes/a.md`` and ``journal/head.json``
CLASHES = {
    "file_over_file": "store/notes/a.md/evil.md",
    "file_over_directory": "store/notes",
}
#: journal objects no kind of the data map names (`_rules.data_map`): a file over a journal file is one of them
KINDS = [
    "absolute_path",
    "parent_path",
    "unknown_member",
    "unsafe_path",
    "symlink",
    "hardlink",
    "device",
    "fifo",
    "directory",
    "duplicate",
    "unlisted_member",
    "missing_member",
    "checksum",
    "member_too_large",
    "total_too_large",
    "unknown_format",
    "no_manifest",
    "file_over_journal_file",
    *CLASHES,
]
#: the ones also run on S3, with the archive in the bucket
ON_S3 = ["parent_path", "symlink", "duplicate", "checksum", "total_too_large", "file_over_file", "file_over_directory"]


def refused(backend, put: Callable[[bytes], str], data: bytes, reason: str, **limits) -> UnsafeArchive:
    """Import `data` as key ``copy``: refused for `reason`, nothing stored, and the key still free."""
    with pytest.raises(UnsafeArchive) as caught:
        MemoryStore.import_store(put(data), key="copy", **limits)
    assert caught.value.reason == reason, caught.value
    assert isinstance(caught.value, InvalidArgument) and isinstance(caught.value, ValueError)
    assert backend.stored("copy") == {}
    assert not MemoryStore.exists(key="copy")
    return caught.value


def local_put(tmp_path) -> Callable[[bytes], str]:
    def put(data: bytes) -> str:
        (tmp_path / "evil.tar.gz").write_bytes(data)
        return str(tmp_path / "evil.tar.gz")

    return put


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_archive_is_refused_on_local_disk_and_leaves_nothing(local_backend, key, tmp_path, kind):
    members, manifest = exported(key, tmp_path)
    data, reason, limits = hostile(kind, members, manifest)
    refused(local_backend, local_put(tmp_path), data, reason, **limits)


@pytest.mark.parametrize("kind", ON_S3)
def test_hostile_archive_is_refused_on_s3_and_leaves_nothing(s3_backend, key, tmp_path, kind):
    members, manifest = exported(key, tmp_path)
    data, reason, limits = hostile(kind, members, manifest)
    bucket = s3_backend.raw_data_path.split("/")[2]

    def put(body: bytes) -> str:
        s3_backend.fs.pipe_file(f"{bucket}/evil.tar.gz", body)
        return f"s3://{bucket}/evil.tar.gz"

    refused(s3_backend, put, data, reason, **limits)


def test_a_compression_bomb_stops_at_the_limit_as_it_decompresses(local_backend, tmp_path, monkeypatch):
    """64 MiB of zeros in one member compress to about 64 KiB; with a 1 MiB limit the import reads no
    more than the limit plus the header allowance out of the decompressor, whatever the header says."""
    seen: list[int] = []
    original = _archive_spool._Bounded.read

    def counted(self, size: int = -1) -> bytes:
        try:
            return original(self, size)
        finally:
            seen.append(self.count)

    monkeypatch.setattr(_archive_spool._Bounded, "read", counted)
    zeros = 64 << 20
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
        info = tarfile.TarInfo("store/bomb.bin")
        info.size = zeros
        gz.write(info.tobuf())
        for _ in range(zeros // (1 << 20)):
            gz.write(bytes(1 << 20))
    assert len(raw.getvalue()) < zeros // 100
    limit = 1 << 20
    error = refused(
        local_backend,
        local_put(tmp_path),
        raw.getvalue(),
        "member_too_large",
        max_member_bytes=limit,
        max_total_bytes=limit,
    )
    assert "bomb.bin" in str(error)
    assert max(seen) <= 512 + _archive_spool.CHUNK  # refused from its header, before its data


def test_a_bomb_whose_members_each_pass_stops_at_the_total(local_backend, tmp_path, monkeypatch):
    """Many members of 256 KiB of zeros, each under the member limit: stopped once the total passes."""
    entries = [regular(f"store/z{i}.bin", bytes(256 << 10)) for i in range(64)]
    data = build(entries, None)
    error = refused(local_backend, local_put(tmp_path), data, "total_too_large", max_total_bytes=1 << 20)
    assert "1048576" in str(error)


def test_decompressed_stream_is_bounded_beyond_member_data(local_backend, tmp_path, monkeypatch):
    """Bytes that are no member's data (here 40 pax headers of 60 KiB, each under the header cap, before
    1-byte members) count too: the bound on the decompressed stream itself refuses them."""
    monkeypatch.setattr(_archive_spool, "HEADER_ALLOWANCE", 0)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for i in range(40):
            info = tarfile.TarInfo(f"store/{i}.md")
            info.size = 1
            info.pax_headers = {"comment": "x" * (60 << 10)}
            tar.addfile(info, io.BytesIO(b"a"))
    error = refused(local_backend, local_put(tmp_path), raw.getvalue(), "total_too_large", max_total_bytes=1 << 20)
    assert "decompresses to more than" in str(error)


def gzipped_headers(*headers: bytes, tail: int = 0) -> bytes:
    """A gzip stream of raw tar header blocks, then `tail` zero bytes (a declared record's body)."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for header in headers:
            gz.write(header)
        for _ in range(tail >> 20):
            gz.write(bytes(1 << 20))
    return raw.getvalue()


def extension(kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo("././@LongLink" if kind in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK) else "pax")
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


@pytest.mark.parametrize(
    "kind", [tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE], ids=str
)
def test_a_huge_header_record_is_refused_before_tarfile_reads_it(local_backend, tmp_path, monkeypatch, kind):
    """A long-name or pax record declaring 16 MiB is refused from its header: the stream is read no
    further than the record's first bytes (tarfile would read it whole into memory)."""
    seen: list[int] = []
    original = _archive_spool._Bounded.read

    def counted(self, size: int = -1) -> bytes:
        try:
            return original(self, size)
        finally:
            seen.append(self.count)

    monkeypatch.setattr(_archive_spool._Bounded, "read", counted)
    data = gzipped_headers(extension(kind, 16 << 20), tail=16 << 20)
    error = refused(local_backend, local_put(tmp_path), data, "header_too_large")
    assert str(16 << 20) in str(error)
    assert max(seen) <= _archive_spool.CHUNK


def test_a_chain_of_small_header_records_is_refused_as_one(local_backend, tmp_path):
    """Header records each under the cap, chained before one member (tarfile reads each recursively):
    counted together, refused before the recursion or the memory grows."""
    chain = [extension(tarfile.GNUTYPE_LONGNAME, 8 << 10) + bytes(8 << 10) for _ in range(2000)]
    refused(local_backend, local_put(tmp_path), gzipped_headers(*chain), "header_too_large")


def test_a_sparse_member_is_refused(local_backend, tmp_path):
    info = tarfile.TarInfo("store/sparse.bin")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    refused(local_backend, local_put(tmp_path), gzipped_headers(info.tobuf(format=tarfile.GNU_FORMAT)), "special_file")


def test_long_member_names_still_round_trip(local_backend, key, tmp_path):
    """What export writes for a long path (a pax record) passes the header cap."""
    path = "/".join(["d" * 30] * 5) + "/note.md"  # over the 100 bytes of a plain tar name
    store = MemoryStore.create(key=key)
    store.write_text(path, "deep")
    store.save()
    store.export(tmp_path / "a.tar.gz")
    copy = MemoryStore.import_store(tmp_path / "a.tar.gz", key="copy")
    assert MemoryStore.open(key=copy.key).read_text(path) == "deep"


@pytest.mark.parametrize(
    "junk",
    [b"not an archive at all", gzip.compress(b"gzip, but not a tar", mtime=0), b""],
    ids=["not_gzip", "gzip_not_tar", "empty"],  # stable ids: xdist workers must collect the same tests
)
def test_not_a_gzip_tar_is_refused(local_backend, tmp_path, junk):
    refused(local_backend, local_put(tmp_path), junk, "not_archive")


def test_a_manifest_that_is_not_json_or_not_ours_is_refused(local_backend, key, tmp_path):
    members, _ = exported(key, tmp_path)
    entries = [regular(n, d) for n, d in members]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for info, data in [*entries, regular("manifest.json", b"{not json")]:
            tar.addfile(info, io.BytesIO(data or b""))
    refused(local_backend, local_put(tmp_path), raw.getvalue(), "bad_manifest")
    refused(local_backend, local_put(tmp_path), build(entries, {"kind": "other", "format": 1}), "bad_manifest")


def test_unsafe_archive_is_a_typed_memory_store_error():
    error = UnsafeArchive("x", reason="link")
    assert isinstance(error, MemoryStoreError) and isinstance(error, ValueError) and error.reason == "link"


@pytest.mark.parametrize(
    "after",
    [b"JUNK" * 4096, gzip.compress(b"more data in a second gzip member", mtime=0), bytes(2 << 20)],
    ids=["junk", "second_member", "long_zero_padding"],
)
def test_bytes_after_the_archive_are_refused(local_backend, key, tmp_path, after):
    """Whatever follows the tar's end must be the rest of its gzip stream: junk (not gzip), a further gzip
    member holding data, or zero padding past `TRAILER_BYTES` (gzip skips it a byte at a time)."""
    members, manifest = exported(key, tmp_path)
    data = build([regular(n, d) for n, d in members], manifest) + after
    refused(local_backend, local_put(tmp_path), data, "not_archive")


def with_junk_in_its_tar(data: bytes, block: int, *, cut: bool = False) -> bytes:
    """`data` (a gzip'd tar) with ``JUNK`` written `block` blocks after its last member's data (`cut`: the
    tar ends right after the junk, a header cut short)."""
    plain = bytearray(gzip.decompress(data))
    with tarfile.open(fileobj=io.BytesIO(bytes(plain))) as tar:
        last = tar.getmembers()[-1]
    at = last.offset_data + -(-last.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE + block * tarfile.BLOCKSIZE
    plain[at : at + 4] = b"JUNK"
    return gzip.compress(bytes(plain[: at + 4] if cut else plain), mtime=0)


@pytest.mark.parametrize(
    ("block", "cut"),
    [(0, False), (1, False), (5, False), (0, True)],
    ids=["end_header", "second_end_block", "record_padding", "cut_header"],
)
def test_bytes_inside_the_tar_after_its_end_are_refused(local_backend, key, tmp_path, block, cut):
    """Inside the gzip stream, after the last member: tarfile stops at the first block it cannot parse (and
    at a header cut short) as if it were the end, and has read its record's padding ahead; none of it may
    hold anything but zeros. (`record_padding` also pins `_read_ahead` to tarfile's buffer.)"""
    members, manifest = exported(key, tmp_path)
    data = with_junk_in_its_tar(build([regular(n, d) for n, d in members], manifest), block, cut=cut)
    refused(local_backend, local_put(tmp_path), data, "not_archive")


def test_an_archive_padded_with_zeros_inside_and_after_its_gzip_is_imported(local_backend, key, tmp_path):
    """What the rules allow after the tar's end: its zero padding, an empty gzip member, zeros after it."""
    members, manifest = exported(key, tmp_path)
    plain = gzip.decompress(build([regular(n, d) for n, d in members], manifest)) + bytes(1 << 16)
    data = gzip.compress(plain, mtime=0) + gzip.compress(b"", mtime=0) + bytes(64)
    (tmp_path / "padded.tar.gz").write_bytes(data)
    copy = MemoryStore.import_store(tmp_path / "padded.tar.gz", key="copy")
    assert MemoryStore.open(key=copy.key).read_text("notes/a.md") == "a"
    assert copy.audit_tail(1)[-1]["archive_sha256"] == hashlib.sha256(data).hexdigest()


def test_an_import_audits_the_archives_own_sha256(s3_backend, key, tmp_path):
    """Read from the bucket, with the gzip's zero padding (which gzip allows) after it: the audited
    ``archive_sha256`` is the sha256 of the whole object, every byte read."""
    members, manifest = exported(key, tmp_path)
    data = build([regular(n, d) for n, d in members], manifest) + bytes(100)
    bucket = s3_backend.raw_data_path.split("/")[2]
    s3_backend.fs.pipe_file(f"{bucket}/a.tar.gz", data)
    copy = MemoryStore.import_store(f"s3://{bucket}/a.tar.gz", key="copy")
    event = MemoryStore.open(key=copy.key).audit_tail(1)[-1]
    assert event["op"] == "import" and event["archive_sha256"] == hashlib.sha256(data).hexdigest()


def archive_members(path) -> tuple[list[tuple[str, bytes]], dict]:
    with tarfile.open(path, "r:gz") as tar:
        read = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    manifest = json.loads(dict(read)["manifest.json"])
    return [(n, d) for n, d in read if n != "manifest.json"], manifest


def build_archive(members: list[tuple[str, bytes]], manifest: dict) -> bytes:
    """A gzip'd tar of `members` and `manifest` (last), each member listed in it with its checksum."""
    for name, data in members:
        manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in [*members, ("manifest.json", json.dumps(manifest).encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def test_an_import_whose_journal_does_not_open_leaves_nothing_behind(local_backend, key, tmp_path):
    """README: "A refused import stores nothing; one that fails while storing removes what it stored."
    An archive edited by hand (a commit record replaced, its checksum updated in the manifest) passes the
    spool's checks, is copied, and only then fails to open (`CorruptStore`): every object stays, the key
    is taken (``create`` raises `StoreAlreadyExists`) and the store there cannot be opened."""
    source = MemoryStore.create(key=key)
    source.write_text("a.md", "a")
    source.save()
    source.export(tmp_path / "real.tar.gz")
    members, manifest = archive_members(tmp_path / "real.tar.gz")
    edited = [(n, b"{not a commit record" if n.startswith("journal/log/") else d) for n, d in members]
    (tmp_path / "edited.tar.gz").write_bytes(build_archive(edited, manifest))

    with pytest.raises(MemoryStoreError):
        MemoryStore.import_store(str(tmp_path / "edited.tar.gz"), key="copy")
    assert local_backend.stored("copy") == {}
    assert not MemoryStore.exists(key="copy")
    MemoryStore.create(key="copy")  # the key is free again


def test_an_archive_holding_a_file_and_a_directory_of_one_name_is_refused(durable_backend, key, tmp_path):
    """The spool checks each member name on its own, never that ``store/a.md`` and ``store/a.md/evil.md``
    cannot both be objects of a store. On S3 the import stores both: our handle opens, but upstream's
    `MemoryStore` cannot (`FileExistsError` downloading it). On local disk the write fails half-way
    (`StorageError`, not the `UnsafeArchive` an untrusted archive's refusal is). Refused, nothing stored."""
    source = MemoryStore.create(key=key)
    source.write_text("a.md", "a")
    source.save()
    source.export(tmp_path / "real.tar.gz")
    members, manifest = archive_members(tmp_path / "real.tar.gz")
    data = build_archive([*members, ("store/a.md/evil.md", b"evil")], manifest)
    (tmp_path / "clash.tar.gz").write_bytes(data)

    with pytest.raises(UnsafeArchive):
        MemoryStore.import_store(str(tmp_path / "clash.tar.gz"), key="copy")
    assert durable_backend.stored("copy") == {}


def test_a_tar_header_bomb_is_refused_without_holding_it_in_memory(local_backend, tmp_path):
    """A 255 KB archive whose first header is a GNU long-name record declaring 128 MiB (zeros): tarfile
    reads a long name (and a pax header) into memory in full, and `_api.archive.spool._Bounded` only stops
    the stream at ``max_total_bytes`` + 4 MiB (8 GiB by default), so the import holds hundreds of MiB
    (about twice the declared size) before refusing. An archive of ~8 MB gets to the default bound, i.e.
    many GiB of RAM: the compression-bomb defence does not hold for bytes that are no member's data.
    A member name is at most a few KiB; memory must stay bounded far below the total limit."""
    declared = 128 << 20
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        info = tarfile.TarInfo("././@LongLink")
        info.type, info.size = tarfile.GNUTYPE_LONGNAME, declared
        gz.write(info.tobuf(format=tarfile.GNU_FORMAT))
        for _ in range(declared >> 20):
            gz.write(bytes(1 << 20))
    assert len(raw.getvalue()) < 1 << 20
    (tmp_path / "bomb.tar.gz").write_bytes(raw.getvalue())
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArchive):
            MemoryStore.import_store(str(tmp_path / "bomb.tar.gz"), key="copy")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert local_backend.stored("copy") == {}


def test_an_archive_with_bytes_after_its_end_is_refused_or_audited_with_its_own_checksum(local_backend, key, tmp_path):
    """Junk appended after the gzip stream is never read: tarfile stops at the end-of-archive blocks. The
    import is accepted and audits ``archive_sha256`` as the hash of the bytes it happened to read, which
    is not the sha256 of the archive at `src`. Either the archive is refused (it is not a gzip file:
    ``gzip -t`` and `gzip.decompress` reject it) or the audited checksum is the archive's."""
    source = MemoryStore.create(key=key)
    source.write_text("a.md", "a")
    source.save()
    source.export(tmp_path / "real.tar.gz")
    data = (tmp_path / "real.tar.gz").read_bytes() + b"JUNK" * 4096
    (tmp_path / "junk.tar.gz").write_bytes(data)
    try:
        copy = MemoryStore.import_store(str(tmp_path / "junk.tar.gz"), key="copy")
    except UnsafeArchive as refused:
        assert refused.reason == "not_archive"
        assert local_backend.stored("copy") == {}
        return
    event = copy.audit_tail(1)[-1]
    assert event["op"] == "import"
    assert event["archive_sha256"] == hashlib.sha256(data).hexdigest()
