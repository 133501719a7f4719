"""The package's layer order: no module imports one from a layer above its own, and the outer rings use
only the public API.

The layers are the package's subpackages, read from the bottom up as README's "Layout of the code" tells
them: the foundation (`errors`, `_base`), rules without I/O (`_rules`), the storage seam (`storage`), the
journal's reads and writes (`_rules.journal_objects`), the handle (`_handle`), and the public facade (`_api` and the
package's `__init__`); then the conformance kit, the framework adapters and the command line. Every file of
the package is checked, at any depth. Imports made only for type checkers (``if TYPE_CHECKING:``) do not
count: they create no dependency at run time.
"""

from __future__ import annotations

import ast
import pathlib

import flyteplugins_memory

PACKAGE = pathlib.Path(flyteplugins_memory.__file__).parent
NAME = "flyteplugins_memory"

#: bottom first; a module may import modules of its own layer or below (by the package's top-level names)
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"errors", "_base"}),
    ("rules without I/O", {"_rules"}),
    ("storage seam", {"storage"}),
    ("journal reads and writes", {"_journal"}),
    ("the handle", {"_handle"}),
    ("facade", {"_api", ""}),  # "": the package itself (its __init__)
    ("conformance kit", {"testing"}),
    ("framework adapters", {"adapters"}),
    ("command line", {"cli"}),
]
#: what the outer rings may import of the package besides themselves: its public modules
PUBLIC = {"", "errors", "storage", "testing"}
OUTER = {"adapters", "cli"}


def _layer_of() -> dict[str, int]:
    return {name: index for index, (_, names) in enumerate(LAYERS) for name in names}


def _module(path: pathlib.Path) -> tuple[str, bool]:
    """The dotted name of a file inside the package ("" for its __init__), and whether it is a package."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _files() -> dict[str, pathlib.Path]:
    return {_module(path)[0]: path for path in sorted(PACKAGE.rglob("*.py"))}


def _runtime_imports(path: pathlib.Path) -> set[str]:
    """The package modules `path` imports at run time (anywhere in it, functions included), dotted
    from the package ("" for the package itself)."""
    module, is_package = _module(path)
    here = module.split(".") if module else []
    if not is_package:
        here = here[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    imported: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            target = ".".join(base)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == NAME:
            target = (node.module or "").partition(".")[2]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == NAME:
                    imported.add(alias.name.partition(".")[2])
            continue
        else:
            continue
        for alias in node.names:  # `from . import x`: x may be a module, else a name of `target`
            sub = f"{target}.{alias.name}" if target else alias.name
            is_module = (PACKAGE / sub.replace(".", "/")).with_suffix(".py").exists()
            imported.add(sub if is_module or (PACKAGE / sub.replace(".", "/") / "__init__.py").exists() else target)
    return imported


def _top(module: str) -> str:
    return module.split(".", maxsplit=1)[0]


def test_every_file_has_a_layer():
    layer_of = _layer_of()
    unplaced = sorted(m for m in _files() if _top(m) not in layer_of)
    assert not unplaced, f"place these in tests/api/test_layers.py LAYERS (or move them into a layer): {unplaced}"


def test_no_module_imports_one_above_it():
    layer_of = _layer_of()
    violations = [
        f"{name or NAME} ({LAYERS[layer_of[_top(name)]][0]}) imports {imported or NAME} "
        f"({LAYERS[layer_of[_top(imported)]][0]})"
        for name, path in _files().items()
        for imported in sorted(_runtime_imports(path))
        if _top(imported) in layer_of and layer_of[_top(imported)] > layer_of[_top(name)]
    ]
    assert not violations, "\n".join(violations)


def test_adapters_and_the_cli_use_only_the_public_api():
    violations = [
        f"{name} imports {imported}"
        for name, path in _files().items()
        if _top(name) in OUTER
        for imported in sorted(_runtime_imports(path))
        if _top(imported) != _top(name) and _top(imported) not in PUBLIC
    ]
    assert not violations, "\n".join(violations)


def test_every_module_says_what_it_is_for():
    bare = [name or NAME for name, path in _files().items() if ast.get_docstring(ast.parse(path.read_text())) is None]
    assert not bare, f"give these modules a docstring: {bare}"


def test_the_check_reads_the_real_imports():
    """The check sees imports at all (a broken parser would pass everything)."""
    assert "_rules.journal_objects" in _runtime_imports(PACKAGE / "_journal" / "commit.py")
    assert "_api.store" not in _runtime_imports(PACKAGE / "_api" / "payload.py")  # for type checkers only
    assert "" in _runtime_imports(PACKAGE / "cli" / "_files.py")  # `from flyteplugins_memory import ...`
    assert "_api.surface" in _runtime_imports(PACKAGE / "__init__.py")  # loaded on first use (decision 0164)
    assert {"_api.store", "errors"} <= _runtime_imports(PACKAGE / "_api" / "surface.py")


def test_no_import_cycle():
    """No module needs, at run time and through any chain, a module that needs it back (a cycle makes the
    import order matter and hides a layer inside a layer): Tarjan's strongly connected components."""
    files = _files()
    graph = {m: sorted(i for i in _runtime_imports(p) if i in files and i != m) for m, p in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member or NAME)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not cycles, cycles
