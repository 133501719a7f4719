"""Every error the store raises, in one place.

Upstream's three names stay so existing ``except`` clauses keep working, and each of ours subclasses
upstream's class of that name, so ``except flyte.ai.agents.ConcurrencyError`` catches ours too; each
precise leaf also inherits the builtin it corresponds to, so ``except FileNotFoundError`` and friends
work as well::

    MemoryStoreError (upstream's, a RuntimeError)   upstream name; base of everything below
    ├── InvalidKey (ValueError)                     key is not a single safe path segment
    ├── InvalidPath (ValueError)                    relative path is absolute, empty, has '..' or NUL
    │   └── PathEscapesRoot                         path leaves the store root (e.g. through a symlink)
    ├── AccessDenied (PermissionError)              upstream name; write refused by policy
    │   ├── ReservedPath                            messages.json, audit/, meta/, versions/
    │   ├── ReadOnlyPath                            under one of the store's read_only_prefixes
    │   ├── NotTrusted                              needs a handle opened with trusted=True
    │   └── ReadOnlySnapshot                        a write to a view of the past (`store.at(commit)`)
    ├── ConcurrencyError                            upstream name; stale expected_sha or conflicting save
    │   ├── ProposalConflict                        a proposal decided concurrently (accept/discard lost)
    │   └── ContentChanged                          a file replaced in place while open_bytes read it
    ├── ProposalNotFound (KeyError)                 no proposal with that id
    ├── MessageNotFound (IndexError)                no transcript message at that index (purge_message)
    ├── RecordNotFound (IndexError)                 no record of a log at that index (RecordLog.purge)
    ├── InvalidTransition (ValueError)              a decision a proposal's status does not allow
    ├── InvalidMessage (ValueError)                 a message (or actor/reason) that cannot be stored
    ├── InvalidContent (ValueError)                 file content that is not a str of valid Unicode
    │   └── NotText (also CorruptStore)             read_text of binary content (not UTF-8): read_bytes
    ├── InvalidRecord (ValueError)                  a record of a log that is not a storable JSON value
    ├── InvalidArgument (ValueError)                a count, window, flag or option of the wrong type or range
    │   ├── InvalidMetadata                         file metadata or a filter that is not a small map of scalars
    │   ├── InvalidRetention                        a retention policy or a ttl of the wrong type or range
    │   └── UnsafeArchive                           an archive import_store refuses (`reason` says which rule)
    ├── UnsavedChanges                              a store that cannot be saved for you has unsaved changes
    ├── BlockingCallOnLoop (RuntimeError)           a sync call made on the package's own event loop
    ├── UnsupportedBackend (ValueError)             a backend whose create-only writes are not known atomic
    ├── PathNotFound (FileNotFoundError)            open_bytes of a path that is no file of the store
    ├── StoreNotFound (FileNotFoundError)           no store at the key's remote path
    │   └── StoreDeleted                            delete_store removed it (a save after that, a re-create)
    ├── VersionNotFound (FileNotFoundError)         no such version snapshot, or version id of a path
    │   └── VersionExpired                          a version whose file's ttl has run out (written with ttl=)
    ├── CommitNotFound (LookupError)                a commit `store.at()` cannot show (never made, or collected)

    ├── ArchiveNotFound (FileNotFoundError)         import_store of an archive that is not there
    ├── StateCollected (FileNotFoundError)          a pinned commit or version that gc() removed
    │   └── ContentPurged                           content that purge() removed
    ├── StoreAlreadyExists (FileExistsError)        create() of a key that is already there
    ├── ArchiveExists (FileExistsError)             export(dest, overwrite=False) where dest is taken
    ├── CorruptStore (ValueError)                   a transcript, sidecar or object is malformed
    │   └── UnsafeStoreContent                      remote content that would escape or collide
    ├── ContextError (LookupError)                  org/project/domain/raw-data path unavailable
    ├── StorageError (OSError)                      the storage backend failed
    └── StoreFormatTooNew (ValueError)              journal data from a newer version: refused on open
                                                    (newer major format) or on write (higher min_reader)
"""

from __future__ import annotations

from flyte.ai.agents import memory as _upstream

__all__ = [
    "AccessDenied",
    "ArchiveExists",
    "ArchiveNotFound",
    "BlockingCallOnLoop",
    "CommitNotFound",
    "ConcurrencyError",
    "ContentChanged",
    "ContentPurged",
    "ContextError",
    "CorruptStore",
    "InvalidArgument",
    "InvalidContent",
    "InvalidKey",
    "InvalidMessage",
    "InvalidMetadata",
    "InvalidPath",
    "InvalidRecord",
    "InvalidRetention",
    "InvalidTransition",
    "MemoryStoreError",
    "MessageNotFound",
    "NotText",
    "NotTrusted",
    "PathEscapesRoot",
    "PathNotFound",
    "ProposalConflict",
    "ProposalNotFound",
    "ReadOnlyPath",
    "ReadOnlySnapshot",
    "RecordNotFound",
    "ReservedPath",
    "StateCollected",
    "StorageError",
    "StoreAlreadyExists",
    "StoreDeleted",
    "StoreFormatTooNew",
    "StoreNotFound",
    "UnsafeArchive",
    "UnsafeStoreContent",
    "UnsavedChanges",
    "UnsupportedBackend",
    "VersionExpired",
    "VersionNotFound",
]


