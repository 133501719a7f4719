"""An OpenRath memory backend (``rath.memory``) over a flyteplugins-memory store, registered as ``"flyte"``.

Importing this module imports ``rath`` (``openrath``) at its top and registers `FlyteMemoryBackend` under
the name ``"flyte"``; the adapters package is only imported explicitly, so ``flyteplugins_memory`` itself
never needs openrath. Use it as any OpenRath backend::

    import flyteplugins_memory.adapters.openrath  # registers "flyte"
    import rath.memory as memory
    store = memory.get("flyte").open(memory.MemoryStoreSpec(options={"key": "my-agent"}))
    agent = flow.Agent("...", model="...", memory=store)

One OpenRath store is one key of ours. The key is ``options["key"]``, else ``namespace``, else ``user_id``,
else ``"openrath"``; ``options["store"]`` may instead be an open `flyteplugins_memory.MemoryStore` handle
(the caller's, e.g. inside a Flyte task). Other options: ``actor`` (the audit actor, default
``"openrath"``), ``extract`` (see commit), ``abstract_chars`` (200), ``overview_lines`` (20) and
``read_only_prefixes`` (store paths, e.g. ``("openrath/agent",)``, for the handle opened by key).
Reads see the handle's state (a read of a missing entry refreshes once first); every mutating op saves.

URIs: ``memory://<scope>/<seg>/.../<name>`` with scope ``user``, ``agent``, ``session`` or ``resources``
(legacy ``viking://`` is accepted too) names the file ``openrath/<scope>/<seg>/.../<name>.md`` of the
store. A segment of letters, digits and ``_-.`` (not starting with ``.``) is itself; any other is ``~``
and the hex of its UTF-8 bytes, so every URI maps to one path and back. The ``.md`` suffix lets ``a`` be
both an entry and a directory, as in OpenRath's local backend. Empty, ``.`` and ``..`` segments, other
schemes and unknown scopes are ``MemoryExecutionFailure(kind="invalid_uri")``.

Ops (every mutating op is one commit; a save that meets a concurrent save of the same file refreshes and
re-applies to the newest committed state, up to 5 times, so concurrent writers lose nothing):

* `MemoryOpWrite`: ``mode="replace"`` (or ``"write"``) replaces the text, ``"append"`` appends it (on a new
  line) to what is committed; other modes are ``unsupported``. ``metadata`` is kept as file metadata;
  its ``abstract`` and ``overview`` values become those levels.
* `MemoryOpRead`: ``detail`` is the full text; ``overview`` is the ``overview`` metadata, else the first
  ``overview_lines`` lines; ``abstract`` is the ``abstract`` metadata, else the first non-empty line cut to
  ``abstract_chars``. ``encoding=None`` gives bytes. ``memory://session/<id>/transcript`` reads the
  messages committed for session ``<id>`` (one ``role: content`` line each). A missing entry is
  ``not_found``.
* `MemoryOpList` / `MemoryOpTree`: immediate entries (directories first-class, files with their size)
  / a pre-order walk, ``depth=0`` being the immediate entries only. ``memory://`` lists the scopes used.
* `MemoryOpFind` / `MemoryOpSearch`: our BM25 ``store.search`` under ``target_uri`` (everything without
  one), best first, with snippets; ``session_id`` does not change ranking.
* `MemoryOpCommit`: appends the messages to the record log ``store.session("openrath-<id>")`` (concurrent
  commits of a session merge) and, when the ``extract`` option is set, calls ``extract(messages)``; the
  ``(uri, text)`` pairs (or mapping) it returns are written as memories in the same commit. Extraction is
  synchronous whatever ``wait`` says, so ``extracted_count`` is always the real count. An ``extract`` that
  raises or returns bad pairs is ``extraction_failed`` and nothing is committed.
* `MemoryOpResource` is not supported (`UnsupportedMemoryOp`, as for any op not in `supported_ops`).

Failures the caller can expect are returned as `MemoryExecutionFailure`: ``invalid_uri``, ``not_found``,
``unsupported`` (a write mode), ``store_closed`` (dispatching straight to the backend with a closed
handle; the handle itself raises `MemoryStoreClosed`), ``unauthorized`` (a read-only prefix),
``transport`` (storage I/O), ``extraction_failed`` and ``internal`` (anything else, incl. a conflict that
persists after the retries). A mutating op that fails commits nothing: the handle opened by key is replaced by a
fresh one, so nothing it staged reaches a later op's commit.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import rath.memory as rm
from rath.memory import (
    MemoryBackend,
    MemoryCapabilities,
    MemoryCommitResult,
    MemoryEntry,
    MemoryExecutionFailure,
    MemoryFindResult,
    MemoryHit,
    MemoryListResult,
    MemoryOp,
    MemoryOpCommit,
    MemoryOpFind,
    MemoryOpList,
    MemoryOpRead,
    MemoryOpSearch,
    MemoryOpTree,
    MemoryOpWrite,
    MemoryReadResult,
    MemoryResult,
    MemoryStoreSpec,
    MemoryWriteResult,
    ScopeModel,
    UnsupportedMemoryOp,
)
from rath.memory import MemoryStore as RathMemoryStore

from flyteplugins_memory import (
    ConcurrencyError,
    InvalidPath,
    MemoryStore,
    ReadOnlyPath,
    ReservedPath,
    StorageError,
)

__all__ = ["NAME", "ROOT", "FlyteMemoryBackend", "path_of", "uri_of"]

NAME = "flyte"
ROOT = "openrath"
SCOPES = ("agent", "resources", "session", "user")
SUFFIX = ".md"
TRANSCRIPT = "transcript"
_PREFIXES = ("memory://", "viking://")
_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
_ATTEMPTS = 5
_OPS = (MemoryOpWrite, MemoryOpRead, MemoryOpList, MemoryOpTree, MemoryOpFind, MemoryOpSearch, MemoryOpCommit)
T = TypeVar("T")
Extract = Callable[[list[dict[str, Any]]], Any]


class _Failure(Exception):
    def __init__(self, failure: MemoryExecutionFailure):
        super().__init__(failure.message)
        self.failure = failure


def _fail(kind: Any, message: str) -> _Failure:
    return _Failure(MemoryExecutionFailure(kind=kind, message=message))


# -- pure rules: URIs <-> paths ---------------------------------------------------------------------------


def encode_segment(segment: str) -> str:
    return segment if _PLAIN.fullmatch(segment) else "~" + segment.encode("utf-8", "surrogatepass").hex()


def decode_segment(segment: str) -> str:
    if segment.startswith("~"):
        try:
            return bytes.fromhex(segment[1:]).decode("utf-8")
        except ValueError:
            return segment
    return segment


def parse_uri(uri: object) -> tuple[str, list[str]]:
    """``(scope, segments)`` of a memory URI; scope ``""`` for the root ``memory://``."""
    if not isinstance(uri, str):
        raise _fail("invalid_uri", f"a memory URI must be a str, got {type(uri).__name__}")
    scheme = next((p for p in _PREFIXES if uri.startswith(p)), None)
    if scheme is None:
        if uri.rstrip("/") in ("memory:", "viking:"):
            return "", []
        raise _fail("invalid_uri", f"URI must start with 'memory://': {uri!r}")
    tail = uri[len(scheme) :]
    tail = tail.removesuffix("/")
    if not tail:
        return "", []
    if any(ord(c) < 0x20 or c == "\x7f" for c in tail):
        raise _fail("invalid_uri", f"control characters in {uri!r}")
    scope, *rest = tail.split("/")
    if scope not in SCOPES:
        raise _fail("invalid_uri", f"unknown scope {scope!r} in {uri!r}; must be one of {list(SCOPES)}")
    if any(s in ("", ".", "..") for s in rest):
        raise _fail("invalid_uri", f"empty, '.' or '..' segment in {uri!r}")
    return scope, rest


