"""Per-session conversations: `store.session(name)`, a transcript-like view over the record log
``sessions/<name>``.

Each conversation is its own log, so many sessions share one store without sharing (or rewriting) its
transcript, and concurrent appends to one session from several handles all survive. Messages follow the
transcript's rules (`_rules.messages.admit`: stored as upstream stores messages; typed messages become their
dicts; with ``validate_messages=True`` they must match the typed models) and must also be strict JSON
(no NaN), since a log holds JSON lines.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any, NoReturn

from .._base.syncify import syncify
from .._journal.purge import PurgeResult
from .._rules.arguments import check_int
from .._rules.messages import MessageModel, admit_all
from .._rules.transcript import committed_form
from ..errors import InvalidArgument, InvalidMessage, InvalidPath, InvalidRecord, ReadOnlySnapshot
from .records import RecordLog

__all__ = ["SESSIONS_PREFIX", "Conversation", "SessionMessages", "conversation_log"]

#: Where conversations live in the store: session ``name`` is the record log ``sessions/<name>``.
SESSIONS_PREFIX = "sessions"


def conversation_log(name: str) -> str:
    """The log path of session `name`, which must be one path segment (`InvalidPath` otherwise)."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name:  # ".": "sessions"
        raise InvalidPath(f"A session name must be one non-empty path segment, got {name!r}")
    return f"{SESSIONS_PREFIX}/{name}"


class SessionMessages(list[dict[str, Any]]):
    """A session's messages (``store.session(name).messages``): a plain list of message dicts.

    Until the next minor release it can also be called, as the method ``messages(since=0, limit=None)``
    it replaces: that warns (`DeprecationWarning`) and returns the same list, or the slice `since` onwards
    of at most `limit` messages."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise ReadOnlySnapshot(
            "session.messages is a copy of the session's log, read when asked for: a change to the list "
            "would be lost; append with session.append(...), redact with session.purge_message(i)"
        )

    # list changes would be silently lost (a session's log is append-only records): refused, typed
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # copy, deepcopy and pickle rebuild it whole, not by appends
        return (SessionMessages, (list(self),))

    def __call__(self, since: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        warnings.warn(
            "session.messages is a list now, like store.messages: use session.messages (no call), or "
            "session.read(since, limit); calling it stops working in the next minor release",
            DeprecationWarning,
            stacklevel=2,
        )
        check_int("since", since)
        if limit is not None:
            check_int("limit", limit)
        if since == 0 and limit is None:
            return self
        return SessionMessages(self[since:] if limit is None else self[since : since + limit])


class Conversation:
    """One session's messages (``store.session(name)``): `append` and `extend` like the store's transcript
    (kept in the handle until ``store.save()``), `messages` (a list, like ``store.messages``) reads them
    back, this handle's unsaved ones last; `read(since, limit)` a part of them. Not the store's own
    transcript (``store.messages``), which upstream readers see."""

    def __init__(self, log: RecordLog, name: str, *, validate: bool = False):
        self._log = log
        self._name = name
        self._validate = validate

    @property
    def name(self) -> str:
        return self._name

    @property
    def log(self) -> RecordLog:
        """The record log the messages are stored in."""
        return self._log

    def __repr__(self) -> str:
        return f"Conversation({self._name!r})"

    def append(self, message: dict[str, Any] | MessageModel) -> None:
        """Append one message (a dict or a typed message; `InvalidMessage` if it cannot be stored, or, on a
        store opened with ``validate_messages=True``, does not match the typed models)."""
        self.extend([message])

    def extend(self, messages: Iterable[dict[str, Any] | MessageModel]) -> None:
        """Append messages, all or none (`InvalidMessage` for the first that cannot be stored)."""
        if isinstance(messages, str | bytes | dict):
            raise InvalidArgument(f"extend takes an iterable of messages, got {type(messages).__name__}")
        stored = committed_form(admit_all(list(messages), validate=self._validate))
        try:
            self._log.extend(stored)
        except InvalidRecord as exc:
            raise InvalidMessage(f"A session message cannot be stored: {exc}") from exc

    @syncify
    async def discard_unsaved(self) -> int:
        """Forget this handle's unsaved messages of the session (appended since the last save, or staged
        by a save that was refused, e.g. `ReadOnlyPath` after another handle made ``sessions/`` read-only);
        returns how many were dropped. The handle's other changes stay for the next save
        (`RecordLog.discard_unsaved`)."""
        return await self._log.discard_unsaved.aio()

    @property
    def messages(self) -> SessionMessages:
        """The session's messages, oldest first (this handle's unsaved ones last): a list, as
        ``store.messages`` is the store's transcript. Read when asked for (each access reads the log
        again, as any sync call of a handle does; fresh copies: changing the list changes nothing stored,
        `append` and `extend` do). From async code, ``await session.read.aio(since, limit)``.

        Calling it, ``session.messages(since, limit)`` as in 0.4, still works until the next minor
        release, with a `DeprecationWarning`: it returns this list (or the slice asked for)."""
        return SessionMessages(self._log.read())

    @syncify
    async def read(self, since: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's messages from index `since` (at most `limit`), oldest first, as fresh copies
        (what calling ``messages`` did before it was a list; reads only the log segments needed)."""
        return await self._log.read.aio(since, limit)

    @syncify
    async def count(self) -> int:
        """How many messages the session holds (this handle's unsaved ones included)."""
        return await self._log.count.aio()

    @syncify
    async def purge_message(
        self, index: int, *, replacement: str | dict[str, Any] | None = None, actor: str = "agent", reason: str = ""
    ) -> PurgeResult:
        """Redact the session's message `index` and remove every stored copy of its old text now, as
        ``store.purge_message`` does for the store's transcript (`RecordLog.purge` of the session's log:
        the message becomes a message of the same role whose content is `replacement`, ``"[redacted]"`` by
        default; `RecordNotFound` for an index the session does not have)."""
        return await self._log.purge.aio(index, replacement=replacement, actor=actor, reason=reason)
