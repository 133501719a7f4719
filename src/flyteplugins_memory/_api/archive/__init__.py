"""Archives: `export` a store to a file, `import_store` one back (guide: docs/guide/archives.md; CLI:
`cli/_archives.py`), with the archive file, its checked spool and what an export leaves out or redacts."""

from __future__ import annotations

from .export import ExportAPI
from .import_archive import ImportAPI

__all__ = ["ArchiveAPI"]


class ArchiveAPI(ExportAPI, ImportAPI):
    """The archives family of `MemoryStore`."""
