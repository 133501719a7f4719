"""The storage seam: what the journal asks of object storage, and the backends that give it.

Public: the contract a backend implements (`ObjectStorage`, with its `Capabilities` and the `Listed` rows of
a listing), what a backend can do (`capabilities_for(uri)`), per-prefix fsspec options (`set_storage_options`),
requests in flight per filesystem (`set_max_in_flight`; adaptive below it, `_adaptive`) and the gate for
backends not yet verified (`allow_unverified_backend`). The rest is private: one module per verified backend
(`_local`, `_memory`, `_s3`, `_gcs`: its filesystem class, `Capabilities`, how its filesystem is built and how
it creates an object only if absent, as a `_backend.Backend`), the registry mapping a filesystem or protocol
to its backend (`_registry`), the fsspec implementation every backend goes through (`_fsspec`), create-only
writes (`_conditional`; S3 uploads through obstore, `_s3_writes`), copies checked in the backend (`_copy`),
running fsspec's I/O on the loop (`_fsio`), per-prefix options (`_options`) and local working roots
(`_workdir`). The contract is about objects under one prefix; where a store's journal lives is the
journal's (`_journal.journal_storage`). The conformance kit that checks a backend is
`flyteplugins_memory.testing`.
"""

from ._adaptive import get_max_in_flight, set_max_in_flight
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
    "get_max_in_flight",
    "set_max_in_flight",
    "set_storage_options",
]
