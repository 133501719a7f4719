"""flyteplugins-memory: durable, keyed memory for AI agents that run as Flyte tasks.

A drop-in for ``flyte.ai.agents.MemoryStore`` (same API, same storage layout) with typed errors, a
uniform sync / ``.aio`` surface and safe handling of hostile paths and content.
"""

import inspect
import typing

from ._api.archive.export import ExportResult
from ._api.conversations import Conversation
from ._api.flyte_agents import INSTALL_ENV, install, uninstall
from ._api.flyte_type import MemoryStoreTransformer, register_memory_store_type
from ._api.history.time_travel import StoreAt
from ._api.reader import MemoryReader
from ._api.records import RecordLog
from ._api.scopes.view import ScopedStore
from ._api.search import SearchHit
from ._api.store import MemoryStore
from ._api.transcript.compaction import CompactionResult
from ._base import version as _version
from ._base.retry import RetryPolicy, get_retry_policy, set_retry_policy
from ._base.version import READER_REVISION
from ._journal.commit_log import Commit
from ._journal.gc import GcResult
from ._journal.history import HistoryEntry
from ._journal.purge import PurgeResult
from ._rules.codecs import MemoryMeta
from ._rules.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    MessageModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ._rules.paths import MESSAGES_PATH
from ._rules.progress import ProgressCallback
from ._rules.proposals import Proposal, ProposalStatus
from ._rules.retention_policy import RetentionPolicy
from .errors import (
    AccessDenied,
    ArchiveExists,
    ArchiveNotFound,
    BlockingCallOnLoop,
    CommitNotFound,
    ConcurrencyError,
    ContentChanged,
    ContentPurged,
    ContextError,
    CorruptStore,
    InvalidArgument,
    InvalidContent,
    InvalidKey,
    InvalidMessage,
    InvalidMetadata,
    InvalidPath,
    InvalidRecord,
    InvalidRetention,
    InvalidTransition,
    MemoryStoreError,
    MessageNotFound,
    NotText,
    NotTrusted,
    PathEscapesRoot,
    PathNotFound,
    ProposalConflict,
    ProposalNotFound,
    ReadOnlyPath,
    ReadOnlySnapshot,
    RecordNotFound,
    ReservedPath,
    StateCollected,
    StorageError,
    StoreAlreadyExists,
    StoreDeleted,
    StoreFormatTooNew,
    StoreNotFound,
    UnsafeArchive,
    UnsafeStoreContent,
    UnsavedChanges,
    UnsupportedBackend,
    VersionExpired,
    VersionNotFound,
)
from .storage import (
    UNVERIFIED_BACKENDS_ENV,
    Capabilities,
    ObjectStorage,
    allow_unverified_backend,
    get_max_in_flight,
    set_max_in_flight,
    set_storage_options,
)
from .storage._byte_stream import ByteStream

__all__ = [
    "AccessDenied",
    "ArchiveExists",
    "ArchiveNotFound",
    "AssistantMessage",
    "BlockingCallOnLoop",
    "ByteStream",
    "Capabilities",
    "Commit",
    "CommitNotFound",
    "CompactionResult",
    "ConcurrencyError",
    "ContentChanged",
    "ContentPurged",
    "ContextError",
    "Conversation",
    "CorruptStore",
    "ExportResult",
    "FunctionCall",
    "GcResult",
    "HistoryEntry",
    "INSTALL_ENV",
    "InvalidArgument",
    "InvalidContent",
    "InvalidKey",
    "InvalidMessage",
    "InvalidMetadata",
    "InvalidPath",
    "InvalidRecord",
    "InvalidRetention",
    "InvalidTransition",
    "MESSAGES_PATH",
    "MemoryMeta",
    "MemoryReader",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryStoreTransformer",
    "Message",
    "MessageModel",
    "MessageNotFound",
    "NotText",
    "NotTrusted",
    "ObjectStorage",
    "PathEscapesRoot",
    "PathNotFound",
    "ProgressCallback",
    "Proposal",
    "ProposalConflict",
    "ProposalNotFound",
    "ProposalStatus",
    "PurgeResult",
    "READER_REVISION",
    "ReadOnlyPath",
    "ReadOnlySnapshot",
    "RecordLog",
    "RecordNotFound",
    "ReservedPath",
    "RetentionPolicy",
    "RetryPolicy",
    "ScopedStore",
    "SearchHit",
    "StateCollected",
    "StorageError",
    "StoreAlreadyExists",
    "StoreAt",
    "StoreDeleted",
    "StoreFormatTooNew",
    "StoreNotFound",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "UNVERIFIED_BACKENDS_ENV",
    "UnsafeArchive",
    "UnsafeStoreContent",
    "UnsavedChanges",
    "UnsupportedBackend",
    "UserMessage",
    "VersionExpired",
    "VersionNotFound",
    "allow_unverified_backend",
    "get_max_in_flight",
    "get_retry_policy",
    "install",
    "register_memory_store_type",
    "set_max_in_flight",
    "set_retry_policy",
    "set_storage_options",
    "uninstall",
]

__version__: str = _version.PACKAGE_VERSION


def _exported_from_here() -> None:
    """Name this package as the home of every exported class: the inner layout may move a class between
    modules, but its pickles (errors crossing processes, task outputs) and reprs keep naming
    ``flyteplugins_memory.<Name>``, which this module always exports."""
    for name in __all__:
        obj = globals()[name]
        if not (isinstance(obj, type) and obj.__module__.startswith(__name__ + ".")):
            continue
        # annotations are strings (``from __future__ import annotations``), resolved in the module named by
        # ``__module__``: resolve them where they were written first, so `typing.get_type_hints` (flyte's
        # type engine, dataclass tools) keeps working once the class names this package
        own = inspect.get_annotations(obj)
        try:
            hints = typing.get_type_hints(obj, include_extras=True)
        except NameError:  # a name imported for type checkers only: left as written (unresolvable before too)
            hints = {}
        if own and all(key in hints for key in own):
            obj.__annotations__ = {key: hints[key] for key in own}
        obj.__module__ = __name__


_exported_from_here()

register_memory_store_type()
