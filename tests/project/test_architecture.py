"""No import cycles between slurm_defrag's packages (docs/architecture.md).

lint-imports checks the declared layers; this test catches any cycle at all between
top-level packages and modules, including between two that no contract names yet, and
prints the modules that close it. TYPE_CHECKING imports count: a cycle kept only for
types is still a knot a reader has to untie.
"""

from __future__ import annotations

from collections import defaultdict

import grimp


def _package_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], tuple[str, str]]]:
    graph = grimp.build_graph("slurm_defrag", include_external_packages=False)
    edges: dict[str, set[str]] = defaultdict(set)
    witness: dict[tuple[str, str], tuple[str, str]] = {}
    for module in graph.modules:
        parts = module.split(".")
        if len(parts) < 2:
            continue  # the root package (slurm_defrag.__version__) sits below everything
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")
            if len(target) < 2 or target[1] == parts[1]:
                continue
            edges[parts[1]].add(target[1])
            witness.setdefault((parts[1], target[1]), (module, imported))
    return edges, witness


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_between_packages() -> None:
    edges, witness = _package_graph()
    problems = []
    for component in _cycles(edges):
        inside = set(component)
        links = [
            f"{a} -> {b} ({' imports '.join(witness[a, b])})"
            for a in component
            for b in sorted(edges[a] & inside)
        ]
        problems.append("cycle between " + ", ".join(component) + ":\n  " + "\n  ".join(links))
    assert not problems, "\n".join(problems)


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
