"""moto as S3 behaves: conditional puts decided atomically.

moto 5.2's PutObject checks ``If-None-Match: *`` (and ``If-Match``) and then stores the object in separate,
unlocked steps, and its threaded server answers each request on its own thread: two racing create-only
writes of one commit slot can both succeed, the second silently replacing the first commit. S3 decides
conditional writes atomically (one winner, HTTP 412 for the rest), which the commit path relies on. Call
`atomic_conditional_puts()` in the process that runs the moto server before racing writers against it
(our test suite and benchmarks do; so should a `BackendConformance` run against moto).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["atomic_conditional_puts"]


def atomic_conditional_puts() -> None:
    """Serialize moto's conditional PutObject calls (unconditional ones stay concurrent). Idempotent."""
    from moto.s3.responses import S3Response

    if getattr(S3Response.put_object, "atomic_conditions", False):
        return
    plain, lock = S3Response.put_object, threading.Lock()

    def put_object(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.headers.get("If-None-Match") is None and self.headers.get("If-Match") is None:
            return plain(self, *args, **kwargs)
        with lock:
            return plain(self, *args, **kwargs)

    put_object.atomic_conditions = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object
