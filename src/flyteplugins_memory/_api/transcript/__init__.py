"""The transcript: appending, windowed reads, compaction into a record log (guide:
docs/guide/transcript.md)."""

from __future__ import annotations

from .compaction import CompactionAPI
from .messages import MessagesAPI

__all__ = ["TranscriptAPI"]


class TranscriptAPI(MessagesAPI, CompactionAPI):
    """The transcript family of `MemoryStore`."""
