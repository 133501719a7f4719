"""``--where KEY=VALUE`` (repeatable): a metadata filter for listings, parsed as `MemoryStore.list_paths`
takes it. A value is read as a JSON scalar when it is one (``n=1`` is the int 1, ``done=true`` the bool,
``label="3"`` the string "3"), else as the plain string (``user=alice``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import rich_click as click

F = TypeVar("F", bound=Callable[..., Any])


def where_option(func: F) -> F:
    """``--where``, handed to `func` as one dict (keyword ``where``; empty: no filter)."""
    return click.option(
        "--where",
        "where",
        multiple=True,
        callback=parse_pairs,
        metavar="KEY=VALUE",
        help="Only files whose metadata has KEY equal to VALUE (a JSON scalar, else a string); repeatable.",
    )(func)


def parse_pairs(ctx: click.Context, param: click.Parameter, pairs: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` options (``--where``, ``write --metadata``) as one dict, values by `parse_value`."""
    where: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", ctx, param)
        if key in where:
            raise click.BadParameter(f"{key!r} given twice", ctx, param)
        where[key] = parse_value(raw)
    return where


def parse_value(raw: str) -> str | int | float | bool:
    """`raw` as a JSON scalar (not null), else as it is."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, str | int | float | bool) else raw
