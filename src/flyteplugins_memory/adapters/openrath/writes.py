"""The OpenRath ops that write: `write` (replace or append one entry) and `commit_session` (a session's
messages to its record log, plus extracted memories), each one save of the handle.

A save that meets a concurrent save of the same file refreshes and re-applies the op to the newest
committed state (up to `ATTEMPTS` times), so concurrent writers lose nothing; an op that fails anyway
commits nothing, then or later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rath.memory import MemoryCommitResult, MemoryOpCommit, MemoryOpWrite, MemoryResult, MemoryWriteResult

from flyteplugins_memory import ConcurrencyError, MemoryStore, UnsavedChanges

from .archive import archive_json, is_archive, new_archive
from .errors import OpFailure, fail
from .messages import extracted_pairs, text_of
from .uris import (
    check_session_id,
    is_transcript,
    legacy_path_of,
    parse_uri,
    path_of,
    session_log,
)

if TYPE_CHECKING:
    from .ops import Bound

__all__ = ["ATTEMPTS", "commit_session", "entry_path", "refuse_unsaved", "save", "write"]

ATTEMPTS = 5
Stage = Callable[[set[str] | None], None]  # stages the op; given the paths a refresh dropped, or None first


def entry_path(uri: str) -> str:
    """The file of an entry a caller may write; a session's transcript is the commit log's alone."""
    path = path_of(uri)
    if is_transcript(*parse_uri(uri)):
        raise fail("unauthorized", f"{uri} is a session transcript: only MemoryOpCommit writes it")
    if is_archive(*parse_uri(uri)):
        raise fail("unauthorized", f"{uri} is a commit's archive: only MemoryOpCommit writes it")
    return path


def refuse_unsaved(store: MemoryStore) -> None:
    """Before a mutating op stages anything: a handle holding unsaved changes is refused (`UnsavedChanges`,
    ``unauthorized`` with detail ``UnsavedChanges``), since our save would commit them under the adapter's
    name. Every op saves (and a failed one drops what it staged), so any unsaved change is the caller's:
    only a caller's ``options["store"]`` (or a handle taken with `handle_store` and written) can hold one."""
    if store.has_unsaved_changes():
        raise UnsavedChanges(
            "the store handle given to the OpenRath backend holds unsaved changes, which this op's save would "
            "commit under its name: save() or revert() them first, or give the adapter its own handle: the key "
            '(options["key"])'
        )


def write(bound: Bound, op: MemoryOpWrite) -> MemoryResult:
    path = entry_path(op.uri)
    if op.mode not in ("replace", "write", "append"):
        raise fail("unsupported", f"unsupported write mode: {op.mode!r} (replace, write or append)")
    if not isinstance(op.content, str):
        raise fail("internal", f"content must be a str, got {type(op.content).__name__}")
    refuse_unsaved(bound.store)
    labels = dict(op.metadata or {})
    store = bound.store

    def stage(dropped: set[str] | None) -> None:
        if dropped is not None and path not in dropped:
            return  # still staged: applying again would append twice
        content, metadata = op.content, labels
        if op.mode == "append":
            # an entry only the first rule wrote (a name ending in .md) is appended to, not restarted
            source = next((p for p in (path, legacy_path_of(op.uri)) if p and store.get_meta(p)), None)
            meta = store.get_meta(source) if source else None
            if source is not None and meta is not None:
                old = store.read_text(source)
                content = old + ("\n" if old and not old.endswith("\n") else "") + op.content
                metadata = {**meta.metadata, **labels}
        store.write_text(path, content, actor=bound.actor, reason=f"openrath {op.mode}", metadata=metadata)

    save(bound, stage, [path])
    return MemoryWriteResult(uri=op.uri, bytes_written=len(op.content.encode("utf-8")))


def commit_session(bound: Bound, op: MemoryOpCommit) -> MemoryResult:
    session_id = check_session_id(op.session_id)  # before extract runs: a bad id commits nothing
    refuse_unsaved(bound.store)  # so is a caller's handle with unsaved changes
    messages = [text_of(m) for m in op.messages]
    archived = archive_json(op.messages)
    extracted, paths = _extract(bound, messages)
    name = session_log(session_id)
    store = bound.store
    log = f"sessions/{name}"
    uri, archive = new_archive(store, session_id)

    def stage(dropped: set[str] | None) -> None:
        for path, (_, text) in zip(paths, extracted, strict=True):
            if dropped is None or path in dropped:
                store.write_text(path, text, actor=bound.actor, reason=f"openrath commit {session_id}")
        if dropped is None or archive in dropped:
            store.write_text(archive, archived, actor=bound.actor, reason=f"openrath commit {session_id} archive")
        if messages and (dropped is None or any(d == log or d.startswith(log + "/") for d in dropped)):
            store.session(name).extend(messages)  # last: a failed write above leaves no messages staged

    save(bound, stage, [*paths, archive], name if messages else None)
    # as the local backend: -1 (not reported) without wait, though extract has run and its memories are saved
    count = len(extracted) if op.wait else -1
    return MemoryCommitResult(task_id=None, archived_uri=uri, extracted_count=count)


def _extract(bound: Bound, messages: list[dict]) -> tuple[list[tuple[str, str]], list[str]]:
    """The memories ``extract`` gives for `messages` and their files (``extraction_failed`` if it fails)."""
    if bound.extract is None:
        return [], []
    try:
        extracted = extracted_pairs(bound.extract([dict(m) for m in messages]))
        return extracted, [entry_path(uri) for uri, _ in extracted]
    except OpFailure as failure:
        raise fail("extraction_failed", f"extract returned a bad URI: {failure.failure.message}") from None
    except Exception as err:
        raise fail("extraction_failed", f"extract raised {type(err).__name__}: {err}") from None


def save(bound: Bound, stage: Stage, paths: list[str], log: str | None = None) -> None:
    """Stage the op and save; on a conflict, refresh and re-stage what the refresh dropped. If the op
    fails anyway, what it staged (the files at `paths`, the appends to the session log `log`) is dropped
    from the handle, the backend's or a caller's ``options["store"]``, so no later save commits it."""
    store = bound.store
    dropped: set[str] | None = None
    try:
        for attempt in range(ATTEMPTS):
            stage(dropped)
            try:
                store.save(actor=bound.actor)
                return
            except ConcurrencyError as err:
                if attempt == ATTEMPTS - 1:
                    raise fail("internal", f"save still conflicts after {ATTEMPTS} attempts: {err}") from None
                dropped = set(store.refresh())
    except BaseException as err:
        try:
            _undo(store, paths, log)
        except Exception as undo_err:  # pragma: no cover (revert is local: it does not fail with storage)
            err.add_note(f"dropping what the failed op staged failed too: {undo_err!r}")
        raise


def _undo(store: MemoryStore, paths: list[str], log: str | None) -> None:
    """Drop a failed op's unsaved changes: its files (back to their committed state) and its log appends."""
    if log is not None:
        conversation = store.session(log).log
        conversation.discard_unsaved()  # appends still pending, and the segment files a save staged:
        paths = [*paths, *store.list_paths(conversation.name)]  # revert skips the committed ones
    if paths:
        store.revert(paths)
