"""Pure: the transcript's content rules: how messages encode, how two transcripts compare, how they merge.

Messages are whatever the caller appended (upstream keeps them as given and writes ``messages.json`` with
``json.dumps(..., default=str)``, so a ``datetime`` becomes its ``str`` and ``NaN`` stays ``NaN``). We
encode exactly as upstream does, and everything we commit is the *decoded* form of that encoding: the
value both implementations see after a reload, and a copy that shares no object with the caller's list.

Transcripts are compared by content (the encoding of each message), never by identity, so an edit in
place (``store.messages[3]["content"] = "[redacted]"``) is a change, and ``NaN != NaN`` is not one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import InvalidMessage
from .codecs import encode_messages, sha256_bytes, utc_timestamp, write_event
from .paths import MESSAGES_PATH

Message = dict[str, Any]


#: Deepest nesting a message may have: the journal's JSON codec (pydantic-core) refuses documents nested
#: deeper than about 200 levels, so a deeper message would commit a record no reader could parse.
MAX_DEPTH = 100


def encode_message(message: Any) -> str:
    """The JSON text of one message as upstream writes it (its content, for comparisons)."""
    if not isinstance(message, dict):
        raise InvalidMessage(f"A transcript message must be a dict, got {type(message).__name__}")
    try:
        return json.dumps(message, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidMessage(f"A transcript message cannot be encoded as JSON: {exc}") from exc


def check_message(message: Any) -> Message:
    """The committed form of one message, or `InvalidMessage` if it has none.

    Values JSON cannot encode become their ``str`` (upstream's ``default=str``); what fails is a non-dict
    message, a circular reference, a dict key that is not a str, int, float, bool or None, two keys that
    JSON makes equal (``1`` and ``"1"``), nesting deeper than `MAX_DEPTH`, and a string that is not valid
    Unicode (a lone surrogate: our journal stores UTF-8 text).
    """
    return _checked(message)[1]


def _checked(message: Any) -> tuple[str, Message]:
    """`check_message`, with the message's encoding: also the encoding of its committed form (decoding and
    encoding again gives back the same text), i.e. the committed message's fingerprint."""
    text = encode_message(message)
    try:
        text.encode("utf-8")
        decoded = json.loads(text, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidMessage(f"A transcript message cannot be stored: {exc}") from exc
    if json_depth(decoded) > MAX_DEPTH:
        raise InvalidMessage(f"A transcript message is nested deeper than {MAX_DEPTH} levels")
    return text, decoded


def check_messages(messages: Sequence[Any]) -> None:
    """Raise `InvalidMessage` unless every message can be stored (called before anything is appended)."""
    for message in messages:
        check_message(message)


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, refusing keys that JSON makes equal (a later one would hide the first)."""
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"keys that JSON makes equal: {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    return dict(pairs)


def json_depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value (iterative: no recursion limit of its own)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def fingerprints(messages: Sequence[Any]) -> list[str]:
    """The content of each message, for comparisons (a `CommittedMessages`' is computed once)."""
    if isinstance(messages, CommittedMessages):
        return messages.fingerprints()
    return [encode_message(m) for m in messages]


def _refuse_change(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise TypeError("a committed transcript is never changed in place: build a new list")


class CommittedMessages(list[Message]):
    """A committed transcript (a state's, or what a save commits): nothing changes it in place, so the
    content of its messages (`fingerprints`) is encoded once, not at each of the comparisons a save makes
    (a save on a 10,000-message transcript made about ten). Mutating methods raise `TypeError`; slices and
    copies are plain lists."""

    __slots__ = ("_fingerprints",)

    def __init__(self, messages: Iterable[Message] = (), fingerprints: list[str] | None = None):
        super().__init__(messages)
        #: the encoding of each message, once known (given by whoever just encoded them)
        self._fingerprints = fingerprints

    def followed_by(self, other: CommittedMessages) -> CommittedMessages:
        known = self._fingerprints is not None and other._fingerprints is not None
        return CommittedMessages([*self, *other], self.fingerprints() + other.fingerprints() if known else None)

    def fingerprints(self) -> list[str]:
        if self._fingerprints is None:
            self._fingerprints = [encode_message(m) for m in self]
        return list(self._fingerprints)

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse_change
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse_change


def as_committed(messages: Sequence[Message]) -> CommittedMessages:
    """`messages` (already in committed form) as a `CommittedMessages`; one already is comes back as is."""
    return messages if isinstance(messages, CommittedMessages) else CommittedMessages(messages)


def committed_form(messages: Sequence[Any]) -> CommittedMessages:
    """What committing `messages` stores: each message decoded from its encoding (fresh objects);
    raises `InvalidMessage` for one that cannot be stored."""
    checked = [_checked(m) for m in messages]
    return CommittedMessages([m for _, m in checked], [text for text, _ in checked])


def concatenated(first: Sequence[Message], second: Sequence[Message]) -> CommittedMessages:
    """Two committed transcripts one after the other (their fingerprints too, when both are known)."""
    if isinstance(first, CommittedMessages) and isinstance(second, CommittedMessages):
        return first.followed_by(second)
    return CommittedMessages([*first, *second])


def fresh_copy(messages: Sequence[Message]) -> list[Message]:
    """Committed messages for a handle to hold: decoded anew, so edits in place never reach the state."""
    return [json.loads(text) for text in fingerprints(messages)]


def merged(base: Sequence[str], latest: Sequence[str], ours: Sequence[str]) -> tuple[str, int] | None:
    """How our transcript lands on `latest`, given the `base` it started from (all as fingerprints).

    ``("keep", 0)``: ours is unchanged, the result is `latest`; ``("append", n)``: `latest` plus our
    messages from index `n` on; ``("rewrite", 0)``: ours replaces history nobody else changed; None:
    ours rewrote history that another writer changed meanwhile (a conflict).
    """
    if list(ours) == list(base):
        return ("keep", 0)
    if list(ours[: len(base)]) == list(base):
        return ("append", len(base))
    return ("rewrite", 0) if list(latest) == list(base) else None


def is_rewrite(base: Sequence[str], ours: Sequence[str]) -> bool:
    """Whether `ours` changed or removed messages of `base` (rather than only appending)."""
    return list(ours[: len(base)]) != list(base)


def after_committed(committed: list[Message], pending: list[Message], from_root: int) -> list[Message]:
    """A new transcript list: the committed messages (fresh copies), then those a handle held before its
    first load. Appended ones always count; the first `from_root` came from a working root's
    ``messages.json``, a snapshot of this store's transcript flushed earlier: only what it holds beyond
    the committed transcript counts (nothing, if it is a stale prefix of it)."""
    done, snapshot = fingerprints(committed), fingerprints(pending[:from_root])
    if snapshot == done[: len(snapshot)]:
        kept: list[Message] = []  # a stale (or exact) snapshot of the committed transcript
    elif snapshot[: len(done)] == done:
        kept = list(pending[len(done) : from_root])  # the snapshot went further: those are appends
    else:
        kept = list(pending[:from_root])  # a different history: keep it, after the committed one
    return fresh_copy(committed) + kept + list(pending[from_root:])


def adopt_committed(current: list[Message], sent: list[Message], committed: list[Message]) -> None:
    """After `sent` was committed as `committed` (which holds concurrent writers' appends too), make the
    handle's `current` list the committed transcript plus whatever it appended since `sent` was taken (an
    async caller may append while a save runs). Left alone when nothing differs, or if it was edited
    meanwhile."""
    sent_content = fingerprints(sent)
    if fingerprints(current[: len(sent)]) != sent_content or fingerprints(committed) == sent_content:
        return
    current[:] = fresh_copy(committed) + current[len(sent) :]


def rewrite_event(before: list[Message], after: list[Message]) -> dict[str, Any]:
    """The audit event of a save that changed committed messages (an edit in place, a redaction)."""
    return write_event(
        op="rewrite",
        path=MESSAGES_PATH,
        old_sha=sha256_bytes(encode_messages(before)),
        new_sha=sha256_bytes(encode_messages(after)),
        actor="agent",
        reason="transcript history changed",
        ts=utc_timestamp(),
        version_file="",
    )
