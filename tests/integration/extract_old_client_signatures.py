"""Dev-time tool: the public signatures of the old kernel evaluation server's Python client.

Reads the old package's source with `ast` (nothing is imported or executed) and prints the
facts test_client_compat.py checks kernel_eval_client against: what each module exports, every
public class (fields with their defaults, methods with their parameters, instance attributes,
enum members) and every public function. Only names, kinds and default values are written;
no source text.

The old client lives in github.com/jinhuang12/kernel_eval_server, cuda_eval_server_v2/client/;
its models come from cuda_eval_server_v2/shared/models.py, and KernelCode.get_typed_metadata()
returns the classes of shared/kernel_metadata.py, so those are read too.

    python tests/integration/extract_old_client_signatures.py --git-dir <clone>/.git \
        > tests/integration/old_client_signatures.json
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPOSITORY = "jinhuang12/kernel_eval_server"
ROOT = "cuda_eval_server_v2"
CLIENT = f"{ROOT}/client/kernel_eval_client"
MODULES = ("__init__", "builder", "specs", "client", "models")
SHARED_MODELS = f"{ROOT}/shared/models.py"
SHARED_METADATA = f"{ROOT}/shared/kernel_metadata.py"
# Imports from these modules are the package's own names (re-exported), not library imports.
OWN_IMPORTS = ("shared.models", "models", "builder", "specs", "client")
# Dunder methods that are part of how the old classes are used.
PUBLIC_DUNDERS = ("__init__", "__enter__", "__exit__")
PYDANTIC_BASES = ("BaseModel", "BaseKernelMetadata")


class Source:
    """Files of the old repository, from a checkout or from a git directory at a revision."""

    def __init__(self, root: Path | None, git_dir: Path | None, rev: str) -> None:
        self.root, self.git_dir, self.rev = root, git_dir, rev

    def read(self, path: str) -> str:
        if self.root is not None:
            return (self.root / path).read_text()
        return self._git("show", f"{self.rev}:{path}")

    def commit(self) -> str | None:
        if self.git_dir is None:
            return None
        return self._git("rev-parse", self.rev).strip()

    def _git(self, *args: str) -> str:
        command = ["git", f"--git-dir={self.git_dir}", *args]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def literal(node: ast.expr) -> Any:
    """A default value as JSON: the literal itself, {"factory": name} for
    Field(default_factory=name), {"expr": text} for anything else."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Field":
        for kw in node.keywords:
            if kw.arg == "default_factory":
                return {"factory": ast.unparse(kw.value)}
            if kw.arg == "default":
                return literal(kw.value)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return {"expr": ast.unparse(node)}


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef, skip_first: bool) -> list[dict]:
    """The parameters of a function in order, without self/cls."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += args.defaults
    out = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if skip_first and index == 0:
            continue
        kind = "positional_only" if arg in args.posonlyargs else "positional_or_keyword"
        out.append(param(arg.arg, kind, default))
    if args.vararg:
        out.append(param(args.vararg.arg, "var_positional", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(param(arg.arg, "keyword_only", default))
    if args.kwarg:
        out.append(param(args.kwarg.arg, "var_keyword", None))
    return out


def param(name: str, kind: str, default: ast.expr | None) -> dict:
    entry: dict[str, Any] = {"name": name, "kind": kind}
    if default is not None:
        entry["default"] = literal(default)
    return entry


def decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    return [ast.unparse(d) for d in node.decorator_list]


def method(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict:
    marks = decorators(fn)
    kind = "staticmethod" if "staticmethod" in marks else "method"
    kind = "classmethod" if "classmethod" in marks else kind
    return {
        "kind": kind,
        "async": isinstance(fn, ast.AsyncFunctionDef),
        "params": parameters(fn, skip_first=kind != "staticmethod"),
    }


def instance_attributes(init: ast.FunctionDef) -> list[str]:
    """Public attributes __init__ sets (self.name = ...)."""
    names = []
    for node in ast.walk(init):
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets = [node.target] if isinstance(node, ast.AnnAssign) else targets
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and getattr(target.value, "id", None) == "self"
                and not target.attr.startswith("_")
                and target.attr not in names
            ):
                names.append(target.attr)
    return names


def class_kind(node: ast.ClassDef) -> str:
    bases = [ast.unparse(b) for b in node.bases]
    if any(b in PYDANTIC_BASES for b in bases):
        return "pydantic"
    if "dataclass" in decorators(node):
        return "dataclass"
    if "Enum" in bases:
        return "enum"
    return "plain"


def fields(node: ast.ClassDef) -> list[dict]:
    """Annotated class attributes: the constructor's fields (pydantic, dataclass)."""
    out = []
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        name = stmt.target.id
        if name == "model_config" or name.startswith("_"):
            continue
        entry: dict[str, Any] = {"name": name, "annotation": ast.unparse(stmt.annotation)}
        if stmt.value is not None:
            entry["default"] = literal(stmt.value)
        out.append(entry)
    return out


