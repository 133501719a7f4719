"""An OpenRath memory backend (``rath.memory``) over a flyteplugins-memory store, registered as ``"flyte"``.

Importing this module imports ``rath`` (``openrath``) at its top and registers `FlyteMemoryBackend` under
the name ``"flyte"``; the adapters package is only imported explicitly, so ``flyteplugins_memory`` itself
never needs openrath. Use it as any OpenRath backend::

    import flyteplugins_memory.adapters.openrath  # registers "flyte"
    import rath.memory as memory
    store = memory.get("flyte").open(memory.MemoryStoreSpec(options={"key": "my-agent"}))
    agent = flow.Agent("...", model="...", memory=store)

One OpenRath store is one key of ours. The key is ``<base>`` or, when ``user_id`` is set, ``<base>@<user>``
(the user a plain segment or ``~``-hex; ``~~`` and its sha256 when that key would pass the 255-byte limit of a
key, so any user id works; a base too long is a ``ValueError``), where ``<base>`` is ``options["key"]``, else
``namespace``, else ``"openrath"``: users never share a key, so they never see each other's entries (of any
scope). ``@`` is refused in the base, so two (base, user) pairs never meet in one key. ``account_id`` and
``agent_id`` are ignored. ``options["store"]`` may instead be an open `flyteplugins_memory.MemoryStore` handle
(the caller's, e.g. inside a Flyte task); with ``user_id`` set it is refused, since the caller's key cannot
include the user. Other options: ``actor`` (the audit actor, default ``"openrath"``), ``extract`` (see
commit), ``abstract_chars`` (200), ``overview_lines`` (20), ``read_only_prefixes`` (store paths, e.g.
``("openrath/agent",)``, for the handle opened by key; when that open creates the key, our
``get_or_create`` persists them with the store, so every later handle of the key enforces them too,
opened with them or not; on a key that exists they are this handle's alone) and the local backend's
resource policy (``resource_import_roots``, ``resource_allowed_http_hosts``,
``resource_allow_private_hosts``, ``resource_max_bytes``; see `sources`). Reads see the handle's state (a
read of a missing entry, or of an empty transcript, refreshes once first); every mutating op saves.

A caller's ``options["store"]`` (the shared-handle policy, decision 0133): while the handle you gave
holds unsaved changes, the adapter reads it without refreshing (a refresh would drop them), and refuses
every mutating op (write, commit, resource ingest) before anything runs or lands, as ``unauthorized``
with ``detail="UnsavedChanges"`` (`flyteplugins_memory.UnsavedChanges`'s message: save() or revert()
them first, or give the adapter its own handle: the key), since its save would commit them under the
adapter's name. A handle opened by key never holds changes of a caller: unchanged.

URIs (`uris`): ``memory://<scope>/<seg>/.../<name>`` with scope ``user``, ``agent``, ``session``
or ``resources`` (legacy ``viking://`` is accepted too) names the file ``openrath/<scope>/<seg>/.../<name>.md``
of the store. A segment of letters, digits and ``_-.`` (not starting with ``.``, not ending in ``.md``) is
itself; any other is ``~`` and the hex of its UTF-8 bytes, so every URI maps to one path and back, and
only entries' files end in ``.md``: ``a`` can be an entry and a directory, and so can ``a.md``. Empty,
``.`` and ``..`` segments, control characters, lone surrogates (no UTF-8 form), other schemes and unknown
scopes are ``invalid_uri``.
Entries the first release wrote under a name ending in ``.md`` (then kept plain) are still read, listed
and found.

Ops (`reads`, `writes`; every mutating op is one commit, re-applied to the newest
committed state after a concurrent save of the same file, up to 5 times, so concurrent writers lose
nothing):

* `MemoryOpWrite`: ``mode="replace"`` (or ``"write"``) replaces the text, ``"append"`` appends it (on a new
  line) to what is committed; other modes are ``unsupported``. ``metadata`` is kept as file metadata;
  its ``abstract`` and ``overview`` values become those levels. ``memory://session/<id>/transcript`` is
  ``unauthorized``: only a commit writes it.
* `MemoryOpRead`: ``detail`` is the full text; ``overview`` is the ``overview`` metadata, else the first
  ``overview_lines`` lines; ``abstract`` is the ``abstract`` metadata, else the first non-empty line cut to
  ``abstract_chars``. ``encoding=None`` gives bytes (``detail``: the stored bytes exactly; a binary entry
  read with an encoding is ``unsupported``). ``memory://session/<id>/transcript`` reads the
  messages committed for session ``<id>`` (one ``role: content`` line each), never a file; none (an
  empty commit, or none yet) is an empty transcript. A missing entry is ``not_found``.
* `MemoryOpList` / `MemoryOpTree`: immediate entries (directories first-class, files with their size)
  / a pre-order walk, ``depth=0`` being the immediate entries only. ``memory://`` lists the scopes used.
* `MemoryOpFind` / `MemoryOpSearch`: our BM25 ``store.search`` under ``target_uri`` (everything without
  one), best first, with snippets; ``session_id`` does not change ranking. One hit per URI, as listings
  show it: an entry both rules wrote is found at this rule's file only.
* A file the first release let a write put at a transcript URI is never listed, walked or found.
* `MemoryOpCommit`: ``session_id`` must be one URI segment (not empty, ``.`` or ``..``, no ``/`` or
  control characters; else ``invalid_uri``, before anything runs). Archives the messages, as given, as
  JSON at ``memory://session/<id>/commits/<stamp>/messages.json`` (`archive`: OpenRath's local backend's
  URI, one archive per commit, an empty list for a commit of none), which is the ``archived_uri``
  returned; appends them to the record log ``store.session("openrath-<id>")`` (concurrent commits of a
  session merge), which ``memory://session/<id>/transcript`` reads; and, when the ``extract`` option is
  set, calls ``extract(messages)``, whose ``(uri, text)`` pairs (or mapping) are written as memories, all
  in the same commit. Extraction is synchronous whatever ``wait`` says; ``extracted_count`` is reported
  as the local backend reports it: the count with ``wait=True``, ``-1`` with ``wait=False``. An
  ``extract`` that raises or returns bad pairs (or a transcript or archive URI) is ``extraction_failed``
  and nothing is committed.
* `MemoryOpResource` (`resources`, `sources`): a file, a directory (recursively) or an ``http(s)`` URL
  (``fsspec.open``, its body read to the end within ``resource_max_bytes`` and the op's
  ``timeout_seconds``; a local file through one ``O_NOFOLLOW`` open that must be the file checked),
  read under the local backend's policy options (nothing by default), lands in one
  commit under ``target_uri`` (``memory://resources`` or under it) as ``<target>/<id>/source<suffix>``
  (a directory: ``source/<path>`` per file) and ``<target>/<id>/meta``, bytes exactly, labelled, text
  searchable; the result is ``MemoryWriteResult(uri=<target>/<id>, bytes_written)``.

Failures the caller can expect are returned as `MemoryExecutionFailure` (`errors`):
``invalid_uri``, ``not_found``, ``unsupported`` (a write mode, a binary entry read as text, a resource
scheme), ``store_closed`` (dispatching straight to the backend with a closed handle; the handle itself
raises `MemoryStoreClosed`), ``unauthorized`` (a read-only prefix, a transcript, an archive, a resource
source outside the policy or changed between its check and its read, a caller's handle with unsaved
changes), ``transport`` (storage I/O, a failed fetch, a resource over its size limit),
``extraction_failed`` and ``internal`` (anything else, incl. a conflict that persists after the retries).
A mutating op that fails commits nothing and stages nothing: what it staged (its files, via
``MemoryStore.revert``, and its session-log appends) is dropped from the handle, the backend's or a
caller's ``options["store"]``, so no later save commits it (a caller's store holds no unsaved changes
of the caller then: the op is refused if it does).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from typing import Any

import rath.memory as rm
from rath.memory import (
    MemoryBackend,
    MemoryCapabilities,
    MemoryExecutionFailure,
    MemoryOp,
    MemoryResult,
    MemoryStoreSpec,
    ScopeModel,
    UnsupportedMemoryOp,
)
from rath.memory import MemoryStore as RathMemoryStore

from flyteplugins_memory import MemoryStore

from .errors import failure_of
from .ops import OPS, Bound, apply
from .sources import resource_policy
from .uris import ROOT, path_of, store_key, uri_of

__all__ = ["NAME", "ROOT", "FlyteMemoryBackend", "path_of", "store_key", "uri_of"]

NAME = "flyte"


class FlyteMemoryBackend(MemoryBackend):
    """OpenRath's `MemoryBackend` over flyteplugins-memory stores (one key per opened OpenRath store)."""

    name = NAME

    def __init__(self) -> None:
        self._handles: dict[str, Bound] = {}
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
            supports_resource_ingest=True,
            supports_session_commit=True,
            supports_l0_l1_l2=True,
        )

    @classmethod
    def supported_ops(cls) -> frozenset[type[MemoryOp]]:
        return OPS

    def store_count(self) -> int:
        with self._lock:
            return len(self._handles)

    def open(self, spec: MemoryStoreSpec | None = None) -> RathMemoryStore:
        spec = spec or MemoryStoreSpec()
        options = dict(spec.options or {})
        extract = options.get("extract")
        if extract is not None and not callable(extract):
            raise TypeError("options['extract'] must be callable")
        store = _our_store(spec, options)
        bound = Bound(
            store=store,
            actor=str(options.get("actor", "openrath")),
            extract=extract,
            abstract_chars=int(options.get("abstract_chars", 200)),
            overview_lines=int(options.get("overview_lines", 20)),
            policy=resource_policy(options),
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
        if type(op) not in OPS:
            raise UnsupportedMemoryOp(op_type=type(op), backend_name=NAME)
        with self._lock:
            bound = None if store.closed else self._handles.get(store.handle)
        if bound is None:
            return MemoryExecutionFailure(kind="store_closed", message=f"memory store {store.handle!r} is closed")
        try:
            with bound.lock:
                return apply(bound, op)
        except Exception as err:  # contract: failures are returned; unexpected ones as kind="internal"
            return failure_of(err)


def _our_store(spec: MemoryStoreSpec, options: Mapping[str, Any]) -> MemoryStore:
    """The store an OpenRath store opens: the caller's, or the one of its key."""
    given = options.get("store")
    if given is not None:
        if not isinstance(given, MemoryStore):
            raise TypeError(f"options['store'] must be a flyteplugins_memory.MemoryStore, got {type(given).__name__}")
        if spec.user_id:
            raise ValueError("options['store'] cannot be combined with user_id: open one store per user instead")
        return given
    key = store_key(str(options.get("key") or spec.namespace or "openrath"), spec.user_id)
    read_only = tuple(options.get("read_only_prefixes", ()))
    return MemoryStore.get_or_create(key=key, read_only_prefixes=read_only)


def _register() -> type[FlyteMemoryBackend]:
    """Register the backend as ``"flyte"`` (once per process; a reload keeps the first registration)."""
    if NAME not in rm.list_names():
        rm.register(NAME)(FlyteMemoryBackend)
    return FlyteMemoryBackend


_register()
