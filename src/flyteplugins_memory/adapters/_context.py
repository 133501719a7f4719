"""Where an adapter given a key (not a handle) opens it. The key's storage root comes from Flyte's context
(a task context, or a bound raw-data path), which travels in `contextvars`; a framework may make its first
call from a thread of its own without it (Upsonic's worker thread, an adapter's loop thread). So an adapter
made where the context names the task's storage keeps a copy of that context and opens the key inside it;
made where nothing is named (a module's top level), it leaves the choice to its first call."""

from __future__ import annotations

import contextvars

__all__ = ["storage_context"]


def storage_context() -> contextvars.Context | None:
    """A copy of the current context if it names the task's storage (a task context, or a raw-data path)."""
    from flyte._context import internal_ctx

    context = internal_ctx()
    named = context.data.task_context is not None or context.has_raw_data
    return contextvars.copy_context() if named else None