class MemoryStoreError(_upstream.MemoryStoreError):
    """Base class of every error raised by the memory store."""


class InvalidKey(MemoryStoreError, ValueError):
    """A store key (or org/project/domain) is not a single, safe path segment."""


class InvalidPath(MemoryStoreError, ValueError):
    """A memory-relative path is malformed: absolute, empty, with ``..`` or a NUL byte."""


class PathEscapesRoot(InvalidPath):
    """A path resolves outside the store root, for example through a symlink."""


class AccessDenied(MemoryStoreError, _upstream.AccessDenied, PermissionError):
    """A write targets a path the store does not allow to be written."""


class ReservedPath(AccessDenied):
    """A write targets the transcript or the store's own bookkeeping prefixes."""


class ReadOnlyPath(AccessDenied):
    """A write targets one of the store's ``read_only_prefixes``."""


class NotTrusted(AccessDenied):
    """An operation only a handle opened with ``trusted=True`` may do (changing the store's persisted
    read-only prefixes)."""


class ConcurrencyError(MemoryStoreError, _upstream.ConcurrencyError):
    """A write's ``expected_sha`` does not match, or a save conflicts with a concurrent save.

    Keeps upstream's constructor and attributes (``path``, ``expected_sha``, ``actual_sha``); ``paths``
    lists every conflicting path (``messages.json`` for a transcript conflict).
    """

    def __init__(self, path: str, expected_sha: str, actual_sha: str, *, paths: tuple[str, ...] = ()):
        message = f"ConcurrencyError for {path!r}: expected_sha={expected_sha} actual_sha={actual_sha}"
        if not expected_sha and not actual_sha:  # no hashes to show (the transcript, a purge): say what happened
            message = f"ConcurrencyError for {path!r}: a concurrent save changed it (refresh() and try again)"
        if len(paths) > 1:
            message = f"ConcurrencyError: concurrent changes conflict on {', '.join(map(repr, paths))}"
        Exception.__init__(self, message)  # upstream's __init__ takes (path, expected_sha, actual_sha)
        self.path = path
        self.expected_sha = expected_sha
        self.actual_sha = actual_sha
        self.paths = paths or (path,)


class ProposalConflict(ConcurrencyError):
    """Another handle decided the same proposal (accepted or discarded it) after this one looked at it;
    this decision committed nothing. ``path`` names the proposal (``/proposals/<id>``)."""


class ContentChanged(ConcurrencyError):
    """A stream (``open_bytes``) over a file stored in place at its path found other bytes there than the
    ones it opened (another writer replaced the file meanwhile): nothing read is to be trusted. Opening
    it again reads what the view shows: a handle's, the state as it is now; a past state's
    (``store.at(commit)``), the same commit, whose old bytes a save of ours kept in a copy (an upstream
    writer keeps none: then the stream raises this error again, docs/decisions/0162)."""

    def __init__(self, path: str, expected_sha: str):
        super().__init__(path, expected_sha, "")
        Exception.__init__(self, f"{path!r} changed in storage while open_bytes read it; open it again")


class ProposalNotFound(MemoryStoreError, KeyError):
    """No proposal with that id in the store (``accept``, ``discard``, ``proposal``)."""

    def __str__(self) -> str:  # KeyError's would quote the message
        return str(self.args[0]) if self.args else ""


class MessageNotFound(MemoryStoreError, IndexError):
    """No message of the transcript at that index (``purge_message``)."""


class RecordNotFound(MemoryStoreError, IndexError):
    """No record of the log at that index (``RecordLog.purge``)."""


class InvalidTransition(MemoryStoreError, ValueError):
    """A decision the proposal's status does not allow: only draft -> accepted | discarded and
    accepted -> discarded exist."""


class InvalidMessage(MemoryStoreError, ValueError):
    """A transcript message (or an audit field: actor, reason) that cannot be stored: not a dict, a
    circular reference, a dict key JSON cannot take, keys JSON makes equal, too deep, or not valid
    Unicode."""


class InvalidContent(MemoryStoreError, ValueError):
    """File content that cannot be stored as text: not a str, or not valid Unicode (a lone surrogate)."""


class InvalidRecord(MemoryStoreError, ValueError):
    """A record appended to a log (``store.records(name)``) that is not a storable JSON value: a value
    JSON cannot encode (an object, a set, NaN or an infinity), a circular reference, a dict key JSON
    cannot take, keys JSON makes equal, too deep, or not valid Unicode."""


class InvalidArgument(MemoryStoreError, ValueError):
    """A plain argument of the public API with the wrong type or out of range (a ``limit`` that is not a
    non-negative int, a negative or non-timedelta window, a flag that is not a bool, ...); refused before
    anything is read or written."""


class InvalidMetadata(InvalidArgument):
    """File metadata (or a ``where`` filter) that is not a small map of non-empty str keys to finite str,
    int, float or bool values; refused before anything changes."""


