"""flyteplugins-memory: durable, keyed memory for AI agents that run as Flyte tasks.

A drop-in for ``flyte.ai.agents.MemoryStore`` (same API, same storage layout) with typed errors, a
uniform sync / ``.aio`` surface and safe handling of hostile paths and content.
"""

from . import _version
from ._backends import UNVERIFIED_BACKENDS_ENV, allow_unverified_backend
from ._codecs import MemoryMeta
from ._commit_log import Commit
from ._compaction import CompactionResult
from ._contract import Capabilities, ObjectStorage
from ._conversations import Conversation
from ._errors import (
    AccessDenied,
    ArchiveExists,
    ArchiveNotFound,
    BlockingCallOnLoop,
    CommitNotFound,
    ConcurrencyError,
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
from ._export import ExportResult
from ._flyte_type import MemoryStoreTransformer, register_memory_store_type
from ._fs_options import set_storage_options
from ._gc import GcResult
from ._history import HistoryEntry
from ._messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    MessageModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ._paths import MESSAGES_PATH
from ._progress import ProgressCallback
from ._proposals import Proposal, ProposalStatus
from ._purge import PurgeResult
from ._records import RecordLog
from ._retention_policy import RetentionPolicy
from ._retry import RetryPolicy, get_retry_policy, set_retry_policy
from ._scopes import ScopedStore
from ._search import SearchHit
from ._store import MemoryStore
from ._time_travel import StoreAt
from ._version import READER_REVISION

__all__ = [
    "AccessDenied",
    "ArchiveExists",
    "ArchiveNotFound",
    "AssistantMessage",
    "BlockingCallOnLoop",
    "Capabilities",
    "Commit",
    "CommitNotFound",
    "CompactionResult",
    "ConcurrencyError",
    "ContentPurged",
    "ContextError",
    "Conversation",
    "CorruptStore",
    "ExportResult",
    "FunctionCall",
    "GcResult",
    "HistoryEntry",
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
    "get_retry_policy",
    "register_memory_store_type",
    "set_retry_policy",
    "set_storage_options",
]

__version__: str = _version.PACKAGE_VERSION

register_memory_store_type()
