"""Upstream call shapes that our one sync/``.aio`` convention would otherwise break.

Upstream's ``audit_tail()``, ``flush_messages()`` and ``MemoryStore.exists(key=...)`` return coroutines,
so code written for it says ``await store.audit_tail()``. Ours run synchronously and return the value,
as every I/O method here does. Called from code that runs inside an event loop (the only place such an
``await`` can appear), the value they return can also be awaited and gives itself back, so both shapes
work; from plain sync code they return the plain value. ``f.aio(...)`` is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, Concatenate, Generic, NoReturn, ParamSpec, TypeVar, overload

from .syncify import SyncCallable, SyncClassMethod, SyncMethod

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


async def _value(value: Any) -> Any:
    return value


class AwaitableList(list):  # type: ignore[type-arg]
    """A list that ``await`` also accepts (for ``await store.audit_tail()``)."""

    def __await__(self) -> Generator[Any, None, AwaitableList]:
        return _value(self).__await__()


class AwaitableBool:
    """A truth value that ``await`` also accepts (for ``await MemoryStore.exists(key=...)``)."""

    __slots__ = ("value",)

    def __init__(self, value: bool):
        self.value = bool(value)

    def __bool__(self) -> bool:
        return self.value

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, AwaitableBool) else other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)

    def __await__(self) -> Generator[Any, None, bool]:
        return _value(self.value).__await__()


class AwaitableNone:
    """Nothing, which ``await`` also accepts (for ``await store.flush_messages()``)."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "None"

    def __await__(self) -> Generator[Any, None, None]:
        return _value(None).__await__()


def awaitable(value: Any) -> Any:
    """`value`, made awaitable when the caller runs inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return value
    if value is None:
        return AwaitableNone()
    if isinstance(value, bool):
        return AwaitableBool(value)
    if isinstance(value, list):
        return AwaitableList(value)
    return value


class AwaitableCall(Generic[P, R]):
    """A `SyncCallable` whose sync result is passed through `awaitable`; ``.aio`` is the original's.

    Typed as returning the plain value: the awaitable stand-ins exist for upstream's call shapes only.
    """

    def __init__(self, call: SyncCallable[P, R]):
        self._call = call
        self.__doc__ = getattr(call, "__doc__", None)
        self.__wrapped__ = call

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = awaitable(self._call(*args, **kwargs))
        return result

    def aio(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        return self._call.aio(*args, **kwargs)


class upstream_awaitable(Generic[S, P, R]):  # noqa: N801 - used as a decorator, like syncify
    """Descriptor over a `syncify`-wrapped method: binds it, then wraps the result as `AwaitableCall`."""

    def __init__(self, method: SyncMethod[S, P, R]):
        self._method = method
        self.__doc__ = getattr(method, "__doc__", None)

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> AwaitableCall[Concatenate[S, P], R]: ...

    @overload
    def __get__(self, obj: S, owner: type[Any] | None = None) -> AwaitableCall[P, R]: ...

    def __get__(self, obj: S | None, owner: type[Any] | None = None) -> Any:
        bound: Any = self._method.__get__(obj, owner)
        return AwaitableCall(bound)


class ExistsAccessor(Generic[P]):
    """``store.exists(path)`` on a handle, ``MemoryStore.exists(key=...)`` on the class; both with ``.aio``
    (the class form can also be awaited from async code, as upstream's coroutine was).

    Built from the class form (a `syncify` classmethod); the handle form is the handle's ``_path_exists``.
    """

    def __init__(self, key_exists: SyncClassMethod[P, bool]):
        self._key_exists = key_exists
        self.__doc__ = self.__class__.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> AwaitableCall[P, bool]: ...

    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None) -> SyncCallable[[str], bool]: ...

    def __get__(self, obj: object | None, owner: type[Any] | None = None) -> Any:
        if obj is None:
            return AwaitableCall(self._key_exists.__get__(None, owner))
        path_exists: SyncCallable[[str], bool] = getattr(obj, "_path_exists")  # noqa: B009 - a mixin's method
        return path_exists


def unavailable() -> Any:
    """An `_Unavailable` attribute (typed as anything: it stands where upstream declares a method)."""
    return _Unavailable()


class _Unavailable:
    """An upstream private helper that would read or write the working root behind the journal's back
    (its own audit append, sidecar paths, whole-directory download): not reachable on our class."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> NoReturn:
        raise AttributeError(f"MemoryStore.{self.name} is internal to upstream's implementation; not available here")
