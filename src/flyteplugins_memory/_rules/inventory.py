"""Pure: turn a listing of an upstream-layout store into file records.

Used when importing a store that upstream wrote (it has no journal) and when indexing an existing local
root, so both trust the same rules: every name is classified (hostile ones refused), every sidecar parsed
strictly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import CorruptStore, UnsafeStoreContent
from .codecs import decode_meta, sha256_bytes
from .journal_objects import FileEntry
from .layout import AUDIT_LOG_PATH, Kind, classify, sidecar_name
from .paths import MESSAGES_PATH, file_dir_clashes


@dataclass
class Inventory:
    """The classified objects of one store in upstream's layout."""

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

    def present_sidecars(self) -> list[str]:
        return [s for p in self.files if (s := self.sidecar_of(p))]


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
    clashes = file_dir_clashes(inventory.files)
    if clashes:
        raise UnsafeStoreContent(f"Stored object {clashes[0]!r} is both a file and a directory")
    return inventory


def files_needing_content(inventory: Inventory, contents: Mapping[str, bytes]) -> list[str]:
    """Files whose sha256 must come from their bytes: no sidecar, or one that does not parse."""
    return [p for p in inventory.files if not _has_valid_sidecar(inventory, contents, p)]


def _has_valid_sidecar(inventory: Inventory, contents: Mapping[str, bytes], path: str) -> bool:
    sidecar = inventory.sidecar_of(path)
    if not sidecar or sidecar not in contents:
        return False
    try:
        decode_meta(contents[sidecar], expected_path=path)
    except CorruptStore:
        return False
    return True


def index_files(inventory: Inventory, contents: Mapping[str, bytes], *, legacy: bool) -> dict[str, FileEntry]:
    """A record for every file, from its sidecar or (lacking a valid one) its bytes in `contents`.

    A malformed sidecar does not make the store unopenable: the record remembers the error, which
    `get_meta` and `current_sha` raise as `CorruptStore`.
    """
    records: dict[str, FileEntry] = {}
    for path in inventory.files:
        sidecar, error = inventory.sidecar_of(path), ""
        if sidecar and sidecar in contents:
            try:
                meta = decode_meta(contents[sidecar], expected_path=path)
                records[path] = FileEntry.from_meta(meta, legacy=legacy)
                continue
            except CorruptStore as exc:
                error = str(exc)
        if path in contents:
            data = contents[path]
            records[path] = FileEntry(
                sha256=sha256_bytes(data), bytes=len(data), has_meta=False, legacy=legacy, meta_error=error
            )
    return records
