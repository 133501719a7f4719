"""The OpenRath ops that only read: `read` (the three levels, a session's transcript), `entries` (list and
tree) and `find` (BM25 search). Reads see the handle's state; a read of a missing entry refreshes once,
unless the handle holds unsaved changes (a caller's ``options["store"]``): a refresh would drop them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rath.memory import MemoryEntry, MemoryFindResult, MemoryHit, MemoryOpRead, MemoryReadResult, MemoryResult

from flyteplugins_memory import MemoryStore

from .archive import is_archive
from .errors import OpFailure, fail
from .uris import (
    ROOT,
    SUFFIX,
    decode_segment,
    dir_of,
    is_transcript,
    join,
    legacy_path_of,
    parse_uri,
    path_of,
    session_log,
    uri_of,
)

if TYPE_CHECKING:
    from .ops import Bound

__all__ = ["entries", "find", "read"]

Tree = dict[tuple[str, str], Any]  # per level: ("d", name) -> subtree, ("f", name) -> store path


def read(bound: Bound, op: MemoryOpRead) -> MemoryResult:
    scope, segments = parse_uri(op.uri)
    path = path_of(op.uri)
    if is_transcript(scope, segments):  # the log, never a file: a plain write there (refused) shadows nothing
        raw, labels = _transcript(bound.store, segments[0]).encode("utf-8"), {}
    else:
        raw, labels = _entry(bound.store, op.uri, path)
    if op.encoding is None and op.level == "detail":
        return MemoryReadResult(uri=op.uri, data=raw, level=op.level)  # bytes exactly (a binary resource too)
    try:
        text = raw.decode(op.encoding or "utf-8")
    except (UnicodeDecodeError, LookupError) as err:
        raise fail(
            "unsupported",
            f"{op.uri} cannot be read as {op.encoding or 'utf-8'} text ({err}); read it "
            "with encoding=None for its bytes",
        ) from None
    if op.level == "abstract":
        given = labels.get("abstract")
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        text = str(given) if given is not None else first[: bound.abstract_chars]
    elif op.level == "overview":
        given = labels.get("overview")
        text = str(given) if given is not None else "\n".join(text.splitlines()[: bound.overview_lines])
    elif op.level != "detail":
        raise fail("unsupported", f"unknown level {op.level!r} (abstract, overview or detail)")
    data: str | bytes = text.encode(op.encoding or "utf-8") if op.encoding is None else text
    return MemoryReadResult(uri=op.uri, data=data, level=op.level)


def _entry(store: MemoryStore, uri: str, path: str) -> tuple[bytes, Mapping[str, Any]]:
    """Bytes and metadata of the entry `uri`: at `path`, else where the first release's rule put it."""
    candidates = [path, *filter(None, [legacy_path_of(uri)])]
    for refresh in (False, True):
        if refresh:
            if store.has_unsaved_changes():
                break  # a refresh would drop a caller's unsaved changes: read the handle as it is
            store.refresh()  # another task may have written it since this handle loaded
        for candidate in candidates:
            meta = store.get_meta(candidate)
            if meta is not None:
                return store.read_bytes(candidate) or b"", meta.metadata
    raise fail("not_found", f"no memory at {uri}")


def _transcript(store: MemoryStore, session_id: str) -> str:
    messages = store.session(session_log(session_id)).messages
    if not messages and not store.has_unsaved_changes():  # a refresh would drop a caller's unsaved changes
        store.refresh()  # another task may have committed since this handle loaded
        messages = store.session(session_log(session_id)).messages
    # no messages (a commit of none, as OpenRath's local backend archives an empty list; or no commit
    # yet) is an empty transcript, so every archived_uri a commit returns reads back
    return "\n".join(f"{m.get('role', '')}: {m.get('content', '')}" for m in messages)


