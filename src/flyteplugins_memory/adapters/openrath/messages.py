"""What a session commit hands to the store and takes back from ``extract``: messages as plain
``{"role", "content"}`` dicts of str, and the ``(uri, text)`` pairs of extracted memories."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["extracted_pairs", "text_of"]


def text_of(message: Any) -> dict[str, Any]:
    """A message as a ``{"role", "content"}`` dict of str (multipart ``parts`` joined)."""
    if not isinstance(message, Mapping):
        return {"role": "unknown", "content": str(message)}
    content = message.get("content")
    if content is None and isinstance(message.get("parts"), list):
        texts = [p.get("text", "") if isinstance(p, Mapping) else str(p) for p in message["parts"]]
        content = "\n".join(t for t in texts if t)
    if not isinstance(content, str):
        content = "" if content is None else json.dumps(content, default=str)
    return {"role": str(message.get("role", "unknown")), "content": content}


def extracted_pairs(extracted: Any) -> list[tuple[str, str]]:
    """The ``(uri, text)`` pairs ``extract`` returned (a mapping, an iterable of pairs, or None)."""
    items = extracted.items() if isinstance(extracted, Mapping) else extracted
    if items is None:
        return []
    pairs = []
    for item in items:
        if not (isinstance(item, tuple | list) and len(item) == 2 and all(isinstance(v, str) for v in item)):
            raise ValueError(f"extract must give (uri, text) pairs of str, got {item!r}")
        pairs.append((item[0], item[1]))
    return pairs
