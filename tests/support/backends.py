"""The storage backends under test: where stores live, and a filesystem that inspects storage directly.

`make_backend` builds one backend by name (local disk, ``memory://``, moto S3, the GCS emulator) and points
Flyte at it; conftest's fixtures (``backend``, ``durable_backend``, ``local_backend``, ...) call it. A
`Backend` reads what landed in storage with its own filesystem, never through the store under test.
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field

import fsspec

__all__ = [
    "ORG",
    "PROJECT",
    "DOMAIN",
    "JOURNAL",
    "LOCAL_CAPS",
    "Backend",
    "free_port",
    "make_backend",
]

ORG, PROJECT, DOMAIN = "acme", "research", "development"
#: logical prefix of journal object names (``_rules.layout.JOURNAL_DIR``)
JOURNAL = "meta/.journal"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Backend:
    """One storage backend under test: where stores live, and a filesystem to inspect them directly."""

    name: str
    raw_data_path: str
    fs: fsspec.AbstractFileSystem
    #: what this backend can do; tests of a capability it lacks say why they do not run
    capabilities: frozenset[str] = field(default_factory=frozenset)

    def store_uri(self, key: str) -> str:
        from flyteplugins_memory._rules.location import storage_root, store_path

        return store_path(storage_root(self.raw_data_path), ORG, PROJECT, DOMAIN, key)

    def prefix(self, key: str) -> str:
        """The store prefix of `key` as this backend's filesystem names it (no protocol)."""
        return self.fs._strip_protocol(self.store_uri(key)).rstrip("/")

    def journal_prefix(self, key: str) -> str:
        """Where the journal of `key` lives: outside the store prefix (see ``_rules.journal_location``)."""
        from flyteplugins_memory._rules.journal_location import journal_root

        return journal_root(self.prefix(key))

    def location(self, key: str, name: str, old: bool = False) -> str:
        """The full path of object `name`; journal names (``meta/.journal/...``) are logical and live at
        the journal prefix, unless `old` asks for the old journal inside the store prefix."""
        if name.startswith(JOURNAL + "/") and not old:
            return self.journal_prefix(key) + name[len(JOURNAL) :]
        return f"{self.prefix(key)}/{name}"

    def _walk(self, prefix: str) -> dict[str, bytes]:
        from flyteplugins_memory.testing._kit import objects_under  # the kit's own view of storage

        return objects_under(self.fs, prefix)

    def objects(self, key: str) -> dict[str, bytes]:
        """Every object under the store prefix of `key` (what upstream downloads), read directly."""
        return self._walk(self.prefix(key))

    def upstream_view(self, key: str) -> dict[str, bytes]:
        """The objects upstream's layout defines (everything under the prefix but an old ``meta/.journal/``)."""
        return {n: d for n, d in self.objects(key).items() if not n.startswith(JOURNAL + "/")}

    def journal(self, key: str) -> dict[str, bytes]:
        """Every object of the journal of `key`, by logical name (``meta/.journal/...``)."""
        return {f"{JOURNAL}/{n}": d for n, d in self._walk(self.journal_prefix(key)).items()}

    def old_journal(self, key: str) -> dict[str, bytes]:
        """What is left in the old journal location inside the store prefix (fences, after a move)."""
        return {n: d for n, d in self.objects(key).items() if n.startswith(JOURNAL + "/")}

    def stored(self, key: str) -> dict[str, bytes]:
        """Everything the store of `key` has in storage: the store prefix and the journal."""
        return {
            **{f"store:{n}": d for n, d in self.objects(key).items()},
            **{f"journal:{n}": d for n, d in self.journal(key).items()},
        }

    def put(self, key: str, name: str, data: bytes, old: bool = False) -> None:
        """Place an object into the store of `key` behind the store's back (journal names: see `location`)."""
        self.fs.pipe_file(self.location(key, name, old=old), data)

    def remove(self, key: str, name: str, old: bool = False) -> None:
        self.fs.rm_file(self.location(key, name, old=old))


#: symlinks: only local disk has them; exclusive_create: create-only writes are atomic (the
#: gcp-storage-emulator ignores ifGenerationMatch, so two "creates" of one object both succeed there)
LOCAL_CAPS = frozenset({"symlinks", "exclusive_create"})


def _init_flyte(storage: object | None = None) -> None:
    import flyte

    flyte.init(org=ORG, project=PROJECT, domain=DOMAIN, storage=storage)


def make_backend(name: str, tmp_path, request) -> Backend:
    from fsspec.implementations.local import LocalFileSystem

    bucket = f"b-{uuid.uuid4().hex[:12]}"
    if name == "local":
        _init_flyte()
        return Backend(name, str(tmp_path / "raw_data" / "run-1"), LocalFileSystem(auto_mkdir=True), LOCAL_CAPS)
    if name == "memory":
        _init_flyte()
        return Backend(name, f"memory://{bucket}/raw", fsspec.filesystem("memory"), frozenset({"exclusive_create"}))
    if name == "s3":
        import flyte.storage
        import s3fs

        endpoint = request.getfixturevalue("moto_endpoint")
        _init_flyte(
            flyte.storage.S3(
                endpoint=endpoint, access_key_id="testing", secret_access_key="testing", region="us-east-1"
            )
        )
        fs = s3fs.S3FileSystem(
            endpoint_url=endpoint, key="testing", secret="testing", use_listings_cache=False, skip_instance_cache=True
        )
        fs.mkdir(bucket)
        return Backend(name, f"s3://{bucket}/w6/raw/rd/run-1", fs, frozenset({"exclusive_create"}))
    if name == "gcs":
        import gcsfs

        request.getfixturevalue("gcs_endpoint")
        _init_flyte()
        fs = gcsfs.GCSFileSystem(use_listings_cache=False, skip_instance_cache=True)
        fs.mkdir(bucket)
        return Backend(name, f"gs://{bucket}/raw/rd/run-1", fs)
    raise ValueError(name)
