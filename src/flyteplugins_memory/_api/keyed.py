"""The keyed half of `MemoryStore`'s API: naming a store by key, finding, opening and creating it.

A store named by key lives at ``{storage_root}/agents/memory-store/v0/{org}/{project}/{domain}/{key}``
(`_rules.location` resolves the parts from explicit values, the Flyte context and the local defaults). These
classmethods build handles of the class they are called on and hand them to its session: `open` never
creates, `create` lets exactly one of concurrent creators win, `get_or_create` opens what a winner made.
"""

from __future__ import annotations

from typing import Any, Self

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
from .read_only_settings import creation_settings


class KeyedAPI:
    """Mixed into `MemoryStore`: its keyed constructors (``cls`` is always `MemoryStore` or a subclass)."""

    # what the constructors call on the class they build (MemoryStore's)
    __init__: Any
    _checkout: Any
    read_only_prefixes: tuple[str, ...]

    @staticmethod
    async def _remote_store_exists(remote_path: str) -> bool:
        remote = JournalStorage.at(remote_path)
        if await remote.exists(MESSAGES_PATH):
            return True
        newest, _, deleted = await newest_generation(remote)  # a deletion record is no store
        return deleted is None and await journal_exists(newest)

    @classmethod
    def remote_path_for_key(
        cls, *, key: str, org: str | None = None, project: str | None = None, domain: str | None = None
    ) -> str:
        """The store's path: ``{storage_root}/agents/memory-store/v0/{org}/{project}/{domain}/{key}``."""
        return _location.remote_path_for_key(key, org, project, domain)

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

    @syncify
    @classmethod
    async def create(
        cls,
        *,
        key: str,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
        validate_messages: bool = False,
        trusted: bool = False,
    ) -> Self:
        """Create a new store for `key`; of concurrent creates exactly one wins, the rest raise
        `StoreAlreadyExists`. `read_only_prefixes` are this handle's, and are persisted with the store
        too, so that every handle enforces them (`set_read_only_prefixes` changes them later). A key whose
        store was deleted takes a new, empty one (a new generation): nothing of the deleted store shows
        through it, and handles of the deleted store still get `StoreDeleted` when they save."""
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        options = handle_options(read_only_prefixes, audit, keep_versions, validate_messages, trusted)
        store = cls(key, remote_path=remote_path, **options)
        try:
            await store._checkout.create(store, creation_settings(store.read_only_prefixes))
        except StoreAlreadyExists:
            raise StoreAlreadyExists(f"MemoryStore {key!r} already exists at {remote_path}") from None
        return store

    @syncify
    @classmethod
    async def get_or_create(
        cls,
        *,
        key: str,
        org: str | None = None,
        project: str | None = None,
        domain: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
        validate_messages: bool = False,
        trusted: bool = False,
    ) -> Self:
        """Open the store for `key` at its newest committed state, creating it if it does not exist. A key
        whose store was deleted (`delete_store`) gets a new, empty one, as with `create`."""
        options = handle_options(read_only_prefixes, audit, keep_versions, validate_messages, trusted)
        remote_path = cls.remote_path_for_key(key=key, org=org, project=project, domain=domain)
        store = cls(key, remote_path=remote_path, **options)
        try:
            if await store._checkout.open(store):
                return store
        except StoreDeleted:  # the key is free again: a new generation (`_journal.generations`)
            pass
        try:
            return await cls.create.aio(key=key, org=org, project=project, domain=domain, **options)
        except StoreAlreadyExists:  # another creator won the race: open what it made
            if not await store._checkout.open(store):
                raise
            return store


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
