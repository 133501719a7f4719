"""``ls --depth N``: which files a listing shows, and the folders below the depth it folds into one row.

Depth counts path parts below the listed PREFIX: ``--depth 1`` shows PREFIX's own files and one folded row
per folder in it (its file count and total size), as ``tree -L 1`` and ``du --max-depth`` do.
"""

from __future__ import annotations

from typing import Any

from . import _render


def fold(
    metas: list[dict[str, Any]], prefix: str, depth: int | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the files shown, the folders folded: ``{"path": "a/b/", "files": n, "bytes": total}``, sorted)."""
    if depth is None:
        return metas, []
    base = prefix.rstrip("/").count("/") + 1 if prefix.strip("/") else 0
    shown: list[dict[str, Any]] = []
    folded: dict[str, dict[str, Any]] = {}
    for meta in metas:
        parts = meta["path"].split("/")
        if len(parts) - base <= depth:
            shown.append(meta)
            continue
        folder = "/".join(parts[: base + depth]) + "/"
        entry = folded.setdefault(folder, {"path": folder, "files": 0, "bytes": 0})
        entry["files"] += 1
        entry["bytes"] += meta.get("bytes") or 0
    return shown, [folded[name] for name in sorted(folded)]


def folded_row(entry: dict[str, Any]) -> tuple[str, ...]:
    """A folded folder's table row: its path, total size, and how many files it holds."""
    inside = f"({_render.count(entry['files'], 'file')} below --depth)"
    return entry["path"], _render.human_size(entry["bytes"]), inside
