"""flyteplugins-memory: durable, keyed memory for AI agents that run as Flyte tasks.

A drop-in for ``flyte.ai.agents.MemoryStore`` (same API, same storage layout) with typed errors, a
uniform sync / ``.aio`` surface and safe handling of hostile paths and content.
"""

from ._api.archive.export import ExportResult
from ._api.compaction import CompactionResult
from ._api.conversations import Conversation
from ._api.flyte_type import MemoryStoreTransformer, register_memory_store_type
from ._api.records import RecordLog
from ._api.scopes import ScopedStore
from ._api.search import SearchHit
from ._api.store import MemoryStore
from ._api.time_travel import StoreAt
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
from .storage._contract import Capabilities, ObjectStorage
from .storage._options import set_storage_options
from .storage._registry import UNVERIFIED_BACKENDS_ENV, allow_unverified_backend

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
