"""Flyte's agent stack on our store: `install()` and `uninstall()`, and the environment switch.

Flyte's agent-SDK plugins (``flyteplugins-agents-*``) open cross-run memory through
``flyteplugins.agents.core.resolve_memory``, which runs ``from flyte.ai.agents.memory import MemoryStore``
on every call and opens ``MemoryStore.get_or_create.aio(key=..., audit=...)``. `install` rebinds exactly
two names to our class:

- ``flyte.ai.agents.memory.MemoryStore`` (what ``resolve_memory`` imports at call time), and
- ``flyte.ai.agents.MemoryStore`` (what ``from flyte.ai.agents import MemoryStore`` gives code imported
  afterwards).

Nothing else changes: ``flyte.ai.agents.agent`` keeps upstream's class for its ``isinstance`` check (ours
is a subclass, so an `Agent` accepts both), and a name bound before `install` (``from flyte.ai.agents
import MemoryStore`` at a module's top) keeps what it was bound to. `uninstall` puts upstream's class back
on whichever of the two names still holds ours. Both are idempotent and thread-safe.

``FLYTEPLUGINS_MEMORY_INSTALL=1`` (or ``true``, ``yes``, ``on``) calls `install` when this package is
imported or Flyte loads its type plugins (the ``flyte.plugins.types`` entry point, which Flyte loads in
every task before it converts the task's inputs), so a `TaskEnvironment(env_vars=...)` switches it on for
every task of an environment without touching task code. Unset, empty or ``0``/``false``/``no``/``off``:
nothing changes. Any other value is logged as a warning and changes nothing.
"""

from __future__ import annotations

import logging
import os
import threading

from .store import MemoryStore

__all__ = ["INSTALL_ENV", "install", "install_from_environment", "uninstall"]

logger = logging.getLogger(__name__)

#: The environment variable that switches `install` on for a process (read at import and plugin load).
INSTALL_ENV = "FLYTEPLUGINS_MEMORY_INSTALL"

_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})
_lock = threading.Lock()
#: upstream's class, recorded at the first `install` (the class flyte defines, whatever was bound since)
_upstream: list[type] = []


def _targets() -> list[object]:
    """The two modules whose ``MemoryStore`` name `install` rebinds: ``flyte.ai.agents.memory`` and
    ``flyte.ai.agents``."""
    import flyte.ai.agents
    import flyte.ai.agents.memory

    return [flyte.ai.agents.memory, flyte.ai.agents]


def install() -> None:
    """Make Flyte's agent stack open our `MemoryStore` in this process.

    Rebinds ``flyte.ai.agents.memory.MemoryStore`` and ``flyte.ai.agents.MemoryStore`` to
    `flyteplugins_memory.MemoryStore`, so ``flyteplugins.agents.core.resolve_memory`` (and with it every
    ``flyteplugins-agents-*`` plugin's ``memory_key=``) opens stores with our journal, history, search and
    audit. Stores stay where upstream puts them and open in upstream too. Calling it again does nothing;
    `uninstall` undoes it.
    """
    with _lock:
        modules = _targets()
        if not _upstream:
            _upstream.append(modules[0].MemoryStore)  # type: ignore[attr-defined]
        for module in modules:
            module.MemoryStore = MemoryStore  # type: ignore[attr-defined]
    logger.debug("flyteplugins_memory installed as flyte.ai.agents.MemoryStore")


def uninstall() -> None:
    """Undo `install`: put upstream's class back on ``flyte.ai.agents.memory.MemoryStore`` and
    ``flyte.ai.agents.MemoryStore`` where they still hold ours. Without an `install`, it does nothing."""
    with _lock:
        if not _upstream:
            return
        for module in _targets():
            if module.MemoryStore is MemoryStore:  # type: ignore[attr-defined]
                module.MemoryStore = _upstream[0]  # type: ignore[attr-defined]


def install_from_environment() -> bool:
    """Call `install` if `INSTALL_ENV` asks for it; whether it did. A value that is neither on nor off
    is logged and ignored (this runs while Flyte loads plugins, where raising would drop our type too)."""
    raw = os.environ.get(INSTALL_ENV, "")
    value = raw.strip().lower()
    if value in _ON:
        install()
        return True
    if value not in _OFF:
        logger.warning("%s=%r is neither on (1, true, yes, on) nor off (0, false, no, off): ignored", INSTALL_ENV, raw)
    return False
