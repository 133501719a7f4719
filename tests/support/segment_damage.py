"""Binary search segments as a buggy or hostile writer could upload them (decisions 0155, 0161)."""

from __future__ import annotations

import json
import struct

from flyteplugins_memory._rules.search_binary import BLOCKS, MAGIC, read_header


def rebuilt(data: bytes, **change) -> bytes:
    """Binary segment `data` with blocks changed (`name=function of the block's bytes`), its header's block
    lengths made to match: what a buggy writer could upload, under the sha256 of these bytes."""
    header, at = read_header(data)
    blocks = {}
    for name, length in zip(BLOCKS, header["bytes"], strict=True):
        blocks[name], at = data[at : at + length], at + length
    blocks.update({name: how(blocks[name]) for name, how in change.items()})
    header["bytes"] = [len(blocks[name]) for name in BLOCKS]
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + b"".join(blocks[name] for name in BLOCKS)
