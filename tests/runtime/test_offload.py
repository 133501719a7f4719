"""CPU work off the loop: while a large checkpoint is parsed or a large write hashed, the package's loop
keeps running other coroutines; small inputs stay inline. Measured in ticks of a coroutine that runs
beside the work on the package's loop, never in wall time."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from flyteplugins_memory._base.syncify import run_sync
from flyteplugins_memory._rules.journal_objects import Checkpoint, FileEntry, encode, parse
from flyteplugins_memory._rules.offload import OFF_LOOP_BYTES, parse_off_loop, sha256_off_loop
from flyteplugins_memory._rules.writes import ChangeOptions, plan_write, plan_write_off_loop
from flyteplugins_memory.errors import CorruptStore, UnsafeStoreContent

#: Ticks that prove the loop ran beside the work (a thread hop alone gives one or two).
MIN_TICKS = 20
OPTIONS = ChangeOptions("agent", "", None, keep_versions=False, audit=True)


async def _ticks_during(work: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    """How often a sibling coroutine got the loop while `work` ran, and what `work` returned."""
    ticks, done = 0, False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    sibling = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)  # the ticker is running
    before = ticks
    result = await work()
    during = ticks - before
    done = True
    await sibling
    return during, result


def _on_our_loop(work: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    return run_sync(_ticks_during, work)


def _big_checkpoint(files: int = 40_000) -> bytes:
    records = {
        f"notes/{i:06d}.md": FileEntry(sha256=hashlib.sha256(b"%d" % i).hexdigest(), bytes=i) for i in range(files)
    }
    return encode(Checkpoint(seq=7, files=records))


def test_a_large_checkpoint_is_parsed_while_the_loop_keeps_ticking():
    data = _big_checkpoint()
    assert len(data) > 20 * OFF_LOOP_BYTES

    async def off() -> Checkpoint:
        return await parse_off_loop(Checkpoint, data, "checkpoints/7.json")

    async def inline() -> Checkpoint:
        return parse(Checkpoint, data, "checkpoints/7.json")

    ticks, parsed = _on_our_loop(off)
    assert ticks >= MIN_TICKS
    assert isinstance(parsed, Checkpoint) and parsed.seq == 7 and len(parsed.files) == 40_000
    assert parsed == parse(Checkpoint, data, "checkpoints/7.json")
    # the measure can tell: parsed on the loop itself, the sibling never runs
    assert _on_our_loop(inline)[0] == 0


def test_small_objects_are_parsed_inline():
    data = encode(Checkpoint(seq=1))

    async def off() -> Checkpoint:
        return await parse_off_loop(Checkpoint, data, "checkpoints/1.json")

    ticks, parsed = _on_our_loop(off)
    assert ticks == 0
    assert parsed.seq == 1


@pytest.mark.parametrize("size", [100, 10 * OFF_LOOP_BYTES])
def test_parse_off_loop_raises_the_same_typed_errors(size):
    bad = b'{"seq": "x", "pad": "' + b"p" * size + b'"}'
    with pytest.raises(CorruptStore, match=r"checkpoints/3\.json"):
        asyncio.run(parse_off_loop(Checkpoint, bad, "checkpoints/3.json"))
    hostile = b'{"seq": 3, "files": {"../escape": {"sha256": "' + b"0" * 64 + b'", "bytes": 1}}}' + b" " * size
    with pytest.raises(UnsafeStoreContent):
        asyncio.run(parse_off_loop(Checkpoint, hostile, "checkpoints/3.json"))


def test_a_large_write_is_encoded_and_hashed_while_the_loop_keeps_ticking():
    content = "é" + "x" * (32 * 1024 * 1024)

    async def off() -> Any:
        return await plan_write_off_loop(None, "big.txt", content, OPTIONS)

    async def inline() -> Any:
        return plan_write(None, "big.txt", content, OPTIONS)

    ticks, plan = _on_our_loop(off)
    assert ticks >= MIN_TICKS
    assert plan.meta is not None and plan.record is not None and plan.event is not None
    expected = content.encode("utf-8")
    assert plan.data == expected
    assert plan.meta.sha256 == hashlib.sha256(expected).hexdigest()
    assert plan.meta.bytes == len(expected)
    assert plan.record.sha256 == plan.meta.sha256
    assert plan.event["op"] == "create" and plan.event["new_sha"] == plan.meta.sha256
    assert _on_our_loop(inline)[0] == 0


def test_small_writes_are_planned_inline_and_alike():
    async def off() -> Any:
        return await plan_write_off_loop(None, "small.txt", "small", OPTIONS)

    ticks, plan = _on_our_loop(off)
    assert ticks == 0
    same = plan_write(None, "small.txt", "small", OPTIONS)
    assert plan.meta is not None and same.meta is not None
    assert (plan.data, plan.meta.sha256, plan.meta.bytes) == (same.data, same.meta.sha256, same.meta.bytes)


def test_a_large_payload_is_hashed_while_the_loop_keeps_ticking():
    data = b"y" * (64 * 1024 * 1024)

    async def off() -> str:
        return await sha256_off_loop(data)

    ticks, digest = _on_our_loop(off)
    assert ticks >= MIN_TICKS
    assert digest == hashlib.sha256(data).hexdigest()