def dir_of(scope: str, segments: Sequence[str]) -> str:
    """The store directory of a URI taken as a directory."""
    return "/".join([ROOT, *([scope] if scope else []), *(encode_segment(s) for s in segments)])


def path_of(uri: str) -> str:
    """The store file of an entry URI (``invalid_uri`` for the root or a bare scope)."""
    scope, segments = parse_uri(uri)
    if not segments:
        raise _fail("invalid_uri", f"{uri!r} names a scope, not an entry")
    return dir_of(scope, segments[:-1]) + "/" + encode_segment(segments[-1]) + SUFFIX


def uri_of(path: str) -> str | None:
    """The entry URI of a store file, None for a file that is no entry."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != ROOT or parts[1] not in SCOPES or not parts[-1].endswith(SUFFIX):
        return None
    names = [decode_segment(p) for p in parts[2:-1]] + [decode_segment(parts[-1][: -len(SUFFIX)])]
    return "memory://" + parts[1] + "/" + "/".join(names)


def _join(base: str, name: str) -> str:
    return base + name if base.endswith("://") else base.rstrip("/") + "/" + name


def _text_of(message: Any) -> dict[str, Any]:
    """A message as a ``{"role", "content"}`` dict of str (multipart ``parts`` joined)."""
    if not isinstance(message, Mapping):
        return {"role": "unknown", "content": str(message)}
    content = message.get("content")
    if content is None and isinstance(message.get("parts"), list):
        texts = [p.get("text", "") if isinstance(p, Mapping) else str(p) for p in message["parts"]]
        content = "\n".join(t for t in texts if t)
    if not isinstance(content, str):
        content = "" if content is None else json.dumps(content, default=str)
    return {"role": str(message.get("role", "unknown")), "content": content}


def _pairs(extracted: Any) -> list[tuple[str, str]]:
    items = extracted.items() if isinstance(extracted, Mapping) else extracted
    if items is None:
        return []
    pairs = []
    for item in items:
        if not (isinstance(item, tuple | list) and len(item) == 2 and all(isinstance(v, str) for v in item)):
            raise ValueError(f"extract must give (uri, text) pairs of str, got {item!r}")
        pairs.append((item[0], item[1]))
    return pairs


# -- the backend ------------------------------------------------------------------------------------------


@dataclass
class _Bound:
    store: MemoryStore
    actor: str
    extract: Extract | None
    abstract_chars: int
    overview_lines: int
    reopen: Callable[[], MemoryStore] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class FlyteMemoryBackend(MemoryBackend):
    """OpenRath's `MemoryBackend` over flyteplugins-memory stores (one key per opened OpenRath store)."""

    name = NAME

    def __init__(self) -> None:
        self._handles: dict[str, _Bound] = {}
        self._lock = threading.Lock()

    @classmethod
    def is_available(cls) -> bool:
        return True

    @classmethod
    def capabilities(cls) -> MemoryCapabilities:
        return MemoryCapabilities(
            scope_model=ScopeModel.FS,
            supports_write=True,
            supports_read=True,
            supports_list=True,
            supports_tree=True,
            supports_vector_search=False,
            supports_intent_search=False,
            supports_resource_ingest=False,
            supports_session_commit=True,
            supports_l0_l1_l2=True,
        )

    @classmethod
    def supported_ops(cls) -> frozenset[type[MemoryOp]]:
        return frozenset(
            {MemoryOpWrite, MemoryOpRead, MemoryOpList, MemoryOpTree, MemoryOpFind, MemoryOpSearch, MemoryOpCommit}
        )

    def store_count(self) -> int:
        with self._lock:
            return len(self._handles)

    def open(self, spec: MemoryStoreSpec | None = None) -> RathMemoryStore:
        spec = spec or MemoryStoreSpec()
        options = dict(spec.options or {})
        given = options.get("store")
        if given is not None and not isinstance(given, MemoryStore):
            raise TypeError(f"options['store'] must be a flyteplugins_memory.MemoryStore, got {type(given).__name__}")
        extract = options.get("extract")
        if extract is not None and not callable(extract):
            raise TypeError("options['extract'] must be callable")
        reopen: Callable[[], MemoryStore] | None = None
        if given is None:
            key = str(options.get("key") or spec.namespace or spec.user_id or "openrath")
            read_only = tuple(options.get("read_only_prefixes", ()))

            def by_key() -> MemoryStore:
                return MemoryStore.get_or_create(key=key, read_only_prefixes=read_only)

            reopen = by_key
            given = by_key()
        bound = _Bound(
            store=given,
            actor=str(options.get("actor", "openrath")),
            extract=extract,
            abstract_chars=int(options.get("abstract_chars", 200)),
            overview_lines=int(options.get("overview_lines", 20)),
            reopen=reopen,
        )
        handle = f"{NAME}-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self._handles[handle] = bound
        return RathMemoryStore(backend=self, handle=handle, spec=spec)

    def close(self, store: RathMemoryStore) -> None:
        with self._lock:
            self._handles.pop(store.handle, None)
        store.closed = True

    def handle_store(self, store: RathMemoryStore) -> MemoryStore:
        """The flyteplugins-memory store behind an open OpenRath store."""
        with self._lock:
            return self._handles[store.handle].store

    def dispatch(self, store: RathMemoryStore, op: MemoryOp) -> MemoryResult:
        if type(op) not in self.supported_ops():
            raise UnsupportedMemoryOp(op_type=type(op), backend_name=NAME)
        with self._lock:
            bound = None if store.closed else self._handles.get(store.handle)
        if bound is None:
            return MemoryExecutionFailure(kind="store_closed", message=f"memory store {store.handle!r} is closed")
        try:
            with bound.lock:
                return self._apply(bound, op)
        except _Failure as failure:
            return failure.failure
        except (InvalidPath, ReservedPath) as err:
            return MemoryExecutionFailure(kind="invalid_uri", message=str(err))
        except ReadOnlyPath as err:
            return MemoryExecutionFailure(kind="unauthorized", message=str(err))
        except (StorageError, OSError) as err:
            return MemoryExecutionFailure(kind="transport", message=f"{type(err).__name__}: {err}")
        except Exception as err:  # contract: unexpected errors are kind="internal"
            return MemoryExecutionFailure(kind="internal", message=f"{type(err).__name__}: {err}")

    # -- ops ------------------------------------------------------------------------------------------

    def _apply(self, bound: _Bound, op: MemoryOp) -> MemoryResult:
        if isinstance(op, MemoryOpWrite):
            return self._write(bound, op)
        if isinstance(op, MemoryOpRead):
            return self._read(bound, op)
        if isinstance(op, MemoryOpList):
            return MemoryListResult(entries=tuple(self._entries(bound, op.uri, 0)))
        if isinstance(op, MemoryOpTree):
            return MemoryListResult(entries=tuple(self._entries(bound, op.uri, max(op.depth, 0))))
        if isinstance(op, MemoryOpFind | MemoryOpSearch):
            return self._find(bound, op.query, op.target_uri, op.top_k)
        if isinstance(op, MemoryOpCommit):
            return self._commit_session(bound, op)
        raise UnsupportedMemoryOp(op_type=type(op), backend_name=NAME)  # pragma: no cover

    def _write(self, bound: _Bound, op: MemoryOpWrite) -> MemoryResult:
        path = path_of(op.uri)
        if op.mode not in ("replace", "write", "append"):
            raise _fail("unsupported", f"unsupported write mode: {op.mode!r} (replace, write or append)")
        if not isinstance(op.content, str):
            raise _fail("internal", f"content must be a str, got {type(op.content).__name__}")
        labels = dict(op.metadata or {})
        store = bound.store

        def apply(dropped: set[str] | None) -> None:
            if dropped is not None and path not in dropped:
                return  # still staged: applying again would append twice
            content = op.content
            metadata = labels
            if op.mode == "append":
                meta = store.get_meta(path)
                if meta is not None:
                    old = store.read_text(path)
                    content = old + ("\n" if old and not old.endswith("\n") else "") + op.content
                    metadata = {**meta.metadata, **labels}
            store.write_text(path, content, actor=bound.actor, reason=f"openrath {op.mode}", metadata=metadata)

        self._commit(bound, apply)
        return MemoryWriteResult(uri=op.uri, bytes_written=len(op.content.encode("utf-8")))

    def _read(self, bound: _Bound, op: MemoryOpRead) -> MemoryResult:
        scope, segments = parse_uri(op.uri)
        path = path_of(op.uri)
        store = bound.store
        meta = store.get_meta(path)
        labels: Mapping[str, Any] = {}
        if meta is None:
            store.refresh()  # another task may have written it since this handle loaded
            meta = store.get_meta(path)
        if meta is not None:
            text, labels = store.read_text(path), meta.metadata
        elif scope == "session" and len(segments) == 2 and segments[1] == TRANSCRIPT:
            messages = store.session(_session_name(segments[0])).messages()
            if not messages:
                raise _fail("not_found", f"no messages committed for session {segments[0]!r}")
            text = "\n".join(f"{m.get('role', '')}: {m.get('content', '')}" for m in messages)
        else:
            raise _fail("not_found", f"no memory at {op.uri}")
        if op.level == "abstract":
            given = labels.get("abstract")
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            text = str(given) if given is not None else first[: bound.abstract_chars]
        elif op.level == "overview":
            given = labels.get("overview")
            text = str(given) if given is not None else "\n".join(text.splitlines()[: bound.overview_lines])
        elif op.level != "detail":
            raise _fail("unsupported", f"unknown level {op.level!r} (abstract, overview or detail)")
        data: str | bytes = text.encode(op.encoding or "utf-8") if op.encoding is None else text
        return MemoryReadResult(uri=op.uri, data=data, level=op.level)

    def _entries(self, bound: _Bound, uri: str, depth: int) -> list[MemoryEntry]:
        """Entries under `uri` in pre-order, directories before files of one level, `depth` levels down."""
        scope, segments = parse_uri(uri)
        base = dir_of(scope, segments)
        store = bound.store
        paths = store.list_paths(base)
        tree: dict[tuple[str, str], Any] = {}  # name -> subtree (dir) or path (file), per level
        for path in paths:
            if not path.startswith(base + "/"):
                continue
            node = tree
            parts = path[len(base) + 1 :].split("/")
            for part in parts[:-1]:
                child = node.setdefault(("d", part), {})
                node = child
            if parts[-1].endswith(SUFFIX):
                node[("f", parts[-1][: -len(SUFFIX)])] = path
        out: list[MemoryEntry] = []

        def walk(node: dict[tuple[str, str], Any], at: str, level: int) -> None:
            for kind, name in sorted(node):
                entry_uri = _join(at, decode_segment(name))
                if kind == "d":
                    out.append(MemoryEntry(name=decode_segment(name), uri=entry_uri, is_dir=True, size=None))
                    if level < depth:
                        walk(node[(kind, name)], entry_uri, level + 1)
                else:
                    meta = store.get_meta(node[(kind, name)])
                    size = meta.bytes if meta is not None else None
                    out.append(MemoryEntry(name=decode_segment(name), uri=entry_uri, is_dir=False, size=size))

        walk(tree, uri if scope else "memory://", 0)
        return out

    def _find(self, bound: _Bound, query: str, target_uri: str | None, top_k: int) -> MemoryResult:
        prefix = ROOT
        if target_uri is not None:
            scope, segments = parse_uri(target_uri)
            prefix = dir_of(scope, segments)
        if not isinstance(query, str) or not query.strip() or top_k < 1:
            return MemoryFindResult(hits=())
        hits = []
        for hit in bound.store.search(query, prefix=prefix, limit=top_k):
            uri = uri_of(hit.path)
            if uri is not None:
                hits.append(MemoryHit(uri=uri, score=float(hit.score), snippet=hit.snippet or None, level="detail"))
        return MemoryFindResult(hits=tuple(hits))

    def _commit_session(self, bound: _Bound, op: MemoryOpCommit) -> MemoryResult:
        if not isinstance(op.session_id, str) or not op.session_id or "/" in op.session_id:
            raise _fail("invalid_uri", f"MemoryOpCommit needs a session_id of one segment, got {op.session_id!r}")
        messages = [_text_of(m) for m in op.messages]
        extracted: list[tuple[str, str]] = []
        if bound.extract is not None:
            try:
                extracted = _pairs(bound.extract([dict(m) for m in messages]))
                paths = [path_of(uri) for uri, _ in extracted]
            except _Failure as failure:
                raise _fail("extraction_failed", f"extract returned a bad URI: {failure.failure.message}") from None
            except Exception as err:
                raise _fail("extraction_failed", f"extract raised {type(err).__name__}: {err}") from None
        else:
            paths = []
        name = _session_name(op.session_id)
        store = bound.store
        log = f"sessions/{name}"

        def apply(dropped: set[str] | None) -> None:
            for path, (_, text) in zip(paths, extracted, strict=True):
                if dropped is None or path in dropped:
                    store.write_text(path, text, actor=bound.actor, reason=f"openrath commit {op.session_id}")
            if messages and (dropped is None or any(d == log or d.startswith(log + "/") for d in dropped)):
                store.session(name).extend(messages)  # last: a failed write above leaves no messages staged

        self._commit(bound, apply)
        archived = f"memory://session/{op.session_id}/{TRANSCRIPT}"
        return MemoryCommitResult(task_id=None, archived_uri=archived, extracted_count=len(extracted))

    def _commit(self, bound: _Bound, apply: Callable[[set[str] | None], None]) -> None:
        """Stage `apply` and save; on a conflict, refresh and re-apply what the refresh dropped. If the op
        fails anyway, a handle the backend opened is replaced by a fresh one, so nothing it staged is
        committed by a later op (a caller's ``options["store"]`` keeps what was staged)."""
        store = bound.store
        dropped: set[str] | None = None
        try:
            for attempt in range(_ATTEMPTS):
                apply(dropped)
                try:
                    store.save(actor=bound.actor)
                    return
                except ConcurrencyError as err:
                    if attempt == _ATTEMPTS - 1:
                        raise _fail("internal", f"save still conflicts after {_ATTEMPTS} attempts: {err}") from None
                    dropped = set(store.refresh())
        except BaseException:
            if bound.reopen is not None:
                bound.store = bound.reopen()
            raise


def _session_name(session_id: str) -> str:
    return "openrath-" + encode_segment(session_id)


def _register() -> type[FlyteMemoryBackend]:
    """Register the backend as ``"flyte"`` (once per process; a reload keeps the first registration)."""
    if NAME not in rm.list_names():
        rm.register(NAME)(FlyteMemoryBackend)
    return FlyteMemoryBackend


_register()
