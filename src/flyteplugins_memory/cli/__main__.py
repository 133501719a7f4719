"""``python -m flyteplugins_memory.cli``: the ``flyte-memory`` command, where the console script is not on
the path."""

from . import main

main()
