"""Pure: the models a file index is made of: a file's entry, and the parts a large checkpoint's index is
split into (`Part`, referenced from the checkpoint by a `PartRef`).

Everything here is read from storage, so it is untrusted input: parsing is strict, and every path passes
the same rules as a caller's path (`SafeFiles`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import CorruptStore, InvalidPath
from .codecs import MemoryMeta, is_sha256
from .formats import Evolving, ext_field
from .metadata import ext_with, from_ext
from .paths import is_reserved, normalize_path

#: Journal models are strict: unknown fields, coercions and NaN written as null are refused (NaN and
#: infinities in messages round-trip as upstream's json does; pydantic would write null).
STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, ser_json_inf_nan="constants")


class _Strict(BaseModel):
    model_config = STRICT


class FileEntry(_Strict):
    """A live file: content hash and size, sidecar fields, and where its bytes are."""

    sha256: str
    bytes: int = Field(ge=0)
    updated_at: str = ""
    updated_by: str = ""
    reason: str = ""
    has_meta: bool = True
    #: True for files imported from an upstream-written store: the bytes are at the file's own path
    legacy: bool = False
    #: why the imported sidecar could not be read (then `meta` raises `CorruptStore`)
    meta_error: str = ""
    #: the commit that last wrote the file (None: written by a version before commit info, or not yet
    #: committed); bookkeeping, not content: see `same_write`
    commit: int | None = Field(default=None, ge=0, exclude_if=lambda value: value is None)
    #: per-file extensions: kept while the file is unchanged, dropped when this version rewrites it
    ext: dict[str, Any] = ext_field()

    @field_validator("sha256")
    @classmethod
    def _hex_digest(cls, value: str) -> str:
        if not is_sha256(value):
            raise ValueError("sha256 must be 64 lowercase hex digits")
        return value

    def meta(self, path: str) -> MemoryMeta | None:
        if self.meta_error:
            raise CorruptStore(self.meta_error)
        if not self.has_meta:
            return None
        metadata = from_ext(self.ext, path)
        return MemoryMeta(path, self.sha256, self.updated_at, self.updated_by, self.reason, self.bytes, metadata)

    def last_commit(self) -> int | None:
        """The commit that last wrote this file: 0 for a file untouched since an import, None if unknown."""
        return 0 if self.legacy and self.commit is None else self.commit

    @classmethod
    def from_meta(cls, meta: MemoryMeta, *, legacy: bool = False) -> FileEntry:
        return cls(
            sha256=meta.sha256,
            bytes=meta.bytes,
            updated_at=meta.updated_at,
            updated_by=meta.updated_by,
            reason=meta.reason,
            legacy=legacy,
            ext=ext_with(meta.metadata),
        )


def _checked_paths(files: dict[str, Any]) -> dict[str, Any]:
    for path in files:
        try:
            canonical = normalize_path(path)
        except InvalidPath as exc:
            raise ValueError(f"unsafe path {path!r}: {exc}") from exc
        if canonical != path or is_reserved(path):
            raise ValueError(f"unsafe path {path!r}")
    return files


#: File maps whose every path passes the caller-path rules (records are untrusted input).
SafeFiles = Annotated[dict[str, FileEntry], AfterValidator(_checked_paths)]
SafeChanges = Annotated[dict[str, FileEntry | None], AfterValidator(_checked_paths)]
#: Paths a commit changed, each mapped to the commit that changed it before (None: none known).
SafeChain = Annotated[dict[str, Annotated[int, Field(ge=0)] | None], AfterValidator(_checked_paths)]


def same_write(a: FileEntry | None, b: FileEntry | None) -> bool:
    """Whether two records describe the same write, whichever commit each was stamped with."""
    if a is None or b is None:
        return a is b
    return a.model_copy(update={"commit": None}) == b.model_copy(update={"commit": None})


def _safe_path(value: str) -> str:
    _checked_paths({value: None})
    return value


SafePath = Annotated[str, AfterValidator(_safe_path)]


class PartRef(_Strict):
    """A checkpoint's reference to one part of its file index: the part holds `count` files, sorted, from
    `first` to `last` (both held); its object is named by the sha256 of its bytes, `bytes` long."""

    first: SafePath
    last: SafePath
    count: int = Field(ge=1)
    sha256: str
    bytes: int = Field(ge=1)

    @model_validator(mode="after")
    def _well_formed(self) -> PartRef:
        if not is_sha256(self.sha256):
            raise ValueError("sha256 must be 64 lowercase hex digits")
        if self.first > self.last or (self.count == 1) != (self.first == self.last):
            raise ValueError(f"part range {self.first!r}..{self.last!r} does not fit its count {self.count}")
        return self


class Part(_Strict, Evolving):
    """One part of a checkpoint's file index: a sorted run of file entries (immutable, content-addressed)."""

    files: SafeFiles
