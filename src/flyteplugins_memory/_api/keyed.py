"""The keyed half of `MemoryStore`'s API: naming a store by key, finding, opening and creating it.

A store named by key lives at ``{storage_root}/agents/memory-store/v0/{org}/{project}/{domain}/{key}``
(`_rules.location` resolves the parts from explicit values, the Flyte context and the local defaults). These
classmethods build handles of the class they are called on and hand them to its session: `open` never
creates, `create` lets exactly one of concurrent creators win, `get_or_create` opens what a winner made.
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from .._base.compat import ExistsAccessor
from .._base.syncify import syncify
from .._journal import keys as _keys
from .._journal.generations import newest_generation
from .._journal.journal_storage import JournalStorage
from .._journal.relocate import journal_exists
from .._rules import location as _location
from .._rules.arguments import check_optional_str
from .._rules.paths import MESSAGES_PATH
from ..errors import InvalidArgument, StoreAlreadyExists, StoreDeleted, StoreNotFound
from .core import StoreCore
from .upkeep.read_only import creation_settings

K = TypeVar("K", bound=StoreCore)


class KeyedAPI(StoreCore):
    """Naming, finding and opening stores by key (``cls`` is always `MemoryStore` or a subclass)."""

    @staticmethod
    async def _remote_store_exists(remote_path: str) -> bool:
        remote = JournalStorage.at(remote_path)
        if await remote.exists(MESSAGES_PATH):
            return True
        newest, _, deleted = await newest_generation(remote)  # a deletion record is no store
        return deleted is None and await journal_exists(newest)

    @syncify
    @classmethod
    async def list_keys(
        cls,
        prefix: str = "",
        *,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        root: str | None = None,
    ) -> list[str]:
        """Sorted keys of the stores under ``{storage_root}/agents/memory-store/v0/{org}/{project}/{domain}/``
        that start with `prefix`, resolved like `remote_path_for_key`, from one listing call.

        A store is a directory there named like a valid key: every store, ours or upstream's, keeps its
        transcript under its prefix (on local disk an empty directory left behind is listed too)."""
        check_optional_str("prefix", prefix)
        check_optional_str("root", root)
        return await _keys.list_keys(_location.resolve_namespace_path(org, project, domain, root), prefix)

    @syncify
    @classmethod
    async def open(
        cls,
        *,
        key: str | None = None,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        root: str | None = None,
        remote_path: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
        validate_messages: bool = False,
        trusted: bool = False,
    ) -> Self:
        """Open an existing store at its newest committed state, never creating one: by `key` (resolved
        like `remote_path_for_key`; `root`, a storage root or raw-data path, instead of the context's) or by
        `remote_path` (its key is the path's last segment). Raises
        `StoreNotFound` if there is no store there, `StoreDeleted` (who, when, why) if its store was deleted
        and the key has taken none since. Read-only tools use it (the ``flyte-memory`` CLI)."""
        if (key is None) == (remote_path is None):
            raise InvalidArgument("MemoryStore.open needs exactly one of key=... or remote_path=...")
        check_optional_str("remote_path", remote_path)
        check_optional_str("root", root)
        if remote_path is None:
            remote_path = _location.remote_path_for_key(key or "", org, project, domain, root)
        name = key or remote_path.rstrip("/").rsplit("/", 1)[-1]
        options = handle_options(read_only_prefixes, audit, keep_versions, validate_messages, trusted)
        store = cls(name, remote_path=remote_path, **options)
        if not await store._checkout.open(store):
            raise StoreNotFound(f"No MemoryStore at {remote_path}")
        return store

    @syncify
    @classmethod
    async def _key_exists(
        cls, *, key: str, org: str | None = None, project: str | None = None, domain: str | None = None
    ) -> bool:
        """Whether a store exists for `key`: its transcript object, or else its first commit (a save that
        died after its commit point may not have written the transcript yet)."""
        return await cls._remote_store_exists(cls.remote_path_for_key(key=key, org=org, project=project, domain=domain))

    exists = ExistsAccessor(_key_exists)


def handle_options(
    read_only_prefixes: tuple[str, ...], audit: bool, keep_versions: bool, validate_messages: bool, trusted: bool
) -> dict[str, Any]:
    """The keyword arguments every keyed constructor passes on to the handle it builds."""
    return {
        "read_only_prefixes": read_only_prefixes,
        "audit": audit,
        "keep_versions": keep_versions,
        "validate_messages": validate_messages,
        "trusted": trusted,
    }


async def create_store(cls: type[K], remote_path: str, key: str, options: dict[str, Any]) -> K:
    """`MemoryStore.create`: a new store at `remote_path`; of concurrent creates exactly one wins, the rest
    raise `StoreAlreadyExists`."""
    store = cls(key, remote_path=remote_path, **options)
    try:
        await store._checkout.create(store, creation_settings(store.read_only_prefixes))
    except StoreAlreadyExists:
        raise StoreAlreadyExists(f"MemoryStore {key!r} already exists at {remote_path}") from None
    return store


async def open_or_create_store(cls: type[K], remote_path: str, key: str, options: dict[str, Any]) -> K:
    """`MemoryStore.get_or_create`: the store at `remote_path` at its newest state, created if there is
    none (or its store was deleted: a new generation, `_journal.generations`)."""
    store = cls(key, remote_path=remote_path, **options)
    try:
        if await store._checkout.open(store):
            return store
    except StoreDeleted:  # the key is free again
        pass
    try:
        return await create_store(cls, remote_path, key, options)
    except StoreAlreadyExists:  # another creator won the race: open what it made
        if not await store._checkout.open(store):
            raise
        return store
