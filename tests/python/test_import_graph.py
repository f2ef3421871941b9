"""kforge_worker's modules import one another without a cycle, and its rooms (subpackages) only
in the direction each room's `__init__.py` allows (docs/contributing.md, "Python types and
imports"). Every import counts, a function's own included: a cycle or a back-edge hidden behind
a function-local import is still one. Built from the sources with `ast`; imports nothing.

A room's `__init__.py` docstring has a line `May import: core, timing` (or `May import:
nothing`): the rooms it may import besides itself. Modules at the package's top level (the
command line, the zygote, the child) may import every room; no room may import them, but any
module may import the package itself (`from kforge_worker import PROTOCOL_VERSION`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "kforge_worker"
TOP = "__init__"  # the package's own __init__.py: constants every module may import


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(dotted: str, modules: set[str]) -> str | None:
    """The module of `dotted` (relative to the package, "" for the package itself): the longest
    prefix that is a module."""
    parts = dotted.split(".") if dotted else []
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return TOP if TOP in modules else None


def imported_modules(source: str, modules: set[str], current: str = "") -> set[str]:
    """The package's modules `source` (the module `current`) imports anywhere (not under `if
    TYPE_CHECKING:`). Module names are dotted below the package: "judge.evaluate", "zygote";
    a room's own `__init__.py` is the room's name, the package's is "__init__"."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(source)]
    package = current.rsplit(".", 1)[0] if "." in current else ""
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            pending.extend(node.orelse)
            continue
        base: str | None = None
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: max(0, len(package.split(".")) - node.level + 1)]
                base = ".".join([p for p in anchor if p] + ([node.module] if node.module else []))
            elif node.module == "kforge_worker":
                base = ""
            elif node.module and node.module.startswith("kforge_worker."):
                base = node.module.removeprefix("kforge_worker.")
            if base is not None:
                for alias in node.names:
                    target = _resolve(f"{base}.{alias.name}" if base else alias.name, modules)
                    if target is not None:
                        found.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kforge_worker."):
                    target = _resolve(alias.name.removeprefix("kforge_worker."), modules)
                    if target is not None:
                        found.add(target)
        pending.extend(ast.iter_child_nodes(node))
    return found


def module_names() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def import_graph() -> dict[str, set[str]]:
    names = module_names()
    modules = set(names)
    return {
        m: imported_modules(path.read_text(), modules, m if path.stem != "__init__" else m + ".x")
        - {m}
        for m, path in names.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
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


def room_rules() -> dict[str, set[str]]:
    """Each room (a subpackage) and the rooms its `__init__.py` says it may import."""
    rules: dict[str, set[str]] = {}
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        match = re.search(r"^May import: (.+?)\.?$", doc, re.MULTILINE)
        assert match, f"{init}: the docstring has no 'May import:' line"
        named = match.group(1).strip()
        rules[init.parent.name] = (
            set() if named == "nothing" else {r.strip() for r in named.split(",")}
        )
    return rules


def room_of(module: str, rules: dict[str, set[str]]) -> str | None:
    """The room of a module, or None for the package's top level."""
    first = module.split(".", maxsplit=1)[0]
    return first if first in rules else None


def violations(graph: dict[str, set[str]], rules: dict[str, set[str]]) -> list[str]:
    """Imports that go against the rooms' rules, as "a -> b (why)"."""
    found = []
    for module, targets in sorted(graph.items()):
        room = room_of(module, rules)
        if room is None:
            continue  # the top level may import every room
        for target in sorted(targets):
            other = room_of(target, rules)
            if target == TOP or other == room:
                continue
            if other is None:
                found.append(f"{module} -> {target} (a room imports the package's top level)")
            elif other not in rules[room]:
                found.append(f"{module} -> {target} ({room} may import {sorted(rules[room])})")
    return found


def test_the_worker_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 30  # the package was found
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_room_imports_only_the_rooms_its_init_names():
    rules = room_rules()
    for room, allowed in rules.items():
        assert allowed <= set(rules), f"{room} names rooms that do not exist: {allowed}"
    assert violations(import_graph(), rules) == []


def test_the_rooms_are_layered():
    rules = room_rules()
    cycle = find_cycle(rules)
    assert cycle is None, "the rooms' rules make a cycle: " + " -> ".join(cycle or [])


def test_every_module_of_a_room_is_in_a_room_directory_with_a_docstring():
    for init in PACKAGE.glob("*/__init__.py"):
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init} opens with no docstring"
        assert all(isinstance(n, ast.Expr) for n in tree.body), f"{init} holds code"


def test_a_planted_back_edge_fails():
    rules = {"core": set(), "judge": {"core"}}
    graph = {
        "core.spec": imported_modules(
            "def f():\n    from kforge_worker.judge import evaluate\n",
            {"core.spec", "judge.evaluate"},
            "core.spec",
        ),
        "judge.evaluate": {"core.spec"},
    }
    assert graph["core.spec"] == {"judge.evaluate"}
    assert violations(graph, rules) == ["core.spec -> judge.evaluate (core may import [])"]
    assert violations({"judge.evaluate": {"core.spec"}}, rules) == []
    assert violations({"core.spec": {"zygote"}}, rules) == [
        "core.spec -> zygote (a room imports the package's top level)"
    ]


def test_rooms_that_allow_each_other_are_a_cycle():
    assert find_cycle({"core": {"judge"}, "judge": {"core"}}) == ["core", "judge", "core"]


def test_a_cycle_behind_a_function_local_import_is_found():
    modules = {"a", "b", "c"}
    graph = {
        "a": imported_modules("from kforge_worker import b\n", modules),
        "b": imported_modules("def f():\n    from kforge_worker.c import g\n", modules),
        "c": imported_modules("import kforge_worker.a\n", modules),
    }
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_imports_of_a_room_resolve_to_its_modules():
    modules = {"judge", "judge.evaluate", "core.spec", "core", TOP}
    source = (
        "from kforge_worker.judge import evaluate\n"
        "from kforge_worker.core.spec import parse_job\n"
        "from kforge_worker import PROTOCOL_VERSION\n"
    )
    assert imported_modules(source, modules) == {"judge.evaluate", "core.spec", TOP}


def test_imports_for_type_checking_only_are_not_edges():
    source = "if TYPE_CHECKING:\n    from kforge_worker import b\n"
    assert imported_modules(source, {"a", "b"}) == set()
