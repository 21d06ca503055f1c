"""The package's layout: no import cycle between modules, a small top level, a docstring per folder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "lalmeval"
TOP_LEVEL_LIMIT = 12


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _targets(node: ast.AST, module: str, path: Path, known: dict[str, Path]) -> list[str]:
    """The lalmeval modules an import statement names (a from-import of a submodule names the submodule)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    found = []
    for name in names:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in known and name != module:
            found.append(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every module → the lalmeval modules it imports: at its top, inside a function, or for type checking only."""
    known = _modules()
    graph: dict[str, set[str]] = {name: set() for name in known}

    def visit(node: ast.AST, module: str, path: Path) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                graph[module].update(_targets(child, module, path, known))
            visit(child, module, path)

    for module, path in known.items():
        visit(ast.parse(path.read_text(encoding="utf-8")), module, path)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_cycle_between_modules():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_sees_a_cycle_made_inside_functions():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_graph_counts_imports_made_inside_functions():
    # lalmeval.cli.commands imports the runner only when a run starts: the edge must still be seen
    assert "lalmeval.run.runner" in import_graph()["lalmeval.cli.commands"]


def test_the_top_level_holds_at_most_a_dozen_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_LIMIT, top


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")))
def test_every_subpackage_says_in_one_line_what_it_holds(folder):
    doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text(encoding="utf-8")))
    assert doc and doc.splitlines()[0].strip(), f"lalmeval/{folder}/__init__.py has no docstring"
