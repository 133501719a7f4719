"""The transcript's windowed reads on `MemoryStore`: `messages_tail(n)` and `messages_since(i)`.

Both are I/O calls (sync + ``.aio``): a handle that has not loaded its committed state yet (one received
from another task, or built with ``MemoryStore(key=...)``) holds only its own appends, so they load the
committed transcript first, as every other read does. On a loaded handle they touch no storage.
They return copies in the stored form (each message decoded from the JSON it is saved as), so a caller
editing the result never changes the handle's transcript.
"""

from __future__ import annotations

from typing import Any

from .._base.syncify import syncify
from .._handle.checkout import Checkout
from .._rules.arguments import check_int
from .._rules.transcript import committed_form
from ..errors import InvalidArgument


class TranscriptReadAPI:
    """Mixed into `MemoryStore`; relies on its `_handle.checkout`, `messages` and `audit`."""

    _checkout: Checkout
    messages: list[dict[str, Any]]
    audit: bool

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