def entries(bound: Bound, uri: str, depth: int) -> list[MemoryEntry]:
    """Entries under `uri` in pre-order, directories before files of one level, `depth` levels down."""
    scope, segments = parse_uri(uri)
    store = bound.store
    tree: Tree = {}
    # both rules' directories of this URI (they differ for names ending in .md); names are decoded
    # before they are grouped, so one name is one entry whichever rule wrote it
    for base in dict.fromkeys([dir_of(scope, segments), dir_of(scope, segments, keep_md=True)]):
        for path in store.list_paths(base):
            if path.startswith(base + "/") and not _is_transcript_file(uri_of(path) or ""):
                _place(tree, path, path[len(base) + 1 :].split("/"))
    out: list[MemoryEntry] = []

    def walk(node: Tree, at: str, level: int) -> None:
        for kind, name in sorted(node):
            entry_uri = join(at, name)
            if kind == "d":
                out.append(MemoryEntry(name=name, uri=entry_uri, is_dir=True, size=None))
                if level < depth:
                    walk(node[(kind, name)], entry_uri, level + 1)
            else:
                meta = store.get_meta(node[(kind, name)])
                size = meta.bytes if meta is not None else None
                out.append(MemoryEntry(name=name, uri=entry_uri, is_dir=False, size=size))

    walk(tree, uri if scope else "memory://", 0)
    return out


def _place(tree: Tree, path: str, parts: list[str]) -> None:
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(("d", decode_segment(part)), {})
    if not parts[-1].endswith(SUFFIX):
        return  # not an entry
    key = ("f", decode_segment(parts[-1][: -len(SUFFIX)]))
    if _is_current(path):
        node[key] = path  # this rule's file wins over the first rule's file of the same entry
    else:
        node.setdefault(key, path)


def _is_current(path: str) -> bool:
    """Whether `path` is where this rule puts its entry (not the first rule's, nor a foreign file's)."""
    entry_uri = uri_of(path)
    try:
        return entry_uri is not None and path_of(entry_uri) == path
    except OpFailure:
        return False


def find(bound: Bound, query: str, target_uri: str | None, top_k: int) -> MemoryResult:
    """The `top_k` best entries for `query`: one hit per URI (an entry both rules wrote is found at this
    rule's file only, as listings show it), never a file at a transcript URI."""
    prefixes = [ROOT]
    if target_uri is not None:
        scope, segments = parse_uri(target_uri)
        prefixes = list(dict.fromkeys([dir_of(scope, segments), dir_of(scope, segments, keep_md=True)]))
    if not isinstance(query, str) or not query.strip() or top_k < 1:
        return MemoryFindResult(hits=())
    store, limit = bound.store, top_k
    while True:  # hits dropped below may leave fewer than top_k: ask for more until the search runs dry
        per_prefix = [store.search(query, prefix=prefix, limit=limit) for prefix in prefixes]
        hits: dict[str, MemoryHit] = {}
        ranked = sorted((hit for found in per_prefix for hit in found), key=lambda h: -h.score)  # stable
        for hit in ranked:
            uri = _entry_uri(store, hit.path)
            if uri is not None and uri not in hits:
                hits[uri] = MemoryHit(uri=uri, score=float(hit.score), snippet=hit.snippet or None, level="detail")
        if len(hits) >= top_k or all(len(found) < limit for found in per_prefix):
            return MemoryFindResult(hits=tuple(hits.values())[:top_k])
        limit *= 4


def _entry_uri(store: MemoryStore, path: str) -> str | None:
    """The entry URI `path` shows as, None if it shows as none: not an entry, a file at a transcript URI
    (the commit log's alone), or the first rule's file of an entry whose current file exists."""
    uri = uri_of(path)
    if uri is None or _is_transcript_file(uri) or _is_archive_file(uri):
        return None
    if not _is_current(path) and store.get_meta(path_of(uri)) is not None:
        return None  # stale: this rule's file of the entry wins
    return uri


def _is_archive_file(uri: str) -> bool:
    try:
        return is_archive(*parse_uri(uri))
    except OpFailure:
        return False


def _is_transcript_file(uri: str) -> bool:
    try:
        return is_transcript(*parse_uri(uri))
    except OpFailure:
        return False
