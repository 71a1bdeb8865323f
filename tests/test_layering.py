"""No import circles inside trainfit (issue 38, part 3).

The graph has an edge ``m -> d`` for every ``import d`` / ``from d import name``
anywhere in module ``m`` (top level, inside functions, under ``if`` or ``try``);
``from P import name`` is an edge to ``P.name`` when that is a module, else to
``P``.  Every strongly connected component of more than one module is a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_files(src: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``src``, by dotted name."""
    mods: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _targets(module: str, is_init: bool, node: ast.AST, mods: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        # The package a relative import starts from: an __init__ is its own
        # package; any other module's package is its parent.
        package = module.split(".") if is_init else module.split(".")[:-1]
        keep = len(package) - (node.level - 1)
        if keep <= 0:
            return []
        base = ".".join(package[:keep] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in mods else base)
    return out


def import_edges(src: Path, package: str) -> dict[str, dict[str, list[int]]]:
    """``{module: {imported module: [line numbers]}}`` over all imports in each file."""
    mods = module_files(src, package)
    graph: dict[str, dict[str, list[int]]] = {}
    for module, path in mods.items():
        is_init = path.name == "__init__.py"
        edges: dict[str, list[int]] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for dep in _targets(module, is_init, node, mods):
                    if dep in mods and dep != module:
                        edges.setdefault(dep, []).append(node.lineno)
        graph[module] = edges
    return graph


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    return {m: set(d) for m, d in import_edges(src, package).items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return sorted(found)


def _describe(comp: list[str], edges: dict[str, dict[str, list[int]]]) -> str:
    inside = set(comp)
    links = [
        f"    {m} -> {d} (line {', '.join(map(str, lines))})"
        for m in comp
        for d, lines in sorted((d, sorted(set(ls))) for d, ls in edges[m].items())
        if d in inside
    ]
    return " <-> ".join(comp) + "\n" + "\n".join(links)


def test_trainfit_has_no_import_circles():
    edges = import_edges(SRC, "trainfit")
    assert len(edges) > 50  # the walk found the package
    found = circles({m: set(d) for m, d in edges.items()})
    assert not found, "import circles in trainfit:\n" + "\n".join(_describe(c, edges) for c in found)


def test_circle_detector_finds_a_planted_circle(tmp_path):
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import a\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n    return b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    # level 2 from toy.sub.b is the package toy; 'a' is a module there
    (pkg / "sub" / "b.py").write_text("import os\nif True:\n    from .. import a\n")
    (pkg / "c.py").write_text("from toy.sub.b import thing\n")
    graph = import_graph(tmp_path, "toy")
    assert graph["toy"] == {"toy.a"}
    assert graph["toy.a"] == {"toy.sub.b"}
    assert graph["toy.sub.b"] == {"toy.a"}
    assert graph["toy.c"] == {"toy.sub.b"}
    assert circles(graph) == [["toy.a", "toy.sub.b"]]
    (pkg / "sub" / "b.py").write_text("import os\n")
    assert circles(import_graph(tmp_path, "toy")) == []
