"""flyteplugins-memory: durable, keyed memory for AI agents that run as Flyte tasks.

A drop-in for ``flyte.ai.agents.MemoryStore`` (same API, same storage layout) with typed errors, a
uniform sync / ``.aio`` surface and safe handling of hostile paths and content.

Importing the package is cheap: its names are loaded together (`_api.surface`: the whole package, the
``MemoryStore`` type registered with Flyte) the first time any of them is used, so a command line that only
prints help or a version never pays for the store (docs/decisions/0164-the-package-and-the-cli-load-lazily.md).
"""

# ruff: noqa: F405 (the names of `__all__` come from the star import type checkers read)
import typing

if typing.TYPE_CHECKING:  # type checkers see every name as it is once loaded
    from ._api.surface import *  # noqa: F403

    __version__: str

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


def __getattr__(name: str) -> typing.Any:
    """A public name, loading the whole package surface on first use (PEP 562); ``__version__`` alone
    loads only the module that knows it (reading the installed metadata takes a while too)."""
    if name == "__version__":
        from ._base.version import PACKAGE_VERSION

        return PACKAGE_VERSION
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load()
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _load() -> None:
    """Import every exported name into this module (once: later lookups find them in its globals)."""
    from ._api import surface

    globals().update({name: getattr(surface, name) for name in __all__})
