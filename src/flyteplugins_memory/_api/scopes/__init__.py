"""Scopes: `store.scope(prefix)`, a view of one handle confined to a directory (guide:
docs/guide/scopes.md): the view (`view`), its history reads (`history`) and staged memories (`staged`)."""

from __future__ import annotations

from .view import ScopedStore

__all__ = ["ScopedStore"]
