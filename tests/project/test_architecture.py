"""No import cycles between slurm_defrag's packages (docs/architecture.md).

lint-imports checks the declared layers; this test catches any cycle at all between
top-level packages and modules, including between two that no contract names yet, and
prints the modules that close it. TYPE_CHECKING imports count: a cycle kept only for
types is still a knot a reader has to untie.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import grimp


def _package_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], tuple[str, str]]]:
    # No cache: grimp keeps one mtime file per package for all its data files, so after
    # lint-imports (include_external_packages = true) has seen an edit, a cached build
    # here would take its stale imports for the edited modules as current.
    graph = grimp.build_graph("slurm_defrag", include_external_packages=False, cache_dir=None)
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


# -- docs/architecture.md's "What imports what" is the code's graph --------------------

_DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
_OMITTED = {"errors", "domain", "__main__"}
"""What the doc's table leaves out: nearly everything imports errors and domain; the
``python -m`` entry point imports only the CLI."""


def _documented_graph() -> dict[str, set[str]]:
    """The table under "## What imports what": ``a -> b, c (why), d`` with continuation
    lines; parentheses are comments."""
    text = _DOC.read_text()
    block = text.split("## What imports what", 1)[1].split("```", 2)[1]
    edges: dict[str, set[str]] = defaultdict(set)
    current = None
    for line in block.splitlines():
        if not line.strip():
            continue
        if "->" in line:
            current, _, line = (part.strip() for part in line.partition("->"))
            edges[current]
        assert current is not None, f"docs/architecture.md: {line!r} before any 'a ->'"
        line = re.sub(r"\([^)]*\)?", "", line)  # a comment, possibly over two lines
        line = re.sub(r"^[^(]*\)", "", line)
        for name in line.split(","):
            name = name.strip()
            if name and re.fullmatch(r"[a-z_]+", name):
                edges[current].add(name)
    return edges


def test_the_documented_import_table_is_the_codes() -> None:
    """Every edge between top-level packages/modules is in the doc's table and every edge
    in the table is in the code: the doc cannot drift (issue #43)."""
    code, witness = _package_graph()
    actual = {
        (a, b)
        for a, targets in code.items()
        for b in targets
        if a not in _OMITTED and b not in _OMITTED
    }
    documented = {(a, b) for a, targets in _documented_graph().items() for b in targets}
    missing = sorted(actual - documented)
    stale = sorted(documented - actual)
    lines = [f"  {a} -> {b}   (e.g. {' imports '.join(witness[a, b])})" for a, b in missing]
    lines += [f"  {a} -> {b}   (in the doc, not in the code)" for a, b in stale]
    assert not lines, "docs/architecture.md, 'What imports what', differs:\n" + "\n".join(lines)


def test_every_top_level_module_sits_in_a_layer() -> None:
    """A module the layers contract does not name is unconstrained: name each (issue #43)."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    layered = {
        name.strip()
        for contract in config["contracts"]
        if contract["type"] == "layers"
        for layer in contract["layers"]
        for name in layer.split("|")
    }
    package = root / "src" / "slurm_defrag"
    top = {
        p.stem if p.suffix == ".py" else p.name
        for p in package.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__")
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert not sorted(top - layered), f"not in the layers contract: {sorted(top - layered)}"
