"""knowledge/: every op of torch_ops.json and every template of templates.json is executed.

- Each op's test_input_code builds inputs (with DEVICE = "cpu") and its reference_code's
  reference(...) is compared with an independent implementation written here from the op's
  definition, for every size; its bytes/FLOPs formulas are evaluated on those inputs.
- Each template's source (its file, plus `solve = <entry>`) is imported as a file and its
  solve(...) compared with its reference on its own test inputs.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
KNOWLEDGE = REPO / "knowledge"
OPS = json.loads((KNOWLEDGE / "torch_ops.json").read_text())
TEMPLATES = json.loads((KNOWLEDGE / "templates" / "templates.json").read_text())
OP_NAMES = [n for n in OPS if not n.startswith("_")]
PATTERNS = [p for p in TEMPLATES if not p.startswith("_")]
REQUIRED_OPS = {
    "vector_add", "vector_mul", "relu", "gelu", "softmax", "layer_norm", "matmul", "dropout",
    "attention", "cross_entropy", "sum", "mean",
}  # fmt: skip


def cases(test_input_code: str) -> list[tuple[list[Any], dict[str, Any]]]:
    """The input cases exactly as the workbench's harness builds them (job_builder.cc)."""
    scope: dict[str, Any] = {"__name__": "test_input_code", "torch": torch, "DEVICE": "cpu"}
    exec(compile(test_input_code, "test_input_code", "exec"), scope)
    if "sizes" in scope:
        out = []
        for size in scope["sizes"]:
            made = scope["make_inputs"](size)
            if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict):
                out.append((list(made[0]), dict(made[1])))
            else:
                out.append((list(made), {}))
        return out
    return [(list(scope["args"]), dict(scope.get("kwargs") or {}))]


def load_reference(code: str) -> Callable[..., Any]:
    scope: dict[str, Any] = {}
    exec(compile(code, "reference_code", "exec"), scope)
    return scope["reference"]


def _softmax(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (_softmax(scores) @ v.double()).to(q.dtype)


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    mean = x.double().mean(dim=-1, keepdim=True)
    var = ((x.double() - mean) ** 2).mean(dim=-1, keepdim=True)
    return ((x.double() - mean) / torch.sqrt(var + eps) * w.double() + b.double()).to(x.dtype)


def _cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    lse = torch.logsumexp(logits.double(), dim=-1)
    picked = logits.double().gather(1, target[:, None])[:, 0]
    return (lse - picked).mean().to(logits.dtype)


# Written from each op's definition, not from the reference_code under test.
INDEPENDENT: dict[str, Callable[..., torch.Tensor]] = {
    "vector_add": lambda x, y: x.double().add(y.double()).to(x.dtype),
    "vector_mul": lambda x, y: (x.double() * y.double()).to(x.dtype),
    "relu": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "gelu": lambda x: (0.5 * x.double() * (1 + torch.erf(x.double() / math.sqrt(2)))).to(x.dtype),
    "softmax": lambda x: _softmax(x.double()).to(x.dtype),
    "layer_norm": lambda x, w, b, eps=1e-5: _layer_norm(x, w, b, eps),
    "matmul": lambda a, b: (a.double() @ b.double()).to(a.dtype),
    "dropout": lambda x, keep, p: (x.double() * keep.double() / (1 - p)).to(x.dtype),
    "attention": _attention,
    "cross_entropy": _cross_entropy,
    "sum": lambda x: x.double().sum(dim=-1).to(x.dtype),
    "mean": lambda x: x.double().mean(dim=-1).to(x.dtype),
}

FORMULA_CALL = re.compile(r"(numel|esize|bytes|dim)\(([^()]*)\)")


def formula_value(formula: str, tensors: list[torch.Tensor]) -> float:
    """The workbench's formula language (work_formula.h) on real tensors."""

    def value(m: re.Match[str]) -> str:
        args = [int(a) for a in m.group(2).split(",")]
        t = tensors[args[0]]
        fn = m.group(1)
        if fn == "numel":
            return str(t.numel())
        if fn == "esize":
            return str(t.element_size())
        if fn == "bytes":
            return str(t.numel() * t.element_size())
        return str(t.shape[args[1]])

    return float(eval(FORMULA_CALL.sub(value, formula), {"__builtins__": {}}))


def test_the_base_has_the_twelve_ops_and_five_templates() -> None:
    assert set(OP_NAMES) >= REQUIRED_OPS
    assert set(PATTERNS) >= {"elementwise", "reduction", "matmul", "fused", "attention"}
    for name in OP_NAMES:
        assert OPS[name]["template"] in PATTERNS, name
        assert OPS[name]["bound"] in ("memory", "compute"), name


@pytest.mark.parametrize("name", OP_NAMES)
def test_op_reference_matches_its_definition(name: str) -> None:
    op = OPS[name]
    reference = load_reference(op["reference_code"])
    found = cases(op["test_input_code"])
    assert len(found) >= 2, "every op tests several sizes"
    for args, kwargs in found:
        got = reference(*args, **kwargs)
        want = INDEPENDENT[name](*args, **kwargs)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        assert formula_value(op["bytes"], tensors) > 0
        assert formula_value(op["flops"], tensors) > 0


def test_formulas_count_what_the_op_moves() -> None:
    a, b = torch.zeros(64, 32), torch.zeros(32, 16)
    assert formula_value(OPS["matmul"]["bytes"], [a, b]) == (64 * 32 + 32 * 16 + 64 * 16) * 4
    assert formula_value(OPS["matmul"]["flops"], [a, b]) == 2 * 64 * 32 * 16
    x = torch.zeros(1000)
    assert formula_value(OPS["vector_add"]["bytes"], [x, x]) == 3 * 4000


def import_template(pattern: str, tmp_path: Path) -> Any:
    spec_info = TEMPLATES[pattern]
    source = (REPO / spec_info["file"]).read_text()
    if spec_info["entry"] != "solve":
        source += f"\n\nsolve = {spec_info['entry']}\n"
    compat = (REPO / "kernels" / "interpreter_compat.py").read_text()
    path = tmp_path / f"template_{pattern}.py"
    path.write_text(source + "\n\n" + compat)
    spec = importlib.util.spec_from_file_location(f"kforge_template_{pattern}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("pattern", PATTERNS)
def test_template_matches_its_reference(pattern: str, tmp_path: Path) -> None:
    t = TEMPLATES[pattern]
    module = import_template(pattern, tmp_path)
    reference = load_reference(t["reference_code"])
    found = cases(t["test_input_code"])
    assert len(found) >= 2
    for args, kwargs in found:
        got = module.solve(*args, **kwargs)
        torch.testing.assert_close(got, reference(*args, **kwargs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_template_launches_triton(pattern: str, tmp_path: Path) -> None:
    """A template is a Triton kernel, not a torch call in disguise."""
    source = (REPO / TEMPLATES[pattern]["file"]).read_text()
    assert "@triton.jit" in source
