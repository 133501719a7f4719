"""The storage seam: what the journal asks of object storage, and the backends that give it.

Public: the contract a backend implements (`ObjectStorage`, with its `Capabilities` and the `Listed` rows of
a listing), what a backend can do (`capabilities_for(uri)`), per-prefix fsspec options (`set_storage_options`)
and the gate for backends not yet verified (`allow_unverified_backend`). The rest is private: the fsspec
implementation every backend goes through (`_fsspec`), the registry of verified filesystems and their
capabilities (`_registry`), create-only writes (`_conditional`, `_s3_writes`), running fsspec's I/O on the
loop (`_fsio`) and local working roots (`_workdir`). The conformance kit that checks a backend is
`flyteplugins_memory.testing`.
"""

from ._contract import Capabilities, Listed, ObjectStorage
from ._fsspec import capabilities_for
from ._options import set_storage_options
from ._registry import UNVERIFIED_BACKENDS_ENV, allow_unverified_backend

__all__ = [
    "UNVERIFIED_BACKENDS_ENV",
    "Capabilities",
    "Listed",
    "ObjectStorage",
    "allow_unverified_backend",
    "capabilities_for",
    "set_storage_options",
]
