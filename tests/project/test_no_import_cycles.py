"""No import circle among the modules of quota_core, ui, pages and pipeline.

Every import counts: at module level, under ``if TYPE_CHECKING:`` and inside a function alike
(grimp's graph, the one import-linter checks). An import moved into a function still makes
the two modules depend on each other; it only defers the circle from import time to the first
call, and hides it from the layers. (``quota_core.domain.alterations`` <-> ``quota_core.domain.validation``
was such a circle, through an import inside ``Op.set``.) The fix is a lower home for what both
need, never a deferred import.
"""
from __future__ import annotations

import grimp
import pytest

ROOTS = ("quota_core", "ui", "pages", "pipeline")


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing
    itself), each sorted: Tarjan's algorithm, iterative."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def _explain(graph: grimp.ImportGraph, circle: list[str]) -> str:
    """The import lines that close ``circle``, ``importer:line: text``."""
    members = set(circle)
    lines = []
    for importer in circle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for d in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{d['line_number']}: {d['line_contents']}")
    return " <-> ".join(circle) + "\n" + "\n".join(lines)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*ROOTS, cache_dir=None)


def test_no_import_circle(graph):
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(_explain(graph, c) for c in found)


def test_the_graph_holds_every_package_and_the_imports_inside_functions(graph):
    """The graph the check reads is the whole tree, with the imports inside functions."""
    assert {m.split(".")[0] for m in graph.modules} == set(ROOTS)
    assert graph.direct_import_exists(importer="quota_core.cli.main",
                                      imported="quota_core.cli.edge")
    # ui.context imports ui.nav inside _hand_over_to_app only.
    assert graph.direct_import_exists(importer="ui.context", imported="ui.nav")


@pytest.mark.parametrize("imports, want", [
    ([("a.x", "a.y"), ("a.y", "a.x")], [["a.x", "a.y"]]),
    ([("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.z", "a.w")], [["a.x", "a.y", "a.z"]]),
    ([("a.x", "a.x")], [["a.x"]]),
    ([("a.x", "a.y"), ("a.y", "a.z"), ("a.x", "a.z")], []),
])
def test_the_check_finds_a_circle(imports, want):
    """The check would fail: the three circles the issue found had the shape of the first."""
    g = grimp.ImportGraph()
    for importer, imported in imports:
        g.add_import(importer=importer, imported=imported)
    assert circles(g) == want
