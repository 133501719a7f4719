"""`MemoryOpResource`: ingest a file, a directory or a URL into ``memory://resources/...`` in one commit.

Layout (OpenRath's local backend's, under ``target_uri``, ``memory://resources`` by default, which must be
``memory://resources`` or a directory under it): ``<target>/<id>/`` with ``<id>`` the first 16 hex of the
sha256 of the bytes (of a directory: of its sorted ``path NUL sha256`` lines), holding

* ``source<suffix>``, the file's bytes exactly (``<suffix>`` its name's, ``.bin`` if none), or for a
  directory ``source/<relative path>`` for each of its files, bytes exactly;
* ``meta``, a markdown entry: ``# Resource <id>``, the source, original name, bytes (and files), then the
  ``## Reason`` and ``## Instruction`` given.

Every file is an entry (our ``.md`` file of its URI, `uris.path_of`) written with `write_bytes`, labelled
``openrath_resource`` (the id), ``source``, ``original_name``, ``reason`` and ``instruction`` (each cut to
`LABEL_CHARS`), so `MemoryOpFind` finds the text ones (binary ones never match) and ``list_paths(where=...)``
finds an ingest's files. An ingest is one save: it lands whole or not at all (a read-only prefix refuses it
whole, and the handle stays usable). Ingesting bytes already there returns the same URI and commits nothing;
a file of it deleted or purged since (by any handle: the ingest refreshes first) is written again (with
``meta``), the others left as they are.
The result is a `MemoryWriteResult` (``uri`` the ``<target>/<id>`` directory, ``bytes_written`` the bytes
read), as the local backend returns.
"""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from rath.memory import MemoryOpResource, MemoryResult, MemoryWriteResult

from .errors import fail
from .sources import Fetched, fetch
from .uris import join, parse_uri, path_of
from .writes import refuse_unsaved, save

if TYPE_CHECKING:
    from .ops import Bound

__all__ = ["DEFAULT_TARGET", "LABEL_CHARS", "ingest", "resource_id"]

DEFAULT_TARGET = "memory://resources"
LABEL_CHARS = 500  # per label: metadata holds at most 4 KiB as JSON; meta keeps the whole text


def resource_id(fetched: Fetched) -> str:
    """The first 16 hex of the sha256 of a file's bytes, or of a directory's ``path NUL sha`` lines."""
    if not fetched.is_dir:
        (data,) = fetched.files.values()
        return hashlib.sha256(data).hexdigest()[:16]
    lines = "".join(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n" for rel, data in sorted(fetched.files.items()))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()[:16]


def ingest(bound: Bound, op: MemoryOpResource) -> MemoryResult:
    target = _target(op.target_uri)  # before reading anything: a bad target reads nothing
    refuse_unsaved(bound.store)  # nor a caller's handle with unsaved changes
    fetched = fetch(op.source, bound.policy, op.timeout_seconds)
    rid = resource_id(fetched)
    root = join(target, rid)
    files = _files(root, fetched)
    meta_uri = join(root, "meta")
    store = bound.store
    if not store.has_unsaved_changes():  # a refresh would drop a caller's unsaved changes
        store.refresh()  # "already there" is the newest committed state's: another handle may have purged
    # what is not there as these bytes yet: all of it, the first time; a file deleted or purged since
    wanted = [(path_of(uri), data) for uri, data in files]
    missing = [(p, d) for p, d in wanted if store.current_sha(p) != hashlib.sha256(d).hexdigest()]
    meta_path = path_of(meta_uri)
    if not missing and store.get_meta(meta_path) is not None:
        return MemoryWriteResult(uri=root, bytes_written=fetched.size)  # the same bytes are there already
    labels = {
        "openrath_resource": rid,
        "source": fetched.label[:LABEL_CHARS],
        "original_name": fetched.name[:LABEL_CHARS],
        "reason": (op.reason or "")[:LABEL_CHARS],
        "instruction": (op.instruction or "")[:LABEL_CHARS],
    }
    reason = f"openrath resource {rid} from {fetched.label}"[:200]
    paths = [p for p, _ in missing] + [meta_path]

    def stage(dropped: set[str] | None) -> None:
        for path, data in missing:
            if dropped is None or path in dropped:
                store.write_bytes(path, data, actor=bound.actor, reason=reason, metadata=labels)
        if dropped is None or meta_path in dropped:
            text = _meta_text(rid, fetched, op)
            store.write_text(meta_path, text, actor=bound.actor, reason=reason, metadata=labels)

    save(bound, stage, paths)
    return MemoryWriteResult(uri=root, bytes_written=fetched.size)


def _target(target_uri: str | None) -> str:
    """The destination directory: ``memory://resources`` or under it (``invalid_uri`` otherwise)."""
    uri = target_uri or DEFAULT_TARGET
    scope, segments = parse_uri(uri)
    if scope != "resources":
        raise fail("invalid_uri", f"a resource's target_uri must be memory://resources or under it, got {uri!r}")
    return "memory://resources" + "".join("/" + s for s in segments)


def _files(root: str, fetched: Fetched) -> list[tuple[str, bytes]]:
    """``(uri, bytes)`` of each file the ingest writes (``source<suffix>``, or ``source/<path>``)."""
    if not fetched.is_dir:
        (data,) = fetched.files.values()
        suffix = PurePosixPath(fetched.name).suffix or ".bin"
        return [(join(root, "source" + suffix), data)]
    return [(join(root, "source/" + rel), data) for rel, data in fetched.files.items()]


def _meta_text(rid: str, fetched: Fetched, op: MemoryOpResource) -> str:
    lines = [
        f"# Resource {rid}",
        "",
        f"- source: {fetched.label}",
        f"- original_name: {fetched.name}",
        f"- bytes: {fetched.size}",
    ]
    if fetched.is_dir:
        lines.append(f"- files: {len(fetched.files)}")
        lines.extend(f"  - source/{rel} ({len(data)} bytes)" for rel, data in fetched.files.items())
    if op.reason:
        lines.extend(["", "## Reason", op.reason])
    if op.instruction:
        lines.extend(["", "## Instruction", op.instruction])
    return "\n".join(lines) + "\n"
