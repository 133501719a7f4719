"""Pure: where a store's commit journal lives, outside the store prefix that upstream downloads.

Upstream's ``get_or_create`` downloads every object under the store prefix, so history kept there makes
every upstream open pay for it. The journal therefore lives beside the tree of stores, never inside one:

    {base}/{tail}            the store            {base}/.journal/{tail}      its journal

* Standard layout, ``{root}/agents/memory-store/v0/{org}/{project}/{domain}/{key}``: ``base`` is
  ``{root}/agents/memory-store`` and ``tail`` is ``v0/{org}/{project}/{domain}/{key}``. No key can reach
  ``.journal`` there (keys sit four levels below ``v0``), whereas a sibling inside ``{domain}/`` would be
  the store of a key named like it.
* Any other (explicit) ``remote_path``: ``base`` is its parent directory and ``tail`` its last segment.
  Such a path may not contain a ``.journal`` segment itself, so no store is ever inside a journal or the
  reverse (`InvalidPath`).
* A store at the root of a bucket has no outside: its journal stays in ``meta/.journal/`` (the layout of
  earlier versions, see `OLD_JOURNAL_DIR`), and nothing is ever moved.

A key that took a new store after `delete_store` (generation ``g`` >= 1, see `_journal.generations`) keeps that
store's journal at ``{base}/.journal/.journal/g{g}/{tail}``: no journal of generation 0 can reach it (that
would take a store whose tail is ``.journal``, and no remote path may contain such a segment), and the
journal of the deleted generation, which stale handles still read, stays where it was.

Object names inside the journal stay *logical* (``meta/.journal/log/...``, as `_rules.layout` builds them);
`FsspecStorage` maps them to this location.
"""

from __future__ import annotations

from ..errors import InvalidPath
from .location import NAMESPACE, SCHEMA_VERSION

JOURNAL_SEGMENT = ".journal"
#: Where earlier versions kept the journal, relative to the store prefix (and the logical name prefix).
OLD_JOURNAL_DIR = f"meta/{JOURNAL_SEGMENT}"
#: segments of the standard layout after the storage root: agents, memory-store, v0, org, project, domain, key
_STANDARD_DEPTH = len(NAMESPACE) + 5


def journal_root(store_prefix: str) -> str:
    """The journal's location for a store at `store_prefix` (a path without protocol, no trailing ``/``)."""
    return generation_root(store_prefix, 0)


def generation_root(store_prefix: str, generation: int) -> str:
    """Where the journal of generation `generation` of the store at `store_prefix` lives (0: the key's first
    store). A bucket-root store has no outside for its generations: `InvalidPath` for one past 0."""
    parts = store_prefix.rstrip("/").split("/")
    if _is_standard(parts):
        split = len(parts) - 5  # just before "v0"
    else:
        if JOURNAL_SEGMENT in parts[1:]:
            raise InvalidPath(f"A store's remote path may not contain a {JOURNAL_SEGMENT!r} segment: {store_prefix!r}")
        split = len(parts) - 1
    if split < 1 or not "/".join(parts[:split]).strip("/"):
        if generation:
            raise InvalidPath(f"A store at the root of a bucket cannot be created again once deleted: {store_prefix!r}")
        return old_journal_root(store_prefix)
    beside = [JOURNAL_SEGMENT, f"g{generation}"] if generation else []
    return "/".join([*parts[:split], JOURNAL_SEGMENT, *beside, *parts[split:]])


def generation_of(root: str) -> int:
    """The generation whose journal lives at `root` (as `generation_root` names them; 0 for any other)."""
    marker = f"/{JOURNAL_SEGMENT}/{JOURNAL_SEGMENT}/g"
    if marker not in root:
        return 0
    number = root.rsplit(marker, 1)[1].split("/", 1)[0]
    return int(number) if number.isdigit() else 0


def old_journal_root(store_prefix: str) -> str:
    """Where versions before issue 8 kept the journal: inside the store, under ``meta/.journal``."""
    return f"{store_prefix.rstrip('/')}/{OLD_JOURNAL_DIR}"


def _is_standard(parts: list[str]) -> bool:
    if len(parts) < _STANDARD_DEPTH + 1:
        return False
    tail = parts[-_STANDARD_DEPTH:]
    return tuple(tail[: len(NAMESPACE)]) == NAMESPACE and tail[len(NAMESPACE)] == SCHEMA_VERSION
