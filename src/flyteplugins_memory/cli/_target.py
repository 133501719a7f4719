"""Which store (or namespace of stores) a command names, and opening it without ever creating one.

A store is named by ``--uri`` (its exact location), or by ``--key`` with ``--org``, ``--project``,
``--domain`` and ``--root``. A value not given comes from the Flyte config when one is found (the one
``flyte --config`` loaded when run as ``flyte memory``, else ``flyte.config.auto()``: ``FLYTECTL_CONFIG``,
``./.flyte/config.yaml``, ``~/.flyte/config.yaml`` and the ``FLYTE_*`` environment), else the local
defaults a local ``flyte.run`` uses (org ``local``, project ``default``, domain ``development``, the local
raw-data root), so a store a local run wrote is found by its key alone. A Flyte config names no storage
root: a cluster's stores need ``--root s3://bucket`` (or ``--uri``).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import rich_click as click

if TYPE_CHECKING:
    from flyteplugins_memory import MemoryStore

#: how the library's `StoreNotFound` of an open begins (the CLI says it in its own words)
_NOT_FOUND = "No MemoryStore at "


@dataclass(frozen=True)
class Target:
    """The store-naming options of one command line, as typed."""

    key: str | None = None
    org: str | None = None
    project: str | None = None
    domain: str | None = None
    root: str | None = None
    uri: str | None = None

    def with_config(self) -> Target:
        """These options, with org, project and domain filled from the Flyte config where it sets them."""
        org, project, domain = _config_namespace()
        return Target(self.key, self.org or org, self.project or project, self.domain or domain, self.root, self.uri)

    def open(self, *, trusted: bool = False) -> MemoryStore:
        """The named store at its newest commit (`StoreNotFound` if there is none; never created)."""
        from flyteplugins_memory import MemoryStore

        self.check_store_naming()
        if self.uri is not None:
            return MemoryStore.open(remote_path=self.uri.rstrip("/"), trusted=trusted)
        full = self.with_config()
        return MemoryStore.open(
            key=self.key, org=full.org, project=full.project, domain=full.domain, root=self.root, trusted=trusted
        )

    def check_store_naming(self) -> None:
        """Refuse a command line that names no store, or names one twice (`click.UsageError`)."""
        if self.uri is None and self.key is None:
            raise click.UsageError("name a store with --key KEY (or --uri URI)")
        if self.uri is not None and any((self.key, self.org, self.project, self.domain, self.root)):
            raise click.UsageError("--uri names the store by itself: drop --key/--org/--project/--domain/--root")


def open_store(target: Target, *, trusted: bool = False) -> MemoryStore:
    """Open the named store at its newest commit (a `trusted` handle if asked); `StoreNotFound` ("no memory
    store at ...") if it does not exist, `StoreDeleted` (its own message: who deleted it, when, why) if it
    was deleted. Never creates one."""
    from flyteplugins_memory import StoreDeleted, StoreNotFound

    try:
        return target.open(trusted=trusted)
    except StoreDeleted:
        raise  # says what happened to the store: "MemoryStore at ... was deleted by ..."
    except StoreNotFound as exc:
        text = str(exc)
        if not text.startswith(_NOT_FOUND):  # another cause: its own message, never spliced into ours
            raise
        message = f"no memory store at {text.removeprefix(_NOT_FOUND)}"
        raise StoreNotFound(message + missing_root(target.root)) from None


def missing_root(root: str | None) -> str:
    """``" (the storage root ... does not exist)"`` for a --root that does not exist (a local folder, or
    an S3/GCS bucket), else "": a typo there otherwise reads as just "no store" or "no keys". Asked only
    after a lookup found nothing, so a command that succeeds pays nothing for it."""
    if root is None:
        return ""
    if root.startswith(_BUCKET_SCHEMES):
        return _missing_bucket(root)
    if "://" in root and not root.startswith("file://"):
        return ""
    folder = pathlib.Path(root.removeprefix("file://")).expanduser()
    return "" if folder.is_dir() else f" (the storage root {root} does not exist)"


#: roots whose first path part is a bucket
_BUCKET_SCHEMES = ("s3://", "gs://", "gcs://")


def _missing_bucket(root: str) -> str:
    """The note for a bucket the storage settings cannot see; "" when it is there, or when asking fails
    (no claim is better than a wrong one: the command's own error stands)."""
    from flyteplugins_memory.storage._fsspec import filesystem_for  # the store's own settings for `root`

    bucket = root.split("://", 1)[1].split("/", 1)[0]
    try:
        fs = filesystem_for(root)
        if fs.exists(bucket):
            return ""
    except Exception:
        return ""
    return f" (the bucket {bucket} does not exist, or these credentials cannot see it)"


def not_found(message: str) -> Exception:
    """The library's `StoreNotFound` with `message` (exit code 1, as a missing store or file)."""
    from flyteplugins_memory import StoreNotFound

    return StoreNotFound(message)


def list_keys(target: Target, prefix: str) -> list[str]:
    """Keys of the stores in the namespace the options name."""
    from flyteplugins_memory import MemoryStore

    local = target.root is not None and not target.root.startswith(_BUCKET_SCHEMES)
    if local and missing_root(target.root):
        raise not_found(f"no storage root at {target.root} (no such folder)")
    full = target.with_config()
    found = MemoryStore.list_keys(prefix, org=full.org, project=full.project, domain=full.domain, root=full.root)
    if not found and not local and (missing := missing_root(target.root)):
        raise not_found(f"no storage root at {target.root}{missing}")
    return found


def _config_namespace() -> tuple[str | None, str | None, str | None]:
    """Org, project and domain from the Flyte config of this invocation (None where it sets none)."""
    import flyte.config

    obj = click.get_current_context(silent=True)
    cli_config = obj.find_root().obj if obj is not None else None
    config = getattr(cli_config, "config", None) or flyte.config.auto()
    task = config.task
    return getattr(cli_config, "org", None) or task.org, task.project, task.domain
