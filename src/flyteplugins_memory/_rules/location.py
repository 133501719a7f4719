"""Where a keyed store lives: ``{storage_root}/agents/memory-store/v0/{org}/{project}/{domain}/{key}``.

The storage-root normalization is pure and follows upstream exactly. The context lookups (task context,
``flyte.init`` config, raw-data path) sit at the bottom, together with the embedded local defaults:

* Outside a remote task (a script, or a ``flyte.run`` in local mode), a missing org, project or domain
  falls back to `LOCAL_ORG`, `LOCAL_PROJECT` and `LOCAL_DOMAIN`.
* Outside any run, a missing raw-data path falls back to `LOCAL_RAW_DATA_ROOT`, the directory a local
  ``flyte.run`` uses, so a script and a local run with one key share one store. Never in a Flyte task's
  process on a cluster (`in_task_pod`): there, a thread that does not carry the task's context would put
  the store on the pod's disk, lost with it, so it is a `ContextError` (upstream raises there too).

Explicit arguments always win, then the task context, then ``flyte.init``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ..errors import ContextError
from .paths import validate_segment

if TYPE_CHECKING:
    from flyte.models import PathRewrite

NAMESPACE: tuple[str, ...] = ("agents", "memory-store")
SCHEMA_VERSION = "v0"
LOCAL_ORG = "local"
LOCAL_PROJECT = "default"
LOCAL_DOMAIN = "development"
LOCAL_RAW_DATA_ROOT = "/tmp/flyte/raw_data"

#: set in the pods of a Flyte cluster's tasks; flyte itself reads it to tell a pod from a developer's machine
TASK_POD_ENV = "FLYTE_INTERNAL_EXECUTION_PROJECT"

_RUN_SCRATCH_SEGMENT = "rd"
_LOCAL_RAW_DATA_DIR = "raw_data"


def join_remote_path(*parts: str) -> str:
    """Join URI fragments with ``/``; the first keeps its scheme and root (``s3://bucket``)."""
    segments = [p for p in parts if p]
    if not segments:
        return ""
    head, *rest = segments
    return "/".join([head.rstrip("/"), *(p.strip("/") for p in rest)])


def rewrite_mounted_path(raw_data_path: str, path_rewrite: PathRewrite | None) -> str:
    """Map a hosted mount prefix (``path_rewrite.new_prefix``) back to the URI it mounts."""
    trimmed = raw_data_path.rstrip("/")
    if path_rewrite is None:
        return trimmed
    new_prefix = path_rewrite.new_prefix.rstrip("/")
    if trimmed == new_prefix or trimmed.startswith(f"{new_prefix}/"):
        return path_rewrite.old_prefix.rstrip("/") + trimmed[len(new_prefix) :]
    return trimmed


def storage_root(raw_data_path: str, path_rewrite: PathRewrite | None = None) -> str:
    """Return the run-independent root for keyed stores under a raw-data path.

    A remote URI collapses to ``scheme://netloc``; a local path drops a trailing ``rd/<run_id>`` or the
    per-run segment after ``raw_data/``, so two runs sharing a key resolve to one store.
    """
    trimmed = rewrite_mounted_path(raw_data_path, path_rewrite)
    parsed = urlparse(trimmed)
    if parsed.scheme and parsed.netloc:
        return f"{parsed.scheme}://{parsed.netloc}"
    if trimmed.count("/") < 2:
        return trimmed
    parent, scratch, run_id = trimmed.rsplit("/", 2)
    if run_id and scratch == _RUN_SCRATCH_SEGMENT:
        return parent
    if run_id and scratch == _LOCAL_RAW_DATA_DIR:
        return f"{parent}/{scratch}"
    return trimmed


def store_path(root: str, org: str, project: str, domain: str, key: str) -> str:
    """Return the remote path of a keyed store under a storage root."""
    names = {"org": org, "project": project, "domain": domain, "key": key}
    for name, value in names.items():
        validate_segment(value, name=name)
    return join_remote_path(root, *NAMESPACE, SCHEMA_VERSION, org, project, domain, key)


def namespace_path(root: str, org: str, project: str, domain: str) -> str:
    """The directory holding every keyed store of one org, project and domain under a storage root."""
    for name, value in (("org", org), ("project", project), ("domain", domain)):
        validate_segment(value, name=name)
    return join_remote_path(root, *NAMESPACE, SCHEMA_VERSION, org, project, domain)


def remote_path_for_key(
    key: str, org: str | None, project: str | None, domain: str | None, root: str | None = None
) -> str:
    """Resolve a key's remote path from explicit values, the Flyte context and the local defaults."""
    validate_segment(key, name="key")
    return join_remote_path(resolve_namespace_path(org, project, domain, root), key)


def resolve_namespace_path(org: str | None, project: str | None, domain: str | None, root: str | None) -> str:
    """The namespace directory of keyed stores, resolved like `remote_path_for_key`; an explicit `root`
    (a storage root or a raw-data path) is normalized by `storage_root` instead of read from the context."""
    org, project, domain = _resolve_namespace(org, project, domain)
    base = storage_root(root) if root else _storage_root_from_context()
    return namespace_path(base, org, project, domain)


def _resolve_namespace(org: str | None, project: str | None, domain: str | None) -> tuple[str, str, str]:
    from flyte._context import internal_ctx
    from flyte._initialize import _get_init_config

    task_context = internal_ctx().data.task_context
    action = task_context.action if task_context is not None else None
    config = _get_init_config()
    local = task_context is None or task_context.mode == "local"
    defaults = {"org": LOCAL_ORG, "project": LOCAL_PROJECT, "domain": LOCAL_DOMAIN}
    resolved = []
    for name, explicit in (("org", org), ("project", project), ("domain", domain)):
        value = explicit or getattr(action, name, None) or getattr(config, name, None)
        if not value and local:
            value = defaults[name]
        if not value:
            raise ContextError(f"{name} is not set in the task context or flyte.init(); pass {name}=... explicitly")
        resolved.append(value)
    return resolved[0], resolved[1], resolved[2]


def _storage_root_from_context() -> str:
    from flyte._context import internal_ctx

    context = internal_ctx()
    try:
        raw = context.raw_data
    except ValueError:
        if context.data.task_context is not None and context.data.task_context.mode != "local":
            raise ContextError("MemoryStore needs a raw_data_path in the Flyte context") from None
        if in_task_pod():
            raise ContextError(
                "MemoryStore needs a raw_data_path in the Flyte context, and this thread has none: it runs in a "
                "Flyte task's pod but does not carry the task's context (a thread you start yourself does not "
                "inherit it). Open the store on the task's own thread and hand the handle over, or run the "
                "thread's work under contextvars.copy_context().run(...) taken on the task's thread"
            ) from None
        return LOCAL_RAW_DATA_ROOT
    if not raw.path:
        return LOCAL_RAW_DATA_ROOT
    return storage_root(raw.path, raw.path_rewrite)


def in_task_pod() -> bool:
    """Whether this process is a Flyte task's on a cluster (whatever thread asks)."""
    return bool(os.environ.get(TASK_POD_ENV))