class InvalidRetention(InvalidArgument):
    """A retention policy (``keep_last`` an int >= 1, ``max_age`` a positive timedelta) or a write's ``ttl``
    (a positive timedelta) of the wrong type or range; refused before anything changes."""


class UnsafeArchive(InvalidArgument):
    """An archive ``import_store`` refuses before writing anything. `reason` names the rule: ``not_archive``
    (not a gzip'd tar), ``absolute_path``, ``parent_path``, ``unsafe_path``, ``unknown_member``, ``link``,
    ``special_file``, ``duplicate``, ``unlisted_member``, ``missing_member``, ``checksum``,
    ``member_too_large``, ``total_too_large``, ``bad_manifest``, ``unknown_format``, ``file_and_directory``
    (one name both a file and a directory of others), ``header_too_large`` (tar header records, such as
    long names, over 64 KiB for one member)."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


class UnsavedChanges(MemoryStoreError):
    """A store with unsaved changes is handed on where it cannot be saved for you (for example nested
    in a dataclass task output, or to a framework adapter about to commit its own write, which would commit
    yours under its name); call ``save()`` (or ``revert()``) first."""


class BlockingCallOnLoop(MemoryStoreError, RuntimeError):
    """A blocking ``f(...)`` call made on the package's own event loop (from one of its coroutines or
    callbacks), where waiting for the result would deadlock; ``await f.aio(...)`` there instead."""


class UnsupportedBackend(MemoryStoreError, ValueError):
    """The storage backend is not known to make create-only writes atomic, which the commit point
    relies on; see docs/guide/flyte.md, "Backends", for opting in."""


class StateCollected(MemoryStoreError, FileNotFoundError):
    """A handle pinned to a commit (or a version) that ``gc()`` has removed; open the store again."""


class ContentPurged(StateCollected):
    """Content that ``purge(path)`` removed from every stored copy."""


class PathNotFound(MemoryStoreError, FileNotFoundError):
    """``open_bytes`` of a path that is no file of the store (missing, deleted, expired, or a directory):
    a stream has no ``default`` to return, as ``read_bytes`` does."""


class StoreNotFound(MemoryStoreError, FileNotFoundError):
    """No store exists at the key's remote path."""


class StoreDeleted(StoreNotFound):
    """``MemoryStore.delete_store`` removed the store: a handle of it saving afterwards, or a ``create``
    of its key while its deletion record stands. The message says who deleted it, when and why."""


class VersionNotFound(MemoryStoreError, FileNotFoundError):
    """A version named by ``read_version`` (a snapshot, or a version id of `history`) does not exist, or
    its content is no longer stored (the message says so: collected by gc(), or purged)."""


class VersionExpired(VersionNotFound):
    """A version of a file written with ``ttl=`` whose ttl has run out: its content is readable through no
    path any more (``read_version``, ``diff``, ``restore``), and the next ``gc()`` removes it from storage."""


class CommitNotFound(MemoryStoreError, LookupError):
    """``store.at(commit)`` of a commit the store never made, or one gc() collected (the message says)."""


class ReadOnlySnapshot(AccessDenied):
    """A write, delete or save through a view of the store's past (``store.at(commit)``), or a change made
    to the list ``store.session(name).messages`` (a copy of the session's log: append with
    ``session.append``, redact with ``session.purge_message``)."""


class ArchiveNotFound(MemoryStoreError, FileNotFoundError):
    """``import_store`` was given an archive path or URI where there is nothing."""


class ArchiveExists(MemoryStoreError, FileExistsError):
    """``export(dest, overwrite=False)`` where something is already at `dest`."""


class StoreAlreadyExists(MemoryStoreError, FileExistsError):
    """``create`` was called for a key whose store already exists."""


class CorruptStore(MemoryStoreError, ValueError):
    """Stored content (transcript, sidecar, audit record) is malformed; it is never read as empty."""


class NotText(InvalidContent, CorruptStore):
    """A text read (``read_text``, ``read_json``, ``read_version``) of content that is not UTF-8: binary
    content written with ``write_bytes`` (or by upstream); read it with ``read_bytes``. Also a
    `CorruptStore`, which such reads raised before binary content had an API of its own."""


class UnsafeStoreContent(CorruptStore):
    """Remote content names a path that would escape the store root or collide with its bookkeeping."""


class ContextError(MemoryStoreError, LookupError):
    """The Flyte context lacks what a keyed store needs (org, project, domain or a raw-data path)."""


class StorageError(MemoryStoreError, OSError):
    """The storage backend failed; the original exception is chained as ``__cause__``."""


class StoreFormatTooNew(MemoryStoreError, ValueError):
    """Journal data written by a newer version of this package: a major format this version cannot read
    (refused on open), or features it must not write over (``min_reader``; reads work, saves, ``compact``,
    ``gc``, ``purge`` and ``set_gc_window`` are refused). The message names the version that wrote it; `writer` holds it
    (``""`` if the object does not say)."""

    def __init__(self, message: str, *, writer: str = ""):
        super().__init__(message)
        self.writer = writer
