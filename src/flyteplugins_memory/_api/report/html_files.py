"""Pure: the Files card: the store's tree with sizes, versions, last writer, metadata, and each file's
content folded under its row (text clipped, binary shown as hex, big files not read)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .markup import card, code, folded, more, plural, size, table, text, when

if TYPE_CHECKING:
    from .build import FileRow, Snapshot
    from .contents import Preview

_COLUMNS = ["path", "size", "versions", "metadata", "last written"]
_WIDTHS = ["", "fmr-w-num", "fmr-w-num", "fmr-w-meta", "fmr-w-who"]


def files_card(s: Snapshot) -> str:
    if not s.files:
        return card("Files", "none", more("No files."))
    rows = _tree_rows(s.files)
    hidden = more(f"{plural(s.files_hidden, 'more file')} not shown.") if s.files_hidden else ""
    return card("Files", plural(len(s.files) + s.files_hidden, "file"), table(_COLUMNS, rows, _WIDTHS) + hidden)


def _tree_rows(files: Sequence[FileRow]) -> list[str]:
    """Rows of a tree: a directory row where a directory starts (with its total size), then its files."""
    totals = _directory_totals(files)
    rows: list[str] = []
    opened: list[str] = []
    for row in files:
        *dirs, name = row.path.split("/")
        shared = _shared_prefix(opened, dirs)
        for depth in range(shared, len(dirs)):
            prefix = "/".join(dirs[: depth + 1])
            rows.append(_directory_row(dirs[depth], depth, totals.get(prefix, 0)))
        opened = dirs
        rows.append(_file_row(row, name, len(dirs)))
    return rows


def _directory_totals(files: Sequence[FileRow]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for row in files:
        parts = row.path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            totals[prefix] = totals.get(prefix, 0) + (row.size or 0)
    return totals


def _shared_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    shared = 0
    while shared < min(len(a), len(b)) and a[shared] == b[shared]:
        shared += 1
    return shared


def _indent(depth: int) -> str:
    return f'style="padding-left:{8 + 18 * min(depth, 12)}px"'


def _directory_row(name: str, depth: int, total: int) -> str:
    return (
        f'<tr class="fmr-dir"><td class="fmr-mono" {_indent(depth)}>{text(name, 300)}/</td>'
        f'<td class="fmr-num">{size(total)}</td><td></td><td></td><td></td></tr>'
    )


def _file_row(row: FileRow, name: str, depth: int) -> str:
    written = f'{text(row.actor, 200)} <span class="fmr-dim fmr-time">{when(row.updated_at)}</span>'
    if row.reason:
        written += f'<div class="fmr-dim">{text(row.reason, 300)}</div>'
    shown = _name_cell(row, name)
    return (
        f'<tr><td class="fmr-mono fmr-path" {_indent(depth)} title="{text(row.path, 1000)}">{shown}</td>'
        f'<td class="fmr-num">{size(row.size)}</td><td class="fmr-num">{row.versions or "—"}</td>'
        f"<td>{_metadata(row.metadata)}</td>"
        f"<td>{written if row.actor or row.updated_at else '—'}</td></tr>"
    )


def _name_cell(row: FileRow, name: str) -> str:
    """The file's name; with its content read, a fold that opens onto it."""
    if row.preview is None:
        return text(name, 300)
    return folded(text(name, 300), _content(row.preview))


def _content(p: Preview) -> str:
    if p.unread:
        return more(text(p.unread, 200))
    if p.binary:
        head = f'<pre class="fmr-code fmr-hex">{text(p.hex, 400)}</pre>' if p.hex else ""
        return f'<p class="fmr-binary">binary content, {size(p.size)}: first bytes in hex</p>{head}'
    if not p.text:
        return more("Empty file.")
    return code(p.text, p.clipped)


def _metadata(metadata: Sequence[tuple[str, object]]) -> str:
    if not metadata:
        return ""
    chips = (
        f'<span class="fmr-kv"><span class="fmr-dim">{text(k, 100)}</span>={text(v, 200)}</span>' for k, v in metadata
    )
    return "".join(chips)
