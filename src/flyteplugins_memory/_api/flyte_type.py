"""Flyte type support: a `MemoryStore` is a task input and output.

The store travels as a MessagePack payload (key, remote path, options and the inline transcript, the
same fields upstream sends). A store with unsaved changes is saved before it leaves a task, so the
receiving task sees exactly what the sender had; the receiver loads files from storage on first use.
Stores nested in dataclasses do not come through here (see `_api.payload`).
"""

from __future__ import annotations

import functools
from typing import Any

import msgpack
from flyte.types import TypeEngine, TypeTransformer, TypeTransformerFailedError
from flyteidl2.core.literals_pb2 import Binary, Literal, Scalar
from flyteidl2.core.types_pb2 import LiteralType, SimpleType, TypeStructure

from .flyte_agents import install_from_environment
from .payload import payload
from .store import MemoryStore

_TAG = "msgpack"


class MemoryStoreTransformer(TypeTransformer[MemoryStore]):
    """Converts `MemoryStore` to and from a Flyte literal."""

    def __init__(self) -> None:
        super().__init__(name="flyteplugins-memory.MemoryStore", t=MemoryStore)

    def get_literal_type(self, t: type[MemoryStore]) -> LiteralType:
        return LiteralType(simple=SimpleType.STRUCT, structure=TypeStructure(tag=self.name))

    async def to_literal(
        self, python_val: MemoryStore, python_type: type[MemoryStore], expected: LiteralType
    ) -> Literal:
        if not isinstance(python_val, MemoryStore):
            raise TypeTransformerFailedError(f"Expected a MemoryStore, got {type(python_val).__name__}")
        if python_val.has_unsaved_changes():
            await python_val.save.aio()
        # not `_serialize`, which refuses unsaved changes: an append made while the save ran travels inline
        packed = msgpack.packb(payload(python_val), default=str)
        return Literal(scalar=Scalar(binary=Binary(value=packed, tag=_TAG)))

    async def to_python_value(self, lv: Literal, expected_python_type: type[MemoryStore]) -> MemoryStore:
        binary = lv.scalar.binary
        if binary.tag != _TAG:
            raise TypeTransformerFailedError(f"Cannot read a MemoryStore from a binary tagged {binary.tag!r}")
        payload: Any = msgpack.unpackb(binary.value, strict_map_key=False)
        if not isinstance(payload, dict) or not isinstance(payload.get("key"), str):
            raise TypeTransformerFailedError("MemoryStore payload is malformed")
        return MemoryStore._deserialize(payload)


def register_memory_store_type() -> None:
    """Register `MemoryStore` with Flyte's type engine (entry point ``flyte.plugins.types``), once; then
    `install` our class into Flyte's agent stack if ``FLYTEPLUGINS_MEMORY_INSTALL`` asks for it."""
    _register_transformer()
    install_from_environment()


@functools.cache
def _register_transformer() -> None:
    TypeEngine.register(MemoryStoreTransformer())
