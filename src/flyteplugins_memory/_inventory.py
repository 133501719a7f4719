"""Pure: turn a listing of a store's objects into what the store holds (files, sidecars, versions).

Used for remote listings and for scanning an existing local root alike, so both trust the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._errors import CorruptStore
from ._layout import AUDIT_LOG_PATH, Kind, classify, sidecar_name
from ._manifest import FileEntry, Manifest
from ._paths import MESSAGES_PATH
from ._records import decode_meta, sha256_bytes


@dataclass
class Inventory:
    """The classified objects of one store."""

    files: dict[str, int] = field(default_factory=dict)
    sidecars: set[str] = field(default_factory=set)
    versions: dict[str, list[str]] = field(default_factory=dict)
    has_messages: bool = False
    has_audit_log: bool = False

    def sidecar_of(self, path: str) -> str | None:
        name = sidecar_name(path)
        return name if name in self.sidecars else None

    def bookkeeping(self) -> list[str]:
        """Transcript and audit log, where present."""
        names = [MESSAGES_PATH] if self.has_messages else []
        return names + ([AUDIT_LOG_PATH] if self.has_audit_log else [])

    def objects_to_hydrate(self) -> list[str]:
        """What a full local copy needs: files, their sidecars, transcript and audit log (not versions)."""
        names = list(self.files) + [s for p in self.files if (s := self.sidecar_of(p))]
        return names + self.bookkeeping()


def take_inventory(listing: Mapping[str, int] | Iterable[str]) -> Inventory:
    """Classify every listed name; raises `UnsafeStoreContent` on a hostile one."""
    sizes = listing if isinstance(listing, Mapping) else dict.fromkeys(listing, 0)
    inventory = Inventory()
    for name, size in sizes.items():
        stored = classify(name)
        if stored.kind is Kind.FILE:
            inventory.files[stored.path] = size
        elif stored.kind is Kind.SIDECAR:
            inventory.sidecars.add(stored.name)
        elif stored.kind is Kind.VERSION:
            inventory.versions.setdefault(stored.path, []).append(stored.name)
        elif stored.kind is Kind.MESSAGES:
            inventory.has_messages = True
        elif stored.kind is Kind.AUDIT_LOG:
            inventory.has_audit_log = True
    for names in inventory.versions.values():
        names.sort()
    return inventory


def build_manifest(inventory: Inventory, contents: Mapping[str, bytes]) -> Manifest:
    """Index every file present in `contents` (or with a sidecar there).

    A malformed sidecar does not make the store unopenable: the file is indexed by its content hash and
    the entry remembers the error, which `get_meta` and `current_sha` then raise as `CorruptStore`.
    """
    manifest = Manifest()
    for path in inventory.files:
        sidecar = inventory.sidecar_of(path)
        if sidecar and sidecar in contents:
            try:
                meta = decode_meta(contents[sidecar], expected_path=path)
            except CorruptStore as exc:
                manifest.put(_entry_from_content(path, contents.get(path, b""), meta_error=str(exc)))
                continue
            manifest.put(FileEntry(path, meta.sha256, meta.bytes, meta))
        elif path in contents:
            manifest.put(_entry_from_content(path, contents[path]))
    return manifest


def _entry_from_content(path: str, data: bytes, meta_error: str = "") -> FileEntry:
    return FileEntry(path, sha256_bytes(data), len(data), None, meta_error)
