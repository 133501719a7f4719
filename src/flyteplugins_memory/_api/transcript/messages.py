"""The transcript on `MemoryStore`: `append` and `extend` (saved by `save`), `flush_messages` (into the
working root), and the windowed reads `messages_tail(n)` and `messages_since(i)`.

The reads are I/O calls (sync + ``.aio``): a handle that has not loaded its committed state yet (one received
from another task, or built with ``MemoryStore(key=...)``) holds only its own appends, so they load the
committed transcript first, as every other read does. On a loaded handle they touch no storage.
They return copies in the stored form (each message decoded from the JSON it is saved as), so a caller
editing the result never changes the handle's transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._base.compat import upstream_awaitable
from ..._base.syncify import syncify
from ..._handle.mirror import write_text_file
from ..._rules.arguments import check_int
from ..._rules.codecs import encode_messages
from ..._rules.messages import MessageModel, admit, admit_all
from ..._rules.paths import MESSAGES_PATH
from ..._rules.transcript import check_messages, committed_form
from ...errors import InvalidArgument
from ..core import StoreCore


class MessagesAPI(StoreCore):
    """The transcript: appending to it, writing it to the working root, and its windowed reads."""

    def append(self, message: dict[str, Any] | MessageModel) -> None:
        """Append one message to the transcript (persisted by `save`).

        Stored as upstream stores it (``json.dumps(..., default=str)``: a ``datetime`` is saved as its
        ``str``); a message that cannot be encoded at all raises `InvalidMessage` and is not appended. A
        typed message (`UserMessage`, ...) is stored as its dict; with ``validate_messages=True`` a dict
        must match one of them too (`InvalidMessage` saying why).
        """
        self.messages.append(admit(message, validate=self.validate_messages))

    def extend(self, messages: Sequence[dict[str, Any] | MessageModel]) -> None:
        """Append messages to the transcript (persisted by `save`); all or none (`InvalidMessage`)."""
        self.messages.extend(admit_all(list(messages), validate=self.validate_messages))

    @upstream_awaitable
    @syncify
    async def flush_messages(self) -> None:
        """Write the transcript (the committed one, loaded first if need be, plus this handle's changes)
        to ``messages.json`` in the local working root, atomically."""
        view = await self._checkout.ready(self)
        check_messages(self.messages)
        data = encode_messages(self.messages)
        await view.mirror.now(write_text_file, view.workdir, MESSAGES_PATH, data)

    def flush_messages_sync(self) -> None:
        """Alias of ``flush_messages()`` kept for upstream compatibility."""
        self.flush_messages()

    @syncify
    async def messages_tail(self, n: int) -> list[dict[str, Any]]:
        """The last `n` messages of the transcript (all of them if it holds fewer), oldest first, as copies.

        Raises `InvalidArgument` unless `n` is an int >= 0."""
        check_int("n", n)
        await self._checkout.ready(self)
        return committed_form(self.messages[max(len(self.messages) - n, 0) :])

    @syncify
    async def messages_since(self, i: int) -> list[dict[str, Any]]:
        """The messages from index `i` on (``messages_since(len_seen)`` gives what was appended since), as
        copies.

        Raises `InvalidArgument` unless `i` is an int from 0 to the transcript's length: an index beyond
        it means the caller counted messages this transcript does not hold (its history was rewritten)."""
        check_int("i", i)
        await self._checkout.ready(self)
        if i > len(self.messages):
            raise InvalidArgument(f"i={i} is beyond the transcript, which holds {len(self.messages)} messages")
        return committed_form(self.messages[i:])
