"""What a type checker sees of the public API (checked by tests/api/test_typing.py with pyright; never run).

Each ``reveal_type`` line ends with ``# expect: <type>``; each ``# pyright: ignore[...]`` marks a call
that must be an error (an ignore that suppresses nothing is itself reported, so a missed error fails).
"""

# pyright: reportUnnecessaryTypeIgnoreComment=true

from typing import reveal_type

from flyteplugins_memory import MemoryReader, MemoryStore, ScopedStore, StoreAt, UserMessage


def sync_api(store: MemoryStore) -> None:
    reveal_type(MemoryStore.create(key="k"))  # expect: MemoryStore
    reveal_type(MemoryStore.get_or_create(key="k", org="o"))  # expect: MemoryStore
    reveal_type(MemoryStore.exists(key="k"))  # expect: bool
    reveal_type(store.write_text("a.md", "text"))  # expect: MemoryMeta
    reveal_type(store.write_json("a.json", {"x": 1}, actor="me"))  # expect: MemoryMeta
    reveal_type(store.read_text("a.md"))  # expect: str
    reveal_type(store.exists("a.md"))  # expect: bool
    reveal_type(store.list_paths())  # expect: list[str]
    reveal_type(store.get_meta("a.md"))  # expect: MemoryMeta | None
    reveal_type(store.delete("a.md"))  # expect: bool
    reveal_type(store.audit_tail(5))  # expect: list[dict[str, Any]]
    reveal_type(store.flush_messages())  # expect: None
    reveal_type(store.refresh())  # expect: list[str]
    reveal_type(store.gc())  # expect: GcResult
    store.write_text(1, "text")  # pyright: ignore[reportArgumentType]
    store.write_text("a.md")  # pyright: ignore[reportCallIssue]
    store.write_text("a.md", "text", author="me")  # pyright: ignore[reportCallIssue]
    store.exists(3)  # pyright: ignore[reportArgumentType]
    MemoryStore.create(keyy="k")  # pyright: ignore[reportCallIssue]
    reveal_type(MemoryStore.get_or_create(key="k", validate_messages=True))  # expect: MemoryStore
    reveal_type(store.messages_tail(3))  # expect: list[dict[str, Any]]
    reveal_type(store.messages_since(0))  # expect: list[dict[str, Any]]
    store.append(UserMessage(content="hi"))
    store.messages_tail("3")  # pyright: ignore[reportArgumentType]


async def async_api(store: MemoryStore) -> None:
    reveal_type(await MemoryStore.create.aio(key="k"))  # expect: MemoryStore
    reveal_type(await MemoryStore.get_or_create.aio(key="k"))  # expect: MemoryStore
    reveal_type(await MemoryStore.exists.aio(key="k"))  # expect: bool
    reveal_type(await store.write_text.aio("a.md", "text"))  # expect: MemoryMeta
    reveal_type(await store.read_text.aio("a.md", default=""))  # expect: str
    reveal_type(await store.exists.aio("a.md"))  # expect: bool
    reveal_type(await store.audit_tail.aio(5))  # expect: list[dict[str, Any]]
    reveal_type(await store.flush_messages.aio())  # expect: None
    reveal_type(await store.prefetch.aio())  # expect: int
    await store.write_text.aio("a.md", b"bytes")  # pyright: ignore[reportArgumentType]
    await store.exists.aio()  # pyright: ignore[reportCallIssue]
    reveal_type(await store.messages_since.aio(2))  # expect: list[dict[str, Any]]


async def one_read_protocol(store: MemoryStore, scope: ScopedStore, past: StoreAt) -> None:
    # a handle, a scope and the store as of a commit are each a MemoryReader
    readers: list[MemoryReader] = [store, scope, past]
    reader = readers[0]
    reveal_type(reader.read_text("a.md"))  # expect: str
    reveal_type(reader.read_bytes("a.bin"))  # expect: bytes | None
    reveal_type(reader.open_bytes("a.bin"))  # expect: ByteStream
    reveal_type(reader.list_paths())  # expect: list[str]
    reveal_type(reader.get_meta("a.md"))  # expect: MemoryMeta | None
    reveal_type(reader.current_sha("a.md"))  # expect: str
    reveal_type(await reader.read_text.aio("a.md"))  # expect: str
    reveal_type(await reader.list_paths.aio("notes"))  # expect: list[str]
    readers.append("a.md")  # pyright: ignore[reportArgumentType]
