"""Framework ids as path segments: one safe segment per id, distinct ids to distinct segments."""

from __future__ import annotations

import base64
import hashlib
import re

from .. import InvalidArgument

_PLAIN_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


def encode_id(value: str) -> str:
    """A plain lowercase id as it is; any other as ``_`` + base32, or ``__`` + 128 bits of sha256 when
    long, so an id with ``/``, ``..``, ``%``, capitals or control characters never leaves its directory
    or meets another id (plain ids never start with ``_``)."""
    if not isinstance(value, str):
        raise InvalidArgument(f"ids are strings, got {type(value).__name__}")
    if _PLAIN_ID.fullmatch(value):
        return value
    raw = value.encode("utf-8", "surrogatepass")
    encoded = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
    # a whole path (several ids) must fit one file name in the journal's sidecars: 255 bytes
    return "_" + encoded if len(encoded) <= 39 else "__" + hashlib.sha256(raw).hexdigest()[:32]
