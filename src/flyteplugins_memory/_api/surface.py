"""Everything the package exports, imported at once: what ``import flyteplugins_memory`` loads the first
time one of its names is used (the package's ``__init__`` itself loads nothing heavy, so a command line,
``--help`` or ``--version`` starts as fast as ``import flyte``).

Loading this module names the package as the home of every exported class and registers the
``MemoryStore`` type transformer with Flyte's type engine, as importing the package always did.
"""

import inspect as _inspect
import typing as _typing

from .._base.retry import RetryPolicy, get_retry_policy, set_retry_policy
from .._base.version import READER_REVISION
from .._journal.commit_log import Commit
from .._journal.gc import GcResult
from .._journal.history import HistoryEntry
from .._journal.purge import PurgeResult
from .._rules.codecs import MemoryMeta
from .._rules.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    MessageModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from .._rules.paths import MESSAGES_PATH
from .._rules.progress import ProgressCallback
from .._rules.proposals import Proposal, ProposalStatus
from .._rules.retention_policy import RetentionPolicy
from ..errors import (
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
from ..storage import (
    UNVERIFIED_BACKENDS_ENV,
    Capabilities,
    ObjectStorage,
    allow_unverified_backend,
    get_max_in_flight,
    set_max_in_flight,
    set_storage_options,
)
from ..storage._byte_stream import ByteStream
from .archive.export import ExportResult
from .conversations import Conversation
from .flyte_agents import INSTALL_ENV, install, uninstall
from .flyte_type import MemoryStoreTransformer, register_memory_store_type
from .history.time_travel import StoreAt
from .reader import MemoryReader
from .records import RecordLog
from .scopes.view import ScopedStore
from .search import SearchHit
from .store import MemoryStore
from .transcript.compaction import CompactionResult

# the package's own `__all__`, which tests/api/test_api.py holds equal to this one
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

_PACKAGE = "flyteplugins_memory"


def _exported_from_here() -> None:
    """Name this package as the home of every exported class: the inner layout may move a class between
    modules, but its pickles (errors crossing processes, task outputs) and reprs keep naming
    ``flyteplugins_memory.<Name>``, which the package always exports."""
    for name, obj in list(globals().items()):
        if name.startswith("_"):  # every other name of this module is one the package exports
            continue
        if not (isinstance(obj, type) and obj.__module__.startswith(_PACKAGE + ".")):
            continue
        # annotations are strings (``from __future__ import annotations``), resolved in the module named by
        # ``__module__``: resolve them where they were written first, so `typing.get_type_hints` (flyte's
        # type engine, dataclass tools) keeps working once the class names this package
        own = _inspect.get_annotations(obj)
        try:
            hints = _typing.get_type_hints(obj, include_extras=True)
        except NameError:  # a name imported for type checkers only: left as written (unresolvable before too)
            hints = {}
        if own and all(key in hints for key in own):
            obj.__annotations__ = {key: hints[key] for key in own}
        obj.__module__ = _PACKAGE


_exported_from_here()

register_memory_store_type()
