"""The package's layer order: no module imports one from a layer above its own.

Read from the bottom up, the layers are how README's "Layout of the code" tells the package: rules
without I/O, the storage seam, the journal's reads and writes, the handle, and the public facade. Every
module must be placed here, so a new one is placed on purpose. Imports made only for type checkers
(``if TYPE_CHECKING:``) do not count: they create no dependency at run time.
"""

from __future__ import annotations

import ast
import pathlib

import flyteplugins_memory

PACKAGE = pathlib.Path(flyteplugins_memory.__file__).parent

#: bottom first; a module may import modules of its own layer or below
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"_errors", "_retry", "_syncify", "_compat", "_version"}),
    (
        "rules without I/O",
        {
            "_paths",
            "_codecs",
            "_layout",
            "_location",
            "_journal_location",
            "_writes",
            "_limits",
            "_transcript",
            "_messages",
            "_journal",
            "_markers",
            "_merge",
            "_inventory",
            "_admission",
            "_offload",
            "_format",
            "_commit_info",
            "_arguments",
            "_metadata",
            "_entries",
            "_parts",
            "_index",
            "_state",
            "_record_codec",
            "_search_text",
            "_search_index",
            "_read_only",
            "_retention_policy",
            "_data_map",
            "_ttl",
            "_scope_paths",
            "_proposals",
            "_purge_count",
            "_fold",
            "_diff",
            "_archive",
            "_progress",
        },
    ),
    (
        "storage seam",
        {
            "_backends",
            "_conditional",
            "_contract",
            "_fs_options",
            "_fsio",
            "_workdir",
            "_storage",
            "_s3_writes",
            "_archive_spool",
            "_archive_file",
        },
    ),
    (
        "journal reads and writes",
        {
            "_retention",
            "_open",
            "_legacy",
            "_relocate",
            "_preserve",
            "_contents",
            "_export_state",
            "_gc",
            "_purge",
            "_redact",
            "_purge_aftermath",
            "_audit",
            "_versions",
            "_commit",
            "_commit_log",
            "_inplace",
            "_checkpoints",
            "_keys",
            "_store_deletion",
            "_generations",
            "_search_store",
            "_history",
            "_snapshot_retention",
            "_expiry_pending",
        },
    ),
    ("the handle", {"_mirror", "_view", "_special_commits", "_session", "_search_view"}),
    (
        "facade",
        {
            "_keyed",
            "_reading",
            "_binary",
            "_bulk_delete",
            "_maintenance",
            "_message_purge",
            "_report",
            "_report_html",
            "_payload",
            "_metadata_update",
            "_transcript_reads",
            "_compaction",
            "_records",
            "_conversations",
            "_search",
            "_read_only_settings",
            "_retention_settings",
            "_expiry",
            "_scope_history",
            "_scopes",
            "_staged",
            "_scope_staged",
            "_history_api",
            "_time_travel",
            "_export",
            "_archive_forget",
            "_import_archive",
            "_store",
            "_flyte_type",
            "__init__",
        },
    ),
    ("conformance kit", {"testing"}),
    ("framework adapters (public API only)", {"adapters"}),
    ("command line", {"cli"}),
]


def _layer_of() -> dict[str, int]:
    return {name: index for index, (_, names) in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, pathlib.Path]:
    """Every module of the package by its name in the layer table (subpackages count as one module)."""
    found = {path.stem: path for path in PACKAGE.glob("*.py")}
    for init in PACKAGE.glob("*/__init__.py"):
        found[init.parent.name] = init
    return found


def _runtime_imports(path: pathlib.Path) -> set[str]:
    """The package modules `path` imports at run time (anywhere in it, functions included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    depth = 2 if path.name == "__init__.py" and path.parent != PACKAGE else 1
    imported: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or id(node) in type_only or node.level != depth:
            continue
        if node.module:
            imported.add(node.module.split(".")[0])
        else:
            imported.update(alias.name for alias in node.names)
    return imported


def test_every_module_has_a_layer():
    unplaced = sorted(set(_modules()) - set(_layer_of()))
    assert not unplaced, f"place these modules in tests/test_layers.py LAYERS: {unplaced}"


def test_no_module_imports_one_above_it():
    layer_of = _layer_of()
    violations = [
        f"{name} ({LAYERS[layer_of[name]][0]}) imports {imported} ({LAYERS[layer_of[imported]][0]})"
        for name, path in sorted(_modules().items())
        for imported in sorted(_runtime_imports(path))
        if imported in layer_of and layer_of[imported] > layer_of.get(name, len(LAYERS))
    ]
    assert not violations, "\n".join(violations)


def test_the_table_reads_the_real_imports():
    """The check sees imports at all (a broken parser would pass everything)."""
    assert "_journal" in _runtime_imports(PACKAGE / "_commit.py")
    assert "_store" not in _runtime_imports(PACKAGE / "_payload.py")  # imported for type checkers only
