"""The state behind one store handle: its committed base, its unsaved changes and its working root.

`MemoryStore` is the public facade. This object answers listings from the base state plus changes (no
I/O), fetches committed contents on first read (verifying their sha256, in threads, so the shared event
loop never blocks), and mirrors every write, delete and read into the working root in upstream's layout
(see `_handle.mirror`). Unsaved contents are also kept in memory, so what a save uploads is exactly what was
written, whatever a code tool later does to the root.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pathlib
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .._journal import gc as _gc
from .._journal.contents import fetch_contents
from .._journal.journal_storage import JournalStorage
from .._journal.legacy import scan_local
from .._rules.codecs import MemoryMeta, sha256_bytes
from .._rules.index import PartNotLoaded, inside, range_under
from .._rules.journal_objects import EMPTY_CHECKPOINT, FileEntry
from .._rules.layout import classify
from .._rules.merge import Changes, entry_name
from .._rules.paths import parent_dirs
from .._rules.state import State
from .._rules.ttl import AUDIT_OP as EXPIRED_OP
from .._rules.ttl import EXPIRED_REASON, EXPIRES_AT, is_expired
from .._rules.writes import ChangeOptions, WritePlan, plan_delete, plan_write_off_loop
from ..errors import InvalidPath
from ..storage._workdir import WorkDir
from .mirror import RootWriter, cache_committed, forget, record_change

logger = logging.getLogger(__name__)

#: Files fetched at once by `prefetch`.
PREFETCH_BATCH = 32


#: In-place files up to this size are held in memory when changed (`WorkingCopy.held`), up to `HOLD_TOTAL_BYTES`
#: in all; the others are fetched again by the save that copies them into a blob.
HOLD_MAX_BYTES = 1024 * 1024
HOLD_TOTAL_BYTES = 64 * 1024 * 1024


class WorkingCopy:
    """One handle's view: committed base + unsaved changes, with file contents cached locally."""

    def __init__(self, root: pathlib.Path, *, private: bool):
        self.workdir = WorkDir(root)
        #: mirrors writes, deletes and reads into the working root, in order (see `_handle.mirror`)
        self.mirror = RootWriter(self._mirror_failed)
        #: the root is our own temp dir: nothing but us writes there, so paths need no symlink check
        self.private = private
        self.base = State.at_checkpoint(EMPTY_CHECKPOINT)
        self.changes = Changes()
        #: unsaved contents of written files, and of version snapshots, by name
        self.unsaved: dict[str, bytes] = {}
        self.versions: dict[str, bytes] = {}
        #: path -> sha256 of the bytes cached in the working directory
        self.cached: dict[str, str] = {}
        #: committed bytes of in-place files (``legacy``) this handle changed since its last save, read from
        #: the working root before the change replaced them there: the save copies them into a blob
        #: (`_journal.preserve`) without fetching them again
        self.held: dict[str, bytes] = {}
        #: the base is an import of an upstream-written store, not yet in the journal
        self.imported = False
        #: serializes changes and saves of this handle (all run on the one syncify loop)
        self.lock = asyncio.Lock()
        #: how many unsaved writes each directory holds
        self._written_dirs: Counter[str] = Counter()

    # -- lookups: the base's parts they touch are loaded first (`need`, `need_under`) ----------------------

    async def need(self, paths: Iterable[str]) -> None:
        """Load the parts of the base that looking at `paths` needs (their parents, and what is under them)."""
        await self.base.files.need(paths)

    async def need_under(self, prefix: str) -> None:
        """Load the parts of the base that listing directory `prefix` needs ("" for all of them)."""
        await self.base.files.need_under(prefix)

    def entry(self, rel: str) -> FileEntry | None:
        """The live entry of `rel` (None: no such file, or its ttl ran out: see `_rules.ttl`)."""
        found = self._recorded(rel)
        return None if is_expired(found, _gc.clock()) else found

    def paths(self, prefix: str = "") -> list[str]:
        """Sorted live paths under directory `prefix` (after `need_under(prefix)`); expired ones left out."""
        lo, hi = range_under(prefix)
        changes, now = self.changes.files, _gc.clock()
        paths = {p for p in self.base.files.under(prefix) if p not in changes}
        paths = {p for p in paths if not is_expired(self.base.files.get(p), now)}
        paths |= {p for p, r in changes.items() if r is not None and inside(p, lo, hi) and not is_expired(r, now)}
        return sorted(paths)

    def has_file_or_dir(self, rel: str) -> bool:
        return self.entry(rel) is not None or bool(self.paths(rel))

    def meta(self, rel: str) -> MemoryMeta | None:
        record = self.entry(rel)
        return record.meta(rel) if record else None

    def has_unsaved_changes(self) -> bool:
        return bool(self.changes) or self.imported

    def adopt_working_root(self) -> list[dict]:
        """An existing root's files become unsaved changes (blocking; at construction); returns the
        transcript its ``messages.json`` holds."""
        scanned, transcript = scan_local(self.workdir)
        for path, record in scanned.files.items():
            data = self.workdir.read(path)
            if data is not None:
                self._set_change(path, record)
                self.unsaved[path] = data
        return transcript

    async def check_inside_root(self, rel: str) -> None:
        await asyncio.to_thread(self.workdir.resolve, rel)

    async def local_bytes(self, rel: str) -> bytes | tuple[str, FileEntry] | None:
        """Contents of `rel` if the handle holds them (unsaved, or cached in the working root), None if
        there is no such file, else what `fetch_committed` needs to fetch them."""
        await self.check_inside_root(rel)
        await self.need([rel])
        record = self.entry(rel)
        if record is None:
            return None
        if rel in self.unsaved:
            return self.unsaved[rel]
        if self.cached.get(rel) == record.sha256:
            await self.mirror.settled()
            local = await asyncio.to_thread(self.workdir.read, rel)
            if local is not None and sha256_bytes(local) == record.sha256:
                return local  # else a code tool changed or removed the local copy: fetch it again
        return rel, record

    async def fetch_committed(self, remote: JournalStorage | None, rel: str, record: FileEntry) -> bytes:
        """The committed content `record` names, fetched, verified and cached in the working root."""
        return (await self._fetch(remote, {rel: record}))[rel]

    def uncached_under(self, prefix: str) -> dict[str, FileEntry]:
        """The committed files under `prefix` not cached in the working root (their parts loaded)."""
        live = {p: r for p in self.paths(prefix) if (r := self.entry(p)) is not None}
        return {p: r for p, r in live.items() if p not in self.unsaved and self.cached.get(p) != r.sha256}

    async def fetch_all(self, missing: dict[str, FileEntry], remote: JournalStorage | None) -> int:
        """Fetch `missing` into the working root, `PREFETCH_BATCH` at a time; returns how many."""
        items = list(missing.items())
        for start in range(0, len(items), PREFETCH_BATCH):
            await self._fetch(remote, dict(items[start : start + PREFETCH_BATCH]))
        return len(items)

    async def _fetch(self, remote: JournalStorage | None, records: dict[str, FileEntry]) -> dict[str, bytes]:
        # verified; legacy files fall back to their blob copy; typed errors for purged or collected content
        contents = await fetch_contents(remote, records, self.base)
        metas = {p: _meta_or_none(r, p) for p, r in records.items()}
        # fetched contents were verified against `records`: the handle still holds them while it holds those
        fetched = {p: r.sha256 for p, r in records.items()}
        still = lambda p, _: self._holds_committed(p, fetched[p])  # noqa: E731 - one use, beside its reason
        caching = (cache_committed, self.workdir, contents, metas, self._stale_around, still)
        if not self.private:  # a root the caller chose shows the file when the read returns
            self.cached.update({p: fetched[p] for p in await self.mirror.now(*caching)})
            return contents
        # A store's own root is cached behind the read (the reader has the bytes; whoever looks at the root
        # waits for the queue). `cached` is a hint a reader verifies: entries not cached after all go.
        self.cached.update(fetched)
        self.mirror.soon(*caching).add_done_callback(lambda done: self._drop_uncached(fetched, done))
        return contents

    def _drop_uncached(self, fetched: dict[str, str], done: asyncio.Future[Any]) -> None:
        stored = set() if done.cancelled() or done.exception() else set(done.result())
        for path, sha256 in fetched.items():
            if path not in stored and self.cached.get(path) == sha256:
                del self.cached[path]

    async def write(
        self, rel: str, content: str | bytes, options: ChangeOptions, ext: dict[str, Any] | None = None
    ) -> MemoryMeta:
        """Plan and record one write (text, or binary content as it is; `ext`: extensions of its file
        entry); callers hold `lock`. A write with an expiry takes no ``versions/`` snapshot."""
        if not self.private:  # here: a few lstat calls cost less than a thread hop (docs/decisions/0159)
            self.workdir.resolve(rel)
        await self.need([rel])
        now = _gc.clock()
        in_the_way = self._check_fits_tree(rel, now)
        if ext and EXPIRES_AT in ext:  # no ``versions/`` snapshot: it would outlive the ttl (docs/decisions/0084)
            options = dataclasses.replace(options, keep_versions=False)
        plan = await plan_write_off_loop(self.entry(rel), rel, content, options, self.versions)
        if ext and plan.record is not None:
            plan = dataclasses.replace(plan, record=plan.record.model_copy(update={"ext": {**plan.record.ext, **ext}}))
        for path in in_the_way:  # first: the root cannot hold `x/y` while it holds the file `x`
            await self.expire(path, dataclasses.replace(options, expected_sha=None, reason=EXPIRED_REASON), now)
        await self._hold_replaced(rel)
        await self._mirror_change(plan)
        self._record(plan, guarded=options.expected_sha is not None)
        self.cached[rel] = plan.meta.sha256 if plan.meta else ""
        assert plan.meta is not None
        return plan.meta

    async def delete(self, rel: str, options: ChangeOptions) -> bool:
        """Plan and record one delete; False if there is no such file. Callers hold `lock`."""
        if not self.private:
            await self.check_inside_root(rel)
        await self.need([rel])
        current = self.entry(rel)
        if current is None:
            return False
        plan = plan_delete(current, rel, options, self.versions)
        await self._hold_replaced(rel)
        await self._mirror_change(plan)
        self._record(plan, guarded=options.expected_sha is not None)
        self.cached.pop(rel, None)
        return True

    async def expire(self, rel: str, options: ChangeOptions, now: float) -> bool:
        """Record the deletion of `rel` if its ttl ran out by `now`, audited as op ``expired``; False if it
        did not (or there is no such file). Callers hold `lock`."""
        await self.need([rel])
        current = self._recorded(rel)
        if current is None or not is_expired(current, now):
            return False
        plan = plan_delete(current, rel, options, self.versions)
        if plan.event is not None:
            plan = dataclasses.replace(plan, event={**plan.event, "op": EXPIRED_OP})
        await self._mirror_change(plan)
        self._record(plan, guarded=False)
        return True

    def _check_fits_tree(self, rel: str, now: float) -> list[str]:
        """A path cannot be a file and a directory at once (no filesystem holds both): `InvalidPath` if a
        live file is in the way of writing `rel`. Returns the expired files in the way, which the write
        deletes: an expired file reads as missing, so it cannot refuse a write, and it must not stay
        beside it either (a commit holding ``x`` and ``x/y`` can never be opened). Costs O(depth) lookups
        and a search of the base's loaded parts for paths under `rel`."""
        live_parent = next((d for d in parent_dirs(rel) if not self._expired_or_absent(d, now)), None)
        if live_parent is not None:
            raise InvalidPath(f"Cannot write {rel!r}: {live_parent!r} is a file")
        parents = [d for d in parent_dirs(rel) if self._recorded(d) is not None]
        if parents or self._recorded(rel) is not None:
            return parents  # `rel` is a file already (or its parents are), so not a directory
        under = self._recorded_under(rel)
        if any(not is_expired(self._recorded(p), now) for p in under):
            raise InvalidPath(f"Cannot write {rel!r}: it is a directory")
        return under

    def _recorded(self, rel: str) -> FileEntry | None:
        """`rel`'s entry, live or expired (None: no such file)."""
        return self.changes.files[rel] if rel in self.changes.files else self.base.files.get(rel)

    def _expired_or_absent(self, rel: str, now: float) -> bool:
        found = self._recorded(rel)
        return found is None or is_expired(found, now)

    def _recorded_under(self, rel: str) -> list[str]:
        """The files under directory `rel`, live or expired (unsaved writes only searched when there are)."""
        found = [p for p in self.base.files.under(rel) if self._recorded(p) is not None]  # not deleted since
        if self._written_dirs[rel]:
            lo, hi = range_under(rel)
            found += [p for p, r in self.changes.files.items() if r is not None and inside(p, lo, hi)]
        return sorted(set(found))

    def _set_change(self, path: str, record: FileEntry | None, *, keep: bool = True) -> None:
        """Record `path`'s change (or forget it, without `keep`), tracking the directories of writes."""
        before = self.changes.files.get(path)
        if keep:
            self.changes.files[path] = record
        else:
            self.changes.files.pop(path, None)
        after = record if keep else None
        if (before is None) != (after is None):
            for directory in parent_dirs(path):
                self._written_dirs[directory] += 1 if after is not None else -1

    def _retrack(self) -> None:
        written = (p for p, r in self.changes.files.items() if r is not None)
        self._written_dirs = Counter(d for p in written for d in parent_dirs(p))

    async def _hold_replaced(self, rel: str) -> None:
        """Keep the committed bytes of in-place file `rel` before a change replaces its working-root copy
        (`held`), if the root holds them verified and they are small: the save that copies them into a blob
        then reads nothing (a one-file save after a bulk save is one request shorter)."""
        committed = self.base.files.get(rel)
        if (
            committed is None
            or not committed.legacy
            or committed.bytes > HOLD_MAX_BYTES
            or rel in self.held
            or rel in self.unsaved
            or self.cached.get(rel) != committed.sha256
            or self._held_bytes() + committed.bytes > HOLD_TOTAL_BYTES
        ):
            return
        # the root's writes are atomic: read at once, and wait for its writer only if the bytes are not there
        # yet (a store's own root is written behind the calls)
        for settle in (False, True):
            if settle:
                await self.mirror.settled()
            try:  # a small local file is read on the loop: a thread hop costs more than the read
                small = committed.bytes <= 64 * 1024
                local = self.workdir.read(rel) if small else await asyncio.to_thread(self.workdir.read, rel)
            except OSError:  # unreadable here: the save fetches them, as it would have anyway
                return
            if local is not None and sha256_bytes(local) == committed.sha256:
                self.held[rel] = local
                return

    def _held_bytes(self) -> int:
        """Bytes in `held` (a handle rarely holds more than a few: its first changes of in-place files)."""
        return sum(len(data) for data in self.held.values()) if len(self.held) < 4096 else HOLD_TOTAL_BYTES

    def drop(self, paths: list[str]) -> None:
        """Forget the unsaved changes of `paths` (their writes, versions and audit events); their local
        copies are stale now (see `forget_local`)."""
        dropped = set(paths)
        for path in dropped:
            self.changes.files.pop(path, None)
            self.changes.guarded.discard(path)
            self.unsaved.pop(path, None)
            self.cached.pop(path, None)
            self.held.pop(path, None)
        self.versions = {n: d for n, d in self.versions.items() if classify(n).path not in dropped}
        self.changes.audit = [e for e in self.changes.audit if e.get("path") not in dropped]
        self.changes.entries = {k: v for k, v in self.changes.entries.items() if entry_name(*k) not in dropped}
        self._retrack()

    async def forget_unsaved(self) -> None:
        """Forget every unsaved change (a decision whose commit failed: `Checkout.decide`); the working
        root's copies of the paths it changed go too (fetched again, as committed, when read)."""
        paths = list(self.changes.files)
        self.changes, self.unsaved, self.versions, self.held = Changes(), {}, {}, {}
        for path in paths:
            self.cached.pop(path, None)
        self._retrack()
        await self.forget_local(paths)

    async def forget_local(self, paths: list[str]) -> None:
        """Remove the working root's copies of `paths` (fetched again, as committed, when read)."""
        await self.mirror.now(forget, self.workdir, paths)

    async def _mirror_change(self, plan: WritePlan) -> None:
        """Mirror a write or delete into the root: queued for our own temp root (whose path callers can
        only learn from ``store.root``, which waits for the queue); done before returning for a root the
        caller chose (they hold its path and may look at once), where a failure also refuses the change."""
        if self.private:
            await self.mirror.make_room()
            self.mirror.later(plan.path, record_change, self.workdir, plan, self._stale_around)
        else:
            await self.mirror.now_or_here(len(plan.data), record_change, self.workdir, plan, self._stale_around)

    def _holds_committed(self, path: str, sha256: str) -> bool:
        """Whether the handle still holds committed content `sha256` for `path` (a fetch may race a write, or
        a move to a newer base whose part holding `path` is not loaded: then it is not known to, and the
        content is not cached)."""
        try:
            record = self.entry(path)
        except PartNotLoaded:
            return False
        return path not in self.unsaved and record is not None and record.sha256 == sha256

    async def forget_stale(self, state: State) -> None:
        """Remove local copies that `state` (the handle's new base) no longer holds as cached: files
        other writers changed or deleted. They are fetched again, as committed, when read."""
        # a snapshot: a read running meanwhile may cache more paths, whose parts this need did not load (it
        # checks its own content against the handle's base when it caches it)
        cached = {p: sha for p, sha in self.cached.items() if p not in self.unsaved}
        await state.files.need(cached)
        stale = [p for p, sha in cached.items() if p not in self.unsaved and _sha_in(state, p) != sha]
        for path in stale:
            self.cached.pop(path, None)
        if stale:
            await self.forget_local(stale)

    def _mirror_failed(self, path: str) -> None:
        """A local copy could not be written (called on the writer thread): never read it as cached."""
        self.cached.pop(path, None)

    def _stale_around(self, path: str) -> list[str]:
        """Cached files no longer in the store that may block writing `path` (called only on failure)."""
        cached = list(self.cached)
        near = [d for d in parent_dirs(path) if d in self.cached] + [p for p in cached if p.startswith(path + "/")]
        return [p for p in near if self._absent(p)]

    def _absent(self, path: str) -> bool:
        """Whether `path` is no file of the handle (called off the lock: the base may have moved on to one
        whose part holding `path` is not loaded; such a path counts as present, and is left alone)."""
        try:
            return self.entry(path) is None
        except PartNotLoaded:
            return False

    def _record(self, plan: WritePlan, *, guarded: bool) -> None:
        # created and deleted before any save: nothing left to save
        keep = plan.record is not None or plan.path in self.base.files
        self._set_change(plan.path, plan.record, keep=keep)
        # the newest change of a path decides whether it is guarded: a write or delete without
        # `expected_sha` after a guarded one (set_metadata pins its write) saves as any other would
        if guarded and keep:
            self.changes.guarded.add(plan.path)
        else:
            self.changes.guarded.discard(plan.path)
        if plan.record is None:
            self.unsaved.pop(plan.path, None)
        else:
            self.unsaved[plan.path] = plan.data
        if plan.version:
            self.versions[plan.version] = plan.data
        if plan.event:
            self.changes.audit.append(plan.event)

    def forget_saved(self, saved: Changes, versions: dict[str, bytes], landed: State) -> None:
        """A save of `saved` committed as `landed` although it reported failure: rebase onto `landed`,
        keeping only what changed since that save began (a path rewritten afterwards stays unsaved)."""
        for path, record in saved.files.items():
            if path in self.changes.files and self.changes.files[path] is record:
                del self.changes.files[path]
                self.changes.guarded.discard(path)
                self.unsaved.pop(path, None)
            elif path not in self.changes.files and record is not None:
                # written by that save, then deleted here as if never saved: it exists now, so delete it
                self.changes.files[path] = None
        committed_events = {id(event) for event in saved.audit}
        self.changes.audit = [e for e in self.changes.audit if id(e) not in committed_events]
        self.changes.entries = {k: v for k, v in self.changes.entries.items() if saved.entries.get(k) is not v}
        self.versions = {n: d for n, d in self.versions.items() if n not in versions}
        self.base, self.imported = landed, False
        self._retrack()

    async def committed(self, state: State) -> None:
        """The unsaved changes were committed as `state`: the working root already holds them (written
        through), so remember what it holds and start afresh."""
        saved = [p for p, r in self.changes.files.items() if r is not None and p in self.unsaved]
        await state.files.need(saved)
        for path in self.changes.files:
            self.cached.pop(path, None)
        self.cached.update({p: state.files[p].sha256 for p in saved if p in state.files})
        self.base, self.changes, self.unsaved, self.versions, self.imported = state, Changes(), {}, {}, False
        self.held = {}
        self._written_dirs = Counter()


def _sha_in(state: State, path: str) -> str:
    record = state.files.get(path)
    return record.sha256 if record else ""


def _meta_or_none(record: FileEntry, path: str) -> MemoryMeta | None:
    """The sidecar to mirror for a committed file (none for files without one, or with a broken one)."""
    return None if record.meta_error or not record.has_meta else record.meta(path)
