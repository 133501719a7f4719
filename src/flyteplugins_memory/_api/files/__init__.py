"""Files: writing, reading, metadata, binary content, streaming reads, deleting, and a handle's unsaved changes
(guide: docs/guide/files.md; CLI: `cli/_files.py`)."""

from __future__ import annotations

from .binary import BinaryAPI
from .bulk_delete import BulkDeleteAPI
from .changes import ChangesAPI
from .reads import ReadAPI
from .streaming import StreamingAPI
from .writes import WritesAPI

__all__ = ["FilesAPI"]


class FilesAPI(ReadAPI, WritesAPI, BinaryAPI, StreamingAPI, BulkDeleteAPI, ChangesAPI):
    """The files family of `MemoryStore`."""
