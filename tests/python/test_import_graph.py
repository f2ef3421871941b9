"""kforge_worker's modules import one another without a cycle (docs/contributing.md, "Python
types and imports"). Every import counts, a function's own included: a cycle hidden behind a
function-local import is still a cycle. Built from the sources with `ast`; imports nothing."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "kforge_worker"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(source: str, modules: set[str]) -> set[str]:
    """The package's modules `source` imports anywhere (not under `if TYPE_CHECKING:`)."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(source)]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                found.add((node.module or "").split(".")[0])
                found.update(a.name for a in node.names if not node.module)
            elif node.module == "kforge_worker":
                found.update(a.name for a in node.names)
            elif node.module and node.module.startswith("kforge_worker."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(
                a.name.split(".")[1] for a in node.names if a.name.startswith("kforge_worker.")
            )
        pending.extend(ast.iter_child_nodes(node))
    return found & modules


def import_graph() -> dict[str, set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return {m: imported_modules((PACKAGE / f"{m}.py").read_text(), modules) - {m} for m in modules}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_worker_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 30  # the package was found
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_cycle_behind_a_function_local_import_is_found():
    modules = {"a", "b", "c"}
    graph = {
        "a": imported_modules("from kforge_worker import b\n", modules),
        "b": imported_modules("def f():\n    from kforge_worker.c import g\n", modules),
        "c": imported_modules("import kforge_worker.a\n", modules),
    }
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_imports_for_type_checking_only_are_not_edges():
    source = "if TYPE_CHECKING:\n    from kforge_worker import b\n"
    assert imported_modules(source, {"a", "b"}) == set()
