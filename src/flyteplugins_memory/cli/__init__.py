"""``flyte-memory``: look inside flyteplugins-memory stores from a shell, also as ``flyte memory``.

Usage: ``flyte-memory <verb> [ARGS] [--key KEY [--org O] [--project P] [--domain D] [--root ROOT] | --uri URI]
[--json]`` with the verbs ``ls``, ``cat``, ``meta``, ``messages``, ``log``, ``audit``, ``rm``, ``gc``,
``purge``, ``keys``, ``report``, ``search``, ``proposals``, ``accept``, ``discard``, ``history``, ``diff``,
``restore``, ``export``, ``import`` and ``write``. `memory` is the
rich-click group (registered with flyte's CLI through the ``flyte.plugins.cli.commands`` entry point);
`main` runs it as the console script. Built on the public API only: one module per verb family registers
its commands on `memory`.
"""

from __future__ import annotations

from . import _archives, _files, _history, _reporting, _search, _staged, _upkeep, _versions, _write
from ._app import memory

__all__ = ["main", "memory"]

# imported for their commands, registered on `memory`
_VERB_MODULES = (_files, _write, _history, _versions, _upkeep, _reporting, _search, _staged, _archives)


def main(args: list[str] | None = None) -> None:
    """The ``flyte-memory`` console script (`args`: the command line after the program's name, default
    ``sys.argv[1:]``)."""
    memory(args, prog_name="flyte-memory")
