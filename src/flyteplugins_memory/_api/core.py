"""`StoreCore`: what every family of `MemoryStore`'s API stands on, declared once with real types.

The store's API is grouped by what a user does, one family per package or module (files, transcript,
history and time travel, staged memories, search, upkeep, archives, keys), the same groups as the CLI's
verb modules and the guide's pages. Every family subclasses this core and uses only what it declares: the
key and the handle's settings, the handle's link to its journal (`_handle.checkout.Checkout`), the one
path gate (`_rules.admission.PathAdmission`), the records appended and not saved yet, a save, the
options of a change, and the bytes of a version. A family uses another only through its module's
functions or as its base (importing creates a store by key: `ImportAPI` is a `KeyedAPI`), never by
declaring another family's members.

Two rules keep the class tree typed:
- The members that upstream's class declares as ``flyte.syncify`` wrappers (``create``, ``get_or_create``,
  ``read_text``, ``read_json``, ``get_meta``, ``current_sha``, ``write_text``, ``write_json``, ``save``)
  are defined on the facade itself (`_api.store`): a type checker compares a member that two base
  classes define (a family and upstream's class) more strictly than an override, and our wrapper type is
  not upstream's. Families call the core's plain coroutines (`_save`) instead.
- A new family goes behind an accessor (``store.records(...)``, ``store.scope(...)``, ``store.at(...)``)
  that returns an object of its own, rather than become another base class.
"""

from __future__ import annotations

import pathlib
import tempfile
import weakref
from collections.abc import Mapping
from typing import Any, cast

from .._handle.checkout import Checkout
from .._handle.mirror import remove_when_idle
from .._journal.history import Version, version_content
from .._rules import location as _location
from .._rules.admission import Access, PathAdmission
from .._rules.arguments import check_flag, check_optional_str, check_prefixes
from .._rules.messages import admit_all
from .._rules.metadata import Scalar, check_metadata
from .._rules.paths import validate_segment
from .._rules.read_only import persisted
from .._rules.writes import ChangeOptions
from ..errors import VersionNotFound
from .records import PendingRecords, save_pending

__all__ = ["StoreCore"]


