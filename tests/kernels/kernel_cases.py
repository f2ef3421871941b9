"""The kernel library as the tests see it: each op's package (VERSIONS, MANIFEST) and
inputs/expected outputs built from its manifest, the way `kforge bench` builds its jobs."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "kernels"
OPS = ("add", "softmax", "gelu", "layer_norm", "mha")
VERSIONS = ("v1_baseline", "v2_tiling", "v3_coalesced", "v4_optimized")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def device() -> torch.device:
    return torch.device(os.environ.get("KFORGE_TEST_DEVICE", "cpu"))


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def apply_interpreter_compat() -> None:
    """kernels/interpreter_compat.py, as `kforge bench` applies it to cpu jobs."""
    path = LIBRARY / "interpreter_compat.py"
    exec(compile(path.read_text(), str(path), "exec"), {"__name__": "kforge_interpreter_compat"})


def load_op(op: str) -> ModuleType:
    """kernels/<op>/ imported as a package (its __init__ imports the four versions)."""
    name = f"kforge_kernels_{op}"
    if name in sys.modules:
        return sys.modules[name]
    path = LIBRARY / op / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[str(path.parent)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class Case:
    """One call of an op: its arguments by name, and how to call the reference and a version."""

    manifest: dict[str, Any]
    args: dict[str, Any]

    def reference(self) -> Any:
        namespace = {"torch": torch, **self.args}
        return eval(self.manifest["reference"], namespace)  # trusted: our own manifest

    def call(self, wrapper: Any) -> Any:
        namespace = {self.manifest["wrapper"]: wrapper, **self.args}
        return eval(self.manifest["call"], namespace)

    def tolerance(self, dtype: str) -> dict[str, float]:
        return self.manifest["tolerance"][dtype]


def size_profile() -> str:
    return "cpu" if device().type == "cpu" else "gpu"


def make_case(manifest: dict[str, Any], size: str, dtype: str, seed: int = 0) -> Case:
    """The manifest's arguments at `size` for this device, tensors drawn like randn inits."""
    gen = torch.Generator().manual_seed(seed)
    shapes = manifest["sizes"][size_profile()][size]["shapes"]
    args: dict[str, Any] = {}
    for arg in manifest["args"]:
        if arg["type"] == "tensor":
            t = torch.randn(shapes[arg["name"]], generator=gen, dtype=torch.float32)
            args[arg["name"]] = t.to(device=device(), dtype=DTYPES[dtype])
        else:
            args[arg["name"]] = arg["value"]
    return Case(manifest, args)


def expected_cost(manifest: dict[str, Any], size: dict[str, Any]) -> tuple[int, int]:
    """(elements moved, FLOPs) per call from the shapes, by the op's counting rule."""
    shapes = size["shapes"]
    op = manifest["op"]
    if op == "mha":
        b, h, s, d = shapes["query"]
        return 4 * b * h * s * d, 4 * b * h * s * s * d
    n = math.prod(shapes["x"])
    per_element = {"add": (3, 2), "softmax": (2, 5), "gelu": (2, 5), "layer_norm": (2, 7)}[op]
    extra = 2 * shapes["x"][-1] if op == "layer_norm" else 0  # weight and bias
    return per_element[0] * n + extra, per_element[1] * n
