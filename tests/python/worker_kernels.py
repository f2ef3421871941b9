"""Kernel sources and IOContracts used by the worker tests (KernelCode dicts)."""

from __future__ import annotations

from typing import Any


def tensor_arg(
    name: str,
    shape: list[int],
    dtype: str = "float32",
    role: str = "input",
    init: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"shape": shape, "dtype": dtype}
    if init is not None:
        spec["init"] = init
    if data is not None:
        spec["data"] = data
    return {"name": name, "type": "tensor", "role": role, "is_meta": False, "tensor_spec": spec}


def scalar_arg(name: str, kind: str, value: Any, *, is_meta: bool = False) -> dict[str, Any]:
    return {"name": name, "type": kind, "role": "input", "is_meta": is_meta, "value": value}


VADD = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)
"""

VADD_WRONG = VADD.replace("x + y, mask=mask)", "x - y, mask=mask)")

# Writes only the first half of the output.
VADD_PARTIAL = VADD.replace("mask = offsets < n", "mask = offsets < n // 2")

# Computes the right answer, then zeroes its first input.
VADD_MUTATES = VADD.replace(
    "tl.store(out_ptr + offsets, x + y, mask=mask)",
    "tl.store(out_ptr + offsets, x + y, mask=mask)\n"
    "    tl.store(x_ptr + offsets, x * 0, mask=mask)",
)

VADD_SYNTAX_ERROR = VADD.replace("def add_kernel(", "def add_kernel(((")

VADD_IMPORT_ERROR = VADD + "\nraise ValueError('boom at import')\n"

TRITON_WRAPPER = """
import torch
import triton
import triton.language as tl


@triton.jit
def _axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + alpha * y, mask=mask)


def triton_add(x, y, alpha=1.0):
    out = torch.empty_like(x)
    n = x.numel()
    _axpy_kernel[(triton.cdiv(n, 128),)](x, y, out, n, alpha, BLOCK=128)
    return out
"""

RUNTIME_ERROR_WRAPPER = """
def triton_add(x, y, alpha=1.0):
    raise ValueError("bad things in the kernel")
"""

MULTI_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def add_then_scale(x, y, out, factor):
    tmp = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, 256),)
    _add[grid](x, y, tmp, n, BLOCK=256)
    _scale[grid](tmp, out, n, factor, BLOCK=256)
"""

TORCH_ADD_REF = """
import torch


class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.add(x, y)
"""

TORCH_ADD_SCALE_REF = """
import torch


class Model(torch.nn.Module):
    def forward(self, x, y):
        return (x + y) * 3.0
"""

KB_REFERENCE = """
import torch
import torch.nn as nn

IN_FEATURES = 32
OUT_FEATURES = 16


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(8, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
"""

# A model that draws random numbers in every call (dropout in training mode, as KernelBench's
# level 2 problem 66 has it): the same model must judge correct against itself.
KB_DROPOUT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, p):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return torch.softmax(self.dropout(self.linear(x)), dim=1)


def get_inputs():
    return [torch.rand(8, 64)]


def get_init_inputs():
    return [64, 0.2]
"""
KB_DROPOUT_CANDIDATE = KB_DROPOUT + "\n\nModelNew = Model\n"

# Same parameters (same construction order), different computation path.
KB_CANDIDATE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = x @ self.linear.weight.t() + self.linear.bias
        return out.clamp_min(0.0)
"""

# Re-initialises its weights with a different seed: must fail against the reference.
KB_CANDIDATE_OTHER_WEIGHTS = KB_CANDIDATE.replace(
    "        self.linear = nn.Linear(in_features, out_features)",
    "        torch.manual_seed(999)\n        self.linear = nn.Linear(in_features, out_features)",
)

SEGFAULT_WRAPPER = """
import ctypes


def triton_add(x, y, alpha=1.0):
    ctypes.string_at(0)
"""

EXIT_WRAPPER = """
import os


def triton_add(x, y, alpha=1.0):
    os._exit(3)
"""

NOISY_WRAPPER = """
import sys

LINE = "x" * 1023


def triton_add(x, y, alpha=1.0):
    for _ in range(5 * 1024):
        print(LINE)
    sys.stderr.write("to stderr\\n")
    return x + alpha * y
"""

PATCHING_WRAPPER = """
import torch

torch.add = lambda *args, **kwargs: None


def triton_add(x, y, alpha=1.0):
    return x + alpha * y
"""


def vadd_io(n: int = 1000, block: int = 256) -> dict[str, Any]:
    grid = (n + block - 1) // block
    return {
        "args": [
            tensor_arg("x", [n]),
            tensor_arg("y", [n]),
            tensor_arg("out", [n], role="output"),
            scalar_arg("n", "int", n),
            scalar_arg("BLOCK", "int", block, is_meta=True),
        ],
        "launch": {"grid": {"x": grid, "y": 1, "z": 1}},
    }


def triton_vadd(source: str = VADD, n: int = 1000, **metadata: Any) -> dict[str, Any]:
    return {"source_code": source, "kernel_type": "triton", "io": vadd_io(n), "metadata": metadata}


def wrapper_io(n: int = 1000, alpha: float = 1.0) -> dict[str, Any]:
    return {
        "args": [
            tensor_arg("x", [n]),
            tensor_arg("y", [n]),
            scalar_arg("alpha", "float", alpha, is_meta=True),
        ]
    }


def triton_wrapper(source: str = TRITON_WRAPPER, n: int = 1000) -> dict[str, Any]:
    return {
        "source_code": source,
        "kernel_type": "triton",
        "io": wrapper_io(n),
        "metadata": {"entry_point": "triton_add"},
    }


def multi_kernel(n: int = 1000) -> dict[str, Any]:
    io = {
        "args": [
            tensor_arg("x", [n]),
            tensor_arg("y", [n]),
            tensor_arg("out", [n], role="output"),
            scalar_arg("factor", "float", 3.0),
        ]
    }
    return {
        "source_code": MULTI_KERNEL,
        "kernel_type": "multi_kernel",
        "io": io,
        "metadata": {"entry_point": "add_then_scale"},
    }


def torch_kernel(source: str, **metadata: Any) -> dict[str, Any]:
    return {"source_code": source, "kernel_type": "torch", "metadata": metadata}


def torch_add_reference() -> dict[str, Any]:
    return torch_kernel(TORCH_ADD_REF)