class StoreCore:
    """A handle's identity, settings and collaborators, and the few operations every family needs. Its
    constructor is `MemoryStore`'s (the arguments are documented there)."""

    key: str
    #: the transcript: the committed one (loaded on first use) plus this handle's appends and edits
    messages: list[dict[str, Any]]
    read_only_prefixes: tuple[str, ...]
    audit: bool
    keep_versions: bool
    validate_messages: bool
    trusted: bool
    #: the handle's link to its journal: working copy, lock, every move between the handle and storage
    _checkout: Checkout
    #: the one gate every caller path passes (a scope swaps it)
    _admission: PathAdmission
    #: records appended to logs (`records`, `session`) and not saved yet
    _pending_records: PendingRecords
    _root_path: pathlib.Path
    _root_real: pathlib.Path

    def __init__(
        self,
        key: str,
        messages: list[dict[str, Any]] | None = None,
        root: pathlib.Path | str | None = None,
        remote_path: str | None = None,
        read_only_prefixes: tuple[str, ...] = (),
        audit: bool = True,
        keep_versions: bool = False,
        *,
        validate_messages: bool = False,
        trusted: bool = False,
    ):
        self.key = validate_segment(key, name="key")
        self.validate_messages = check_flag("validate_messages", validate_messages)
        self.trusted = check_flag("trusted", trusted)
        # a copy: nothing the store does (load, save, refresh) ever changes the caller's list
        self.messages = admit_all(list(messages or []), validate=validate_messages)
        self.read_only_prefixes = check_prefixes(read_only_prefixes)
        self.audit = check_flag("audit", audit)
        self.keep_versions = check_flag("keep_versions", keep_versions)
        self._root_path = pathlib.Path(root) if root is not None else _temporary_root(self)
        self._root_real = self._root_path.resolve()
        resolve = lambda: self.remote_path_for_key(key=self.key)  # noqa: E731
        self._checkout = Checkout(self._root_path, private=root is None, remote_path=remote_path, resolve=resolve)
        self._admission = PathAdmission(self._enforced_read_only_prefixes, lambda: self._checkout.remote_path)
        self._pending_records = PendingRecords()
        if root is not None:
            self._checkout.adopt_working_root(self)

    @classmethod
    def remote_path_for_key(
        cls, *, key: str, org: str | None = None, project: str | None = None, domain: str | None = None
    ) -> str:
        """The store's path: ``{storage_root}/agents/memory-store/v0/{org}/{project}/{domain}/{key}``."""
        return _location.remote_path_for_key(key, org, project, domain)

    def _enforced_read_only_prefixes(self) -> tuple[str, ...]:
        """What this handle enforces: its own ``read_only_prefixes`` and the store's persisted ones, as of
        its loaded state (a save checks the persisted ones again against the state it commits on)."""
        return (*self.read_only_prefixes, *persisted(self._checkout.working_copy.base.ext))

    def has_unsaved_changes(self) -> bool:
        """Whether this handle holds writes, deletes or transcript changes (appends, or edits of messages
        in place, compared by content) that `save` has not committed."""
        return bool(self._pending_records) or self._checkout.has_unsaved_changes(self)

    def unsaved_paths(self) -> list[str]:
        """Where this handle's unsaved changes are, sorted: each file written, deleted or relabelled since the
        last save, ``messages.json`` when the transcript changed, and the name of each record log with
        unsaved appends. Empty exactly when `has_unsaved_changes` is false, except for changes of store
        settings or staged imports, which have no path. Code that shares a handle with others (a framework
        adapter) can tell its own unsaved changes from theirs."""
        paths = {log for log, lines in self._pending_records.lines.items() if lines}
        return sorted(paths | set(self._checkout.unsaved_paths(self)))

    async def _save_through_facade(self) -> None:
        """``save()`` with no arguments, through the facade's own method: `save` is defined there (upstream
        declares it: see above), and a subclass of `MemoryStore` that overrides it is called, as by a user."""
        await cast(Any, self).save.aio()

    async def _save(self, *, actor: str | None = None, reason: str | None = None) -> None:
        """Commit this handle's changes (`MemoryStore.save`, which checks `actor` and `reason` first): the
        appended records, then everything else, in one commit."""
        await save_pending(self, actor)
        await self._checkout.save(self, actor=actor, reason=reason)

    def _change_options(
        self, actor: str, reason: str, expected_sha: str | None, metadata: Mapping[str, Scalar] | None = None
    ) -> ChangeOptions:
        """The options of a change this handle makes: who, why, the `expected_sha` guard, its settings."""
        check_optional_str("expected_sha", expected_sha)
        checked = check_metadata(metadata)
        return ChangeOptions(actor, reason, expected_sha, self.keep_versions, self.audit, checked)

    async def _version(self, rel: str, version_id: object) -> Version:
        """Version `version_id` of `rel` (admitted already): from the journal, else ``versions/``."""
        view = await self._checkout.ready(self)
        remote = self._checkout.remote_if_known()
        return await version_content(remote, view.versions, view.base, rel, version_id)

    async def _version_bytes(self, path: str, version_id: object) -> bytes:
        """Bytes of version `version_id` of `path` (`read_version(path, version_id)`); a deletion has
        none (`VersionNotFound`)."""
        rel = self._admission.admit(path, Access.READ)
        data = (await self._version(rel, version_id)).data
        if data is None:
            raise VersionNotFound(f"Version {version_id!r} of {rel!r} is its deletion: it has no content")
        return data


def _temporary_root(store: StoreCore) -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix="flyte_agent_mem_"))
    # removed after the root writer has finished whatever the handle queued
    weakref.finalize(store, remove_when_idle, root)
    return root
