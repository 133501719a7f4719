"""Which version of the package this is, as the journal names it.

Every journal object this version writes records `WRITER`, so that a reader too old for it can say which
version to upgrade to. `READER_REVISION` is this code's feature revision within the journal's major format:
an object whose ``min_reader`` is higher holds something this version must not write over (see
docs/journal.md, "How the format evolves").
"""

from __future__ import annotations

import importlib.metadata
import pathlib

DISTRIBUTION = "flyteplugins-memory"
#: The version in pyproject.toml (a test keeps them equal); used when the installed metadata does not
#: describe this very code (a source checkout, or an editable install made from another version).
SOURCE_VERSION = "0.4.0"
#: This code's feature revision within journal format 1: 0 was 0.1-0.2 (no ``min_reader``), 1 added the
#: extension fields and commit info.
READER_REVISION = 1


def _installed_version() -> str | None:
    """The installed distribution's version, if that distribution is where this module was loaded from."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
        located = pathlib.Path(str(dist.locate_file("flyteplugins_memory/_version.py")))
        return dist.version if located.resolve() == pathlib.Path(__file__).resolve() else None
    except (importlib.metadata.PackageNotFoundError, OSError):
        return None


PACKAGE_VERSION = _installed_version() or SOURCE_VERSION
#: Recorded in every journal object this version writes.
WRITER = f"{DISTRIBUTION} {PACKAGE_VERSION}"
