"""What the tests of Flyte's agent plugins share (``tests/compat/test_flyte_agent_plugins*.py``): the two user
messages, the scripted model's answer, and one local ``flyte.run`` of a turn."""

from __future__ import annotations

import re

import flyte

__all__ = ["FIRST", "SECOND", "reply", "run"]

FIRST, SECOND = "Hi! My name is Ada and I like Rust.", "What is my name?"


def reply(said: list[str]) -> str:
    """The scripted model: it answers the newest user message from the user messages it was given."""
    names = [m.group(1) for text in said if (m := re.search(r"My name is (\w+)", text))]
    if "What is my name" in said[-1]:
        return f"Your name is {names[-1]}." if names else "I don't know your name yet."
    return f"Nice to meet you, {names[-1]}!" if names else "Hello!"


def run(backend, task, key: str, message: str):
    """One local `flyte.run` of `task`, its raw data where `backend`'s stores live; its one output."""
    return flyte.with_runcontext(mode="local", raw_data_path=backend.raw_data_path).run(task, key, message).outputs()[0]
