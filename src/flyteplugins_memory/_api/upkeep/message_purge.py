"""Message-level purge: `MemoryStore.purge_message(index)` and `RecordLog.purge(index)`.

Redacting a message in place and saving changes the newest transcript only: the old text stays inline in
the commit records that appended it and in checkpoints until gc collects them. A message-level purge
removes every stored copy now, in two steps, like `purge(path)` (`_journal.purge`):

1. **Its commit** (kind ``purge``, committed on its own after the handle's unsaved changes): the message
   (every message of the transcript with exactly its content) replaced by the redacted form, or the log's
   segment that holds the record rewritten with the record replaced (keeping its place in the log:
   ``ext["position"]``, `_rules.record_codec.position`), and an audit event of op ``purge`` (upstream's fields,
   plus ``message`` or ``record``: the index), whatever the handle's ``audit`` setting. The commit
   rewrites upstream's ``messages.json``. A message of the transcript has copies in the transcript's
   compaction archives (the segments `compact_transcript` wrote, `_rules.record_codec.is_transcript_archive`): the
   same commit rewrites every archive segment holding a record equal to it (one audit event each), and a
   purge of an archived record does the same for the archives' other copies.
2. **The stored copies** (`_journal.purge.purge_contents`): every stored commit record and checkpoint whose
   transcript holds the old message (appended messages, a checkpoint's messages) is rewritten in place
   with the redacted form (`_journal.redact`); for a record, the segment's old content (its blob, version
   snapshots, in-place copy) and every search segment that indexed it are removed, behind a purge marker,
   and, for a record of a compaction archive, a stored transcript message equal to it is redacted too.
   The archive segments the commit rewrote lose their old content the same way.

A session (``store.session(name)``, the log ``sessions/<name>``) is a conversation of its own: its purge
redacts its record only, and a transcript purge leaves sessions alone (docs/decisions.md).

The redacted form: `replacement` if it is a dict (or any JSON value, for a record); else a message of the
same ``role`` (a tool result keeps its ``tool_call_id`` and ``name``; tool calls and every other field go)
whose ``content`` is `replacement` (``"[redacted]"`` by default); a record that is not a message becomes
the string.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from ..._handle.mirror import write_text_file
from ..._journal.old_journal import old_view
from ..._journal.opening import latest_state
from ..._journal.purge import PURGE_OP, PurgeResult, purge_contents
from ..._journal.redact import Redaction, ledger_field, rewrite_journal, rewriting
from ..._journal.retention import Inventory
from ..._rules.arguments import check_int
from ..._rules.codecs import decode_messages, encode_messages, sha256_bytes, utc_timestamp, write_event
from ..._rules.commit_info import check_note
from ..._rules.entries import FileEntry
from ..._rules.layout import JOURNAL_DIR
from ..._rules.messages import admit
from ..._rules.paths import MESSAGES_PATH
from ..._rules.purge_count import counted
from ..._rules.record_codec import (
    ARCHIVE_EXT,
    COUNT_EXT,
    POSITION_EXT,
    check_record,
    decode_segment,
    encode_segment,
    is_segment,
    is_transcript_archive,
    ordered,
    position,
)
from ..._rules.transcript import committed_form, encode_message
from ..._rules.writes import ChangeOptions
from ...errors import (
    ConcurrencyError,
    CorruptStore,
    InvalidArgument,
    InvalidMessage,
    MessageNotFound,
    RecordNotFound,
)

if TYPE_CHECKING:
    from ..._handle.checkout import Checkout
    from ..._handle.working_copy import WorkingCopy

#: What a redacted message's content (or a redacted record) becomes by default.
REDACTED = "[redacted]"


class Owner(Protocol):
    """The store facade, as a message purge sees it."""

    messages: list[dict[str, Any]]
    audit: bool
    validate_messages: bool
    _checkout: Checkout


#: The fields of a message a redaction keeps (they name, they do not say): a tool result stays one.
KEPT_FIELDS = ("role", "tool_call_id", "name")


def redacted_form(old: Any, replacement: Any) -> Any:
    """What replaces `old` (see the module docstring): a str replacement of a message keeps its role (and
    a tool result's ``tool_call_id`` and ``name``) and drops everything else (tool calls' arguments too)."""
    if replacement is None:
        replacement = REDACTED
    if isinstance(replacement, str) and isinstance(old, dict) and "role" in old:
        return {**{k: old[k] for k in KEPT_FIELDS if k in old}, "content": replacement}
    return replacement


def _index(name: str, index: object, size: int, error: type[Exception]) -> int:
    """`index` as a position in a sequence of `size` (negative counts from the end, as a list's)."""
    value = check_int(name, index, minimum=None)
    if not -size <= value < size:
        raise error(f"No {name.removesuffix('_index') or 'item'} at index {value}: there are {size}")
    return value % size


def _event(path: str, old: bytes, new: bytes, actor: str, reason: str, **where: int) -> dict[str, Any]:
    event = write_event(
        op=PURGE_OP,
        path=path,
        old_sha=sha256_bytes(old),
        new_sha=sha256_bytes(new),
        actor=actor,
        reason=reason,
        ts=utc_timestamp(),
        version_file="",
    )
    return {**event, **where}


async def purge_message(store: Owner, index: object, replacement: Any, actor: str, reason: str) -> PurgeResult:
    """`MemoryStore.purge_message`."""
    check_note("actor", actor)
    check_note("reason", reason)
    session = store._checkout
    await session.ready(store)  # the committed transcript is what `index` counts in
    at = _index("message", index, len(store.messages), MessageNotFound)  # checked before anything is saved
    reason = reason or f"purge message {at}"  # one reason in the commit and the audit alike
    old = committed_form([store.messages[at]])[0]
    new = admit(redacted_form(old, replacement), validate=store.validate_messages)
    encoded = encode_message(old)
    redaction = Redaction(messages={encoded: new})
    # Stored copies first, then the commit (then once more, for what landed meanwhile): a handle that loads
    # a checkpoint after the commit finds it redacted already, and one that loaded it before counts fewer
    # purges than the commit's record, so it reads it again (`_rules.purge_count`).
    await _rewrite(session, redaction)
    found: dict[str, Any] = {}
    remote = session.remote()

    async def change(view: WorkingCopy) -> dict[str, Any]:
        # after the handle's changes were saved and it moved to the newest commit: same index, same message
        # (or already redacted: a concurrent save built on a record the first rewrite had redacted)
        if at >= len(store.messages) or encode_message(store.messages[at]) not in (encoded, encode_message(new)):
            raise ConcurrencyError(MESSAGES_PATH, "", "", paths=(MESSAGES_PATH,))
        before = list(store.messages)
        store.messages[:] = [new if encode_message(m) == encoded else m for m in before]
        found["before"] = before
        # the transcript's compaction archives hold copies of its messages: the same commit rewrites them
        options = ChangeOptions(actor, reason, None, False, False)
        found["archived"] = await _purge_archived(view, remote, {encoded: new}, options, {"message": at})
        counted(view)
        event = _event(MESSAGES_PATH, encode_messages(before), encode_messages(store.messages), actor, reason)
        return {**event, "message": at, **ledger_field({encoded: new})}

    def undo() -> None:
        if "before" in found:
            store.messages[:] = found.pop("before")

    _, commit = await session.purge_commit(
        store, change, actor=actor, reason=reason, rewrites_transcript=True, undo=undo
    )
    result = await _remove(session, set(found["archived"].values()), redaction, MESSAGES_PATH, actor, reason, commit)
    await _forget_held(store, redaction)
    return result


async def purge_record(store: Any, log: str, index: object, replacement: Any, actor: str, reason: str) -> PurgeResult:
    """`RecordLog.purge` of log `log` (its handle's unsaved records saved first, by the caller)."""
    check_note("actor", actor)
    check_note("reason", reason)
    value = check_int("index", index, minimum=None)
    reason = reason or f"purge record {value} of log {log}"  # one reason in the commit and the audit alike
    session = store._checkout
    remote = session.remote()
    found: dict[str, Any] = {}

    async def change(view: WorkingCopy) -> None:
        await view.need_under(log)
        entries = {p: e for p in view.paths(log) if is_segment(log, p) and (e := view.entry(p)) is not None}
        segments = ordered(entries)
        counts, records = [], {}
        for segment in segments:
            if segment.count is None:
                records[segment.path] = await _records(view, remote, segment.path, None)
            counts.append(segment.count if segment.count is not None else len(records[segment.path]))
        at = _index("record", value, sum(counts), RecordNotFound)
        chosen, skipped = 0, 0
        while at >= skipped + counts[chosen]:
            skipped += counts[chosen]
            chosen += 1
        segment, count = segments[chosen], counts[chosen]
        entry = entries[segment.path]
        data = await _bytes(view, remote, segment.path)
        decode_segment(data, segment.path, count)  # checked: JSON lines, as many as its entry says
        lines = [line for line in data.decode("utf-8").split("\n") if line.strip()]
        old = json.loads(lines[at - skipped])
        new = redacted_form(old, replacement)
        lines[at - skipped] = check_record(new)
        archive = is_transcript_archive(segment.path, entry)
        # a message `compact_transcript` archived sat in the transcript, and maybe in the archives again:
        # every copy goes (a record of any other log, a session's message among them, is its own record)
        encoded = _encoded(old) if archive else None
        messages = {encoded: new} if encoded is not None else {}
        if encoded is not None:  # the message's other copies in this segment
            lines = [check_record(new) if _line_encodes(line, encoded) else line for line in lines]
        content = encode_segment(lines)
        ext = {COUNT_EXT: count, POSITION_EXT: position(entry), **({ARCHIVE_EXT: True} if archive else {})}
        options = ChangeOptions(actor, reason, None, False, False)
        await view.write(segment.path, content, options, ext)
        event = _event(segment.path, data, content.encode("utf-8"), actor, reason, record=at)
        view.changes.audit.append({**event, **ledger_field(messages)})
        archived = await _purge_archived(view, remote, messages, options, {"record": at}) if messages else {}
        counted(view)
        found.update(messages=messages, shas={entry.sha256, *archived.values()}, path=segment.path)

    _, commit = await session.purge_commit(store, change, actor=actor, reason=reason)
    redaction = Redaction(messages=found["messages"])
    result = await _remove(session, found["shas"], redaction, found["path"], actor, reason, commit)
    await _forget_held(store, redaction)
    return result


def _encoded(record: Any) -> str | None:
    """The message encoding of `record` (`encode_message`), None if it is no message (not a dict)."""
    if not isinstance(record, dict):
        return None
    try:
        return encode_message(record)
    except InvalidMessage:
        return None


async def _purge_archived(
    view: WorkingCopy, remote: Any, messages: dict[str, Any], options: ChangeOptions, where: dict[str, int]
) -> dict[str, str]:
    """Rewrite, in the working copy, every segment of the transcript's compaction archives
    (`is_transcript_archive`) that holds a record equal to a message of `messages` (its encoding mapped
    to what replaces it), each such record replaced and the segment kept in its place (as a record purge
    does), with an audit event of op ``purge`` (`where`: the purge's index). Returns each rewritten
    segment's path mapped to the sha256 of the content it replaced. A segment the working copy changed
    already (the record purge's own) is left to that change."""
    await view.need_under("")
    rewritten: dict[str, str] = {}
    for path in view.paths(""):
        entry = view.entry(path)
        if entry is None or path in view.changes.files or not _is_archive_segment(path, entry):
            continue
        data = await _bytes(view, remote, path)
        lines = [line for line in data.decode("utf-8").split("\n") if line.strip()]
        changed = False
        for i, line in enumerate(lines):
            found = next((new for encoded, new in messages.items() if _line_encodes(line, encoded)), None)
            if found is not None and (redacted := check_record(found)) != line:
                lines[i], changed = redacted, True
        if not changed:
            continue
        content = encode_segment(lines)
        ext = {COUNT_EXT: len(lines), POSITION_EXT: position(entry), ARCHIVE_EXT: True}
        await view.write(path, content, options, ext)
        view.changes.audit.append(_event(path, data, content.encode("utf-8"), options.actor, options.reason, **where))
        rewritten[path] = entry.sha256
    return rewritten


def _line_encodes(line: str, encoded: str) -> bool:
    """Whether JSON line `line` holds the message whose encoding is `encoded`."""
    try:
        return _encoded(json.loads(line)) == encoded
    except ValueError:
        return False


def _is_archive_segment(path: str, entry: FileEntry) -> bool:
    log = path.rpartition("/")[0]
    return bool(log) and is_segment(log, path) and is_transcript_archive(path, entry)


async def _rewrite(session: Checkout, redaction: Redaction) -> None:
    async with session.lock:
        remote = session.remote()
        journals = [remote, old_view(remote)] if remote.journal_moved else [remote]
        async with rewriting(remote):  # no other purge of this store in this process rewrites meanwhile
            for journal in journals:
                await rewrite_journal(journal, Inventory.of(await journal.stat(JOURNAL_DIR)), redaction)


async def _remove(
    session: Checkout, shas: set[str], redaction: Redaction, path: str, actor: str, reason: str, commit: int
) -> PurgeResult:
    async with session.lock:
        remote, view = session.remote(), session.working_copy
        newest = await latest_state(remote, view.base) or view.base
        result = await purge_contents(
            remote, newest, shas, redaction, path=path, actor=actor, reason=reason, commit=commit
        )
        session.search.reset()  # it may hold segments the purge removed
        return result


async def _forget_held(store: Owner, redaction: Redaction) -> None:
    """After the stored copies: the transcript the handle holds in memory and in its working root, and
    upstream's ``messages.json`` (written by saves only when the transcript changed: a purge commit built
    on a transcript the first rewrite had redacted already, or a record purge, changes none there)."""
    if not redaction.messages:
        return
    session = store._checkout
    async with session.lock:
        session.redact_held(store, redaction.transcript)
        remote = session.remote()
        stored = await remote.read(MESSAGES_PATH)
        try:
            redacted = None if stored is None else redaction.transcript(decode_messages(stored))
        except CorruptStore:
            redacted = None  # not a transcript this version reads: the next save writes it anew
        if redacted is not None:
            await remote.write_many({MESSAGES_PATH: encode_messages(redacted)})
    await _rewrite_local_transcript(store)


async def _bytes(view: WorkingCopy, remote: Any, path: str) -> bytes:
    found = await view.local_bytes(path)
    if isinstance(found, tuple):
        found = await view.fetch_committed(remote, *found)
    if found is None:
        raise CorruptStore(f"Log segment {path!r} is missing")
    return found


async def _records(view: WorkingCopy, remote: Any, path: str, count: int | None) -> list[Any]:
    return decode_segment(await _bytes(view, remote, path), path, count)


async def _rewrite_local_transcript(store: Owner) -> None:
    """The handle's working root may hold ``messages.json`` (``flush_messages``): write it again."""
    view = store._checkout.working_copy
    if view.workdir.read(MESSAGES_PATH) is not None:
        await view.mirror.now(write_text_file, view.workdir, MESSAGES_PATH, encode_messages(store.messages))


def check_replacement(replacement: Any) -> Any:
    """`replacement` if it is None, a str, or a dict (a message); `InvalidArgument` otherwise."""
    if replacement is None or isinstance(replacement, str | dict):
        return replacement
    raise InvalidArgument(f"replacement must be a str, a message dict or None, got {type(replacement).__name__}")