def describe_class(node: ast.ClassDef) -> dict:
    kind = class_kind(node)
    entry: dict[str, Any] = {"kind": kind, "bases": [ast.unparse(b) for b in node.bases]}
    if kind == "enum":
        entry["members"] = {
            stmt.targets[0].id: ast.literal_eval(stmt.value)
            for stmt in node.body
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name)
        }
        return entry
    if kind in ("pydantic", "dataclass"):
        entry["fields"] = fields(node)
    methods = {}
    for stmt in node.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if stmt.name.startswith("_") and stmt.name not in PUBLIC_DUNDERS:
            continue
        if "field_validator" in " ".join(decorators(stmt)):
            continue  # pydantic's hook, not something a caller calls
        methods[stmt.name] = method(stmt)
        if stmt.name == "__init__":
            entry["attributes"] = instance_attributes(stmt)  # type: ignore[arg-type]
    entry["methods"] = methods
    return entry


def module_names(tree: ast.Module) -> tuple[list[str], dict[str, str], list[str]]:
    """(names the module defines, names it imports from the package's own modules -> from
    where, its __all__)."""
    defined, imported, exported = [], {}, []
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)) and not stmt.name.startswith("_"):
            defined.append(stmt.name)
        elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "") in OWN_IMPORTS:
            for alias in stmt.names:
                imported[alias.asname or alias.name] = stmt.module or ""
        elif isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", None) == "__all__":
            exported = ast.literal_eval(stmt.value)
    return defined, imported, exported


def version(tree: ast.Module) -> str | None:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", None) == "__version__":
            return str(ast.literal_eval(stmt.value))
    return None


def classes_and_functions(tree: ast.Module) -> tuple[dict[str, dict], dict[str, dict]]:
    classes, functions = {}, {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and not stmt.name.startswith("_"):
            classes[stmt.name] = describe_class(stmt)
        elif isinstance(stmt, ast.FunctionDef) and not stmt.name.startswith("_"):
            functions[stmt.name] = {"params": parameters(stmt, skip_first=False)}
    return classes, functions


def extract(source: Source) -> dict:
    trees = {m: ast.parse(source.read(f"{CLIENT}/{m}.py")) for m in MODULES}
    shared_classes, _ = classes_and_functions(ast.parse(source.read(SHARED_MODELS)))
    metadata_classes, _ = classes_and_functions(ast.parse(source.read(SHARED_METADATA)))

    exports: dict[str, list[str]] = {}
    classes: dict[str, dict] = {}
    functions: dict[str, dict] = {}
    reexported: set[str] = set()
    for name, tree in trees.items():
        defined, imported, exported = module_names(tree)
        module = "kernel_eval_client" + ("" if name == "__init__" else f".{name}")
        exports[module] = sorted(set(exported) | set(defined) | set(imported))
        own_classes, own_functions = classes_and_functions(tree)
        for cls_name, cls in own_classes.items():
            classes[cls_name] = {"defined_in": module, **cls}
        for fn_name, fn in own_functions.items():
            functions[fn_name] = {"defined_in": module, **fn}
        reexported |= {n for n, origin in imported.items() if origin == "shared.models"}
    for cls_name in sorted(reexported):
        # The client's models.py defines its own RuntimeStats; the shared one is not exported.
        classes.setdefault(cls_name, {"defined_in": "shared.models", **shared_classes[cls_name]})
    for cls_name, cls in metadata_classes.items():
        classes[cls_name] = {"defined_in": "shared.kernel_metadata", **cls}
    return {
        "source": {
            "repository": REPOSITORY,
            "commit": source.commit(),
            "paths": [f"{CLIENT}/{m}.py" for m in MODULES] + [SHARED_MODELS, SHARED_METADATA],
            "note": "signature facts only, extracted by extract_old_client_signatures.py",
        },
        "version": version(trees["__init__"]),
        "exports": exports,
        "classes": dict(sorted(classes.items())),
        "functions": dict(sorted(functions.items())),
    }


def render(value: Any, indent: str = "") -> str:
    """JSON with one line per parameter or field: a dict or list of plain values stays on one
    line, anything holding containers is spread out."""
    plain = not isinstance(value, (dict, list)) or all(
        not isinstance(v, (dict, list)) or (isinstance(v, dict) and not v)
        for v in (value.values() if isinstance(value, dict) else value)
    )
    if plain or not value:
        return json.dumps(value)
    inner = indent + " "
    if isinstance(value, list):
        items = [inner + render(v, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    items = [f"{inner}{json.dumps(k)}: {render(v, inner)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--root", type=Path, help="a checkout of kernel_eval_server")
    where.add_argument("--git-dir", type=Path, help="its git directory (read at --rev)")
    parser.add_argument("--rev", default="HEAD")
    args = parser.parse_args()
    facts = extract(Source(args.root, args.git_dir, args.rev))
    sys.stdout.write(render(facts) + "\n")


if __name__ == "__main__":
    main()
