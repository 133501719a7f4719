"""What `FlyteStore` checks before a batch runs: every op's namespace, key, value, ttl, filter and window
(`checked_ops`), and LangGraph's own namespace checks in `BaseStore`'s methods, whose refusals are raised as
ours (`converting_namespace_errors`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, ListNamespacesOp, Op, PutOp, SearchOp

from .layout import (
    InvalidNamespace,
    InvalidStoreInput,
    check_filter,
    check_key,
    check_namespace,
    check_ttl,
    check_value,
)

__all__ = ["checked_ops", "converting_namespace_errors"]


def converting_namespace_errors(name: str) -> Any:
    """`BaseStore`'s method `name`, its namespace refusals (LangGraph's own checks, before the batch) raised as
    `InvalidNamespace`: LangGraph's `InvalidNamespaceError` and our `InvalidStoreInput` at once."""
    method: Callable[..., Any] = getattr(BaseStore, name)
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def acall(self: BaseStore, *args: Any, **kwargs: Any) -> Any:
            try:
                return await method(self, *args, **kwargs)
            except InvalidNamespace:
                raise
            except InvalidNamespaceError as exc:
                raise InvalidNamespace(str(exc)) from exc

        return acall

    @functools.wraps(method)
    def call(self: BaseStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except InvalidNamespace:
            raise
        except InvalidNamespaceError as exc:
            raise InvalidNamespace(str(exc)) from exc

    return call


def checked_ops(ops: list[Op]) -> dict[tuple[tuple[str, ...], str], PutOp]:
    """Check every op before anything runs; the puts, the last one per item."""
    puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
    for op in ops:
        if isinstance(op, GetOp):
            check_namespace(op.namespace)
            check_key(op.key)
        elif isinstance(op, SearchOp):
            check_namespace(op.namespace_prefix, empty_ok=True)
            check_filter(op.filter)
            _check_window(op.limit, op.offset)
            if op.query is not None and not isinstance(op.query, str):
                raise InvalidStoreInput(f"query must be a str or None, got {op.query!r}")
        elif isinstance(op, ListNamespacesOp):
            _check_listing(op)
        elif isinstance(op, PutOp):
            namespace, key = check_namespace(op.namespace), check_key(op.key)
            if op.value is not None:
                check_value(op.value)
                check_ttl(op.ttl)
            puts[(namespace, key)] = op
        else:
            raise InvalidStoreInput(f"unknown op {type(op).__name__}: not a GetOp, SearchOp, PutOp or ListNamespacesOp")
    return puts


def _check_listing(op: ListNamespacesOp) -> None:
    for condition in op.match_conditions or ():
        if condition.match_type not in ("prefix", "suffix"):
            raise InvalidStoreInput(f"match_type is 'prefix' or 'suffix', got {condition.match_type!r}")
        check_namespace(condition.path, empty_ok=True)
    if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 1):
        raise InvalidStoreInput(f"max_depth is None or a positive int, got {op.max_depth!r}")
    _check_window(op.limit, op.offset)


def _check_window(limit: object, offset: object) -> None:
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidStoreInput(f"{name} must be an int >= 0, got {value!r}")
