"""`MemoryStore.open_bytes`: a file's bytes as a binary file object, read in parts, never held whole.

What it sees is what ``read_bytes`` returns (decision 0151): the handle's own unsaved write of the path if
it made one, else the committed content of the state it holds; expired, deleted and purged paths are not
there (`PathNotFound`, or `ContentPurged` for content purged meanwhile). Committed content is read from
storage in ranged parts (`storage._byte_stream`), not from the working root, and not cached there: a
stream is for files too large to hold, and a task that wants the root materialized calls ``prefetch``.
"""

from __future__ import annotations

from ..._base.syncify import syncify
from ..._handle.working_copy import WorkingCopy
from ..._journal.streaming import open_committed
from ..._rules.admission import Access
from ..._rules.journal_objects import FileEntry
from ...errors import PathNotFound
from ...storage._byte_stream import ByteStream, stream_of_bytes
from ..core import StoreCore


class StreamingAPI(StoreCore):
    """Streaming reads: `open_bytes`."""

    @syncify
    async def open_bytes(self, rel_path: str) -> ByteStream:
        """Open the file at `rel_path` for reading, as a binary file object (`ByteStream`: ``read``,
        ``readinto``, ``seek``, ``tell``, a context manager; ``aread`` and ``async with`` from async code)
        that holds a few parts of the file, not the whole of it: parts are fetched side by side ahead of
        the reader, and the bytes are checked against the file's sha256 when the reader reaches the end.

        Sees what `read_bytes` sees (this handle's unsaved write included); a path that is no file
        raises `PathNotFound`, content purged meanwhile `ContentPurged`, content that changed under the
        stream or is damaged `CorruptStore`."""
        rel = self._admission.admit(rel_path, Access.READ)
        view = await self._checkout.ready(self)
        await view.check_inside_root(rel)
        found, base = await self._checkout.look(self, lambda v: (_held(v, rel), v.base), paths=[rel])
        if found is None:
            raise PathNotFound(f"No file {rel!r} in the store")
        if isinstance(found, bytes):
            return stream_of_bytes(rel, found)
        return await open_committed(self._checkout.remote_if_known(), rel, found, base)


def _held(view: WorkingCopy, rel: str) -> bytes | FileEntry | None:
    """The handle's unsaved bytes of `rel`, else its committed entry; None if it is no live file (as
    `WorkingCopy.local_bytes` decides, without reading a cached copy)."""
    entry = view.entry(rel)
    if entry is None:
        return None
    return view.unsaved.get(rel, entry)
