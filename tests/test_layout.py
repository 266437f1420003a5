"""The package layout holds: no import cycle among the judge's modules, and each audience's
subpackage depends only on what it may.

- ``judge/*.py`` are the grading core; ``judge/box/`` is the sandbox
  client the core grades through. Neither imports ``judge.service`` or ``judge.authoring``
  (``judge/cli.py`` excepted: it is the shell that dispatches to both).
- ``judge/service/`` (the API) and ``judge/authoring/`` (an author's tools) both use the core and
  the box, never each other.
- ``sandbox/`` runs untrusted code and imports nothing of the judge.

Every import counts, wherever it is written (module level, inside a function, under
``TYPE_CHECKING``): an import inside a function is still a dependency, only a later one. The
graph is read from the source (``ast``), never by importing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("judge", "sandbox")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# Files that are data, not modules: judge new's example exercise, written out by the scaffold.
NOT_MODULES = (ROOT / "judge" / "authoring" / "template",)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
            if not any(p.is_relative_to(d) for d in NOT_MODULES)}


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module ``name`` refers to (``judge.box.replies`` for the module, or its
    package for a name defined in one), None outside the project."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path | None = None) -> dict[str, int]:
    """Project modules ``module`` imports, each with the first line that does."""
    path = path or MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import name`: the submodule pkg.name when there is one, else pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for t in targets:
            r = _resolve(t)
            if r is not None and r != module:
                found.setdefault(r, node.lineno)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


def audience(module: str) -> str:
    """core | box | service | authoring | shell (judge.cli) | wire (the protocol both sides of
    the sandbox speak) | sandbox."""
    parts = module.split(".")
    if module == "sandbox.wire":
        return "wire"
    if parts[0] == "sandbox":
        return "sandbox"
    if module == "judge.cli":
        return "shell"
    if len(parts) > 1 and parts[1] in ("box", "service", "authoring"):
        return parts[1]
    return "core"


# What each audience may import (itself always).
ALLOWED = {
    "core": {"core", "box", "wire"},
    "box": {"core", "box", "wire", "sandbox"},  # it starts the zygote (and reads its constants)
    "service": {"core", "box", "service"},
    "authoring": {"core", "box", "authoring"},
    "shell": {"core", "box", "service", "authoring"},
    "wire": {"wire"},
    "sandbox": {"sandbox", "wire"},
}


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each as one cycle
    through it, sorted; a cycle of one module is an import of itself, which _resolve drops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the number of modules (~60)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_one_cycle(graph, comp) for comp in components)


def _one_cycle(graph: dict[str, dict[str, int]], comp: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start, members = comp[0], set(comp)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    return paths[v] + [start]
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{comp} is not strongly connected")  # pragma: no cover - Tarjan's output


def _describe(cycle: list[str]) -> str:
    return " -> ".join(f"{a} (line {GRAPH[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_graph_sees_the_packages():
    """The walk finds the subpackages and the imports this test is about (so an empty graph, or
    one that resolved nothing, cannot pass the tests below)."""
    audiences = {audience(m) for m in MODULES}
    assert audiences == set(ALLOWED)
    assert "judge.box.sandbox" in GRAPH["judge.grading"]
    assert "judge.service.store" in GRAPH["judge.service.app"]
    assert "judge.authoring.mutate" in GRAPH["judge.authoring.validate"]  # a function-level import
    assert "judge.box.replies" in GRAPH["judge.grading"]  # `from judge.box import replies`


def test_no_import_cycle():
    cycles = find_cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(_describe(c) for c in cycles)


@pytest.mark.parametrize("kind", sorted(ALLOWED))
def test_each_audience_imports_only_what_it_may(kind):
    bad = [f"{m} imports {dep} (line {line}): {audience(m)} may not use {audience(dep)}"
           for m, deps in sorted(GRAPH.items()) if audience(m) == kind
           for dep, line in sorted(deps.items()) if audience(dep) not in ALLOWED[kind]]
    assert not bad, "\n".join(bad)


# --- the checker itself ----------------------------------------------------------------------
def test_find_cycles_reports_each_cycle_once():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}, "e": {"f": 1}, "f": {"e": 1}}
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert find_cycles({"a": {"b": 1}, "b": {}}) == []


def test_imports_of_reads_every_form(tmp_path):
    """Plain, from-, relative, function-level and TYPE_CHECKING imports all count; a name
    imported from a package resolves to its submodule when there is one."""
    src = tmp_path / "probe.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "import judge.errors\n"
        "from judge.box import replies, Sandbox\n"
        "from . import report\n"
        "if TYPE_CHECKING:\n"
        "    from judge.box.job import Job\n"
        "def f():\n"
        "    from judge.service import store\n"
        "import numpy\n")
    found = imports_of("judge.probe", src)
    assert found == {"judge.errors": 2, "judge.box.replies": 3, "judge.box": 3, "judge.report": 4,
                     "judge.box.job": 6, "judge.service.store": 8}
