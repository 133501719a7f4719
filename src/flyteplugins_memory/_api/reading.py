"""The read half of `MemoryStore`'s API: contents, listings, metadata, audit trail and versions.

Listings, existence and metadata answer from the loaded state without touching storage; contents are
fetched on first read (or by `prefetch`) and verified against their sha256.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from .._base.compat import upstream_awaitable
from .._base.syncify import syncify
from .._handle.checkout import Checkout
from .._handle.mirror import write_text_file
from .._handle.working_copy import WorkingCopy
from .._journal import audit as _audit
from .._journal import versions as _versions
from .._journal.history import refuse_expired_snapshot
from .._rules.admission import Access, PathAdmission
from .._rules.arguments import check_int
from .._rules.codecs import MemoryMeta, encode_audit_event, encode_messages
from .._rules.inventory import take_inventory
from .._rules.layout import AUDIT_LOG_PATH, VERSIONS_DIR
from .._rules.metadata import Scalar, check_where, from_ext, matches
from .._rules.paths import MESSAGES_PATH
from ..errors import CorruptStore
from ..storage._workdir import WorkDir


class ReadAPI:
    """Mixed into `MemoryStore`; relies on its `_handle.checkout`, `_rules.admission`, `messages` and `audit`."""

    _checkout: Checkout
    _admission: PathAdmission
    messages: list[dict[str, Any]]
    audit: bool
    _version_bytes: Any  # `HistoryAPI`'s: version `version_id` of a path

    @syncify
    async def read_text(self, rel_path: str, default: str = "") -> str:
        """UTF-8 contents of `rel_path` (fetched on first read), or `default` if there is no such file;
        `NotText` if it holds binary content (`read_bytes` reads that)."""
        rel = self._admission.admit(rel_path, Access.READ)
        data = await self._checkout.read(self, rel)
        return default if data is None else _versions.decode_text(data, rel)

    @syncify
    async def read_json(self, rel_path: str, default: Any = None) -> Any:
        """JSON-decoded contents of `rel_path`, or `default` if it is missing or empty."""
        text = await self.read_text.aio(rel_path, default="")
        if not text.strip():
            return default
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorruptStore(f"{rel_path!r} is not valid JSON: {exc}") from exc

    @syncify
    async def list_paths(self, prefix: str = "", *, where: Mapping[str, Scalar] | None = None) -> list[str]:
        """Sorted paths of the store's files under directory `prefix` (bookkeeping and transcript excluded).

        With `where`, only files whose metadata holds every pair exactly (a bool matches only a bool, a str
        only a str, numbers by value: ``1`` matches ``1.0``, ``True`` does not). Answered from the loaded
        state, like any listing: no file content is read.
        """
        rel = self._admission.admit(prefix, Access.LIST)
        wanted = check_where(where)
        if rel:
            await (await self._checkout.ready(self)).check_inside_root(rel)
        return await self._checkout.look(self, lambda view: _listed(view, rel, wanted), under=rel)

    @syncify
    async def _path_exists(self, rel_path: str) -> bool:
        """Whether `rel_path` is a file of the store, or a directory holding one."""
        rel = self._admission.admit(rel_path, Access.READ)
        await (await self._checkout.ready(self)).check_inside_root(rel)
        return await self._checkout.look(self, lambda view: view.has_file_or_dir(rel), paths=[rel])

    @syncify
    async def get_meta(self, rel_path: str) -> MemoryMeta | None:
        """The metadata sidecar of `rel_path`, or None if it has none."""
        rel = self._admission.admit(rel_path, Access.READ)
        return await self._checkout.look(self, lambda view: view.meta(rel), paths=[rel])

    @syncify
    async def current_sha(self, rel_path: str) -> str:
        """The sha256 of `rel_path`'s content, or ``""`` if there is no such file."""
        rel = self._admission.admit(rel_path, Access.READ)
        return await self._checkout.look(self, lambda view: _sha_of(view, rel), paths=[rel])

    @syncify
    async def prefetch(self, prefix: str = "") -> int:
        """Materialize the store in the working root ``store.root``, in upstream's layout: every file under
        `prefix` not yet local (with its sidecar), fetched in bounded parallel batches; for the whole store
        (``prefix=""``) also ``audit/log.jsonl`` (every event), ``messages.json`` and ``versions/``.
        Returns how many files were fetched. Call it before running a code tool that reads the root:
        a handle otherwise holds only what it wrote or read.
        """
        rel = self._admission.admit(prefix, Access.LIST)
        view = await self._checkout.ready(self)
        missing = await self._checkout.look(self, lambda view: view.uncached_under(rel), under=rel)
        fetched = await view.fetch_all(missing, self._checkout.remote_if_known())
        if not rel:
            await self._materialize_bookkeeping()
        return fetched

    async def _materialize_bookkeeping(self) -> None:
        """The whole audit trail, the transcript and every saved version snapshot, into the root."""
        events = await self.audit_tail.aio(0)
        remote, view = self._checkout.remote_if_known(), await self._checkout.ready(self)
        objects = {MESSAGES_PATH: encode_messages(self.messages)}
        if events:
            objects[AUDIT_LOG_PATH] = b"".join(encode_audit_event(e) for e in events)
        if remote is not None:
            listed = take_inventory(await remote.list(under=VERSIONS_DIR)).versions
            names = [n for names in listed.values() for n in names if n not in view.versions]
            objects.update(await remote.read_many(names))
        await view.mirror.now(_write_all, view.workdir, objects)

    @upstream_awaitable
    @syncify
    async def audit_tail(self, n: int = 20) -> list[dict[str, Any]]:
        """The last `n` audit events, oldest first (all of them if ``n <= 0``); reads only what it needs.

        The events are copies: editing one (say, for display) never changes the trail.
        """
        check_int("n", n, minimum=None)
        view = await self._checkout.ready(self)
        events = await _audit.audit_tail(self._checkout.remote_if_known(), view.base, view.changes.audit, n)
        return copy.deepcopy(events)

    def audit_tail_sync(self, n: int = 20) -> list[dict[str, Any]]:
        """Alias of ``audit_tail(n)`` kept for upstream compatibility."""
        return self.audit_tail(n)

    @syncify
    async def list_versions(self, rel_path: str) -> list[str]:
        """Names of the version snapshots of `rel_path` (saved and pending), oldest first."""
        rel = self._admission.admit(rel_path, Access.READ)
        return await _versions.list_versions(
            self._checkout.remote_if_known(), self._checkout.working_copy.versions, rel
        )

    @syncify
    async def read_version(self, version_file: str, version_id: str | None = None) -> str:
        """Text of one version snapshot, named as by `list_versions` or an audit event's ``version_file``;
        `NotText` for a snapshot of binary content (`read_version_bytes` reads that).

        ``read_version(path, version_id)``: text of version `version_id` of `path`, an id from `history`
        (a journal version's content comes from its blob, verified by its sha256); `VersionNotFound` for
        an unknown id, a deletion, or content gc() collected."""
        if version_id is not None:
            data = await self._version_bytes(version_file, version_id)
            return _versions.decode_text(data, f"{version_file}@{version_id}")
        await refuse_expired_snapshot((await self._checkout.ready(self)).base, version_file)
        remote, pending = self._checkout.remote_if_known(), self._checkout.working_copy.versions
        return await _versions.read_version(remote, pending, version_file)


def _write_all(workdir: WorkDir, objects: dict[str, bytes]) -> None:
    for name, data in objects.items():
        write_text_file(workdir, name, data)


def _listed(view: WorkingCopy, prefix: str, where: Mapping[str, Scalar]) -> list[str]:
    paths = view.paths(prefix)
    if not where:
        return paths
    return [p for p in paths if matches(_metadata_of(view, p), where)]


def _metadata_of(view: WorkingCopy, path: str) -> Mapping[str, Scalar]:
    entry = view.entry(path)
    return from_ext(entry.ext, path) if entry is not None else {}


def _sha_of(view: WorkingCopy, rel: str) -> str:
    view.meta(rel)  # a corrupt sidecar raises here, as upstream's does
    entry = view.entry(rel)
    return entry.sha256 if entry else ""
