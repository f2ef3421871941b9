"""Kernel sources and request bodies shared by the integration tests and benchmarks."""

from __future__ import annotations

from typing import Any

TORCH_ADD_REF = """
import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y

def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]

def get_init_inputs():
    return []
"""

TRITON_ADD = """
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y{extra}, mask=mask)
"""


def vector_add_io(n: int = 4096, block: int = 1024) -> dict[str, Any]:
    tensor = {"shape": [n], "dtype": "float32"}
    return {
        "args": [
            {"name": "x", "type": "tensor", "tensor_spec": tensor},
            {"name": "y", "type": "tensor", "tensor_spec": tensor},
            {"name": "out", "type": "tensor", "role": "output", "tensor_spec": tensor},
            {"name": "n", "type": "int", "value": n},
            {"name": "BLOCK", "type": "int", "value": block, "is_meta": True},
        ],
        "launch": {"grid": {"x": (n + block - 1) // block}},
    }


def triton_add(extra: str = "") -> dict[str, Any]:
    return {
        "source_code": TRITON_ADD.replace("{extra}", extra),
        "kernel_type": "triton",
        "io": vector_add_io(),
        "metadata": {"entry_point": "add_kernel"},
    }


def torch_kernel(source: str) -> dict[str, Any]:
    return {"source_code": source, "kernel_type": "torch"}


def model_source(forward_body: str, prelude: str = "", inputs: str = "[torch.randn(256)]") -> str:
    """A KernelBench module whose Model.forward(x) runs `forward_body` (lines indented as in a
    function body at column 0). The source is compiled here, so a test whose kernel is not
    valid Python fails at once instead of passing or failing by timing (issue #8 item 11)."""
    source = f"""
import torch
{prelude}

class Model(torch.nn.Module):
    def forward(self, x):
{_indent(forward_body, 8)}

def get_inputs():
    return {inputs}

def get_init_inputs():
    return []
"""
    compile(source, "<model_source>", "exec")
    return source


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.strip("\n").splitlines())


FAST_TIMING = {"budget_ms": 50, "warmup_ms": 1, "max_trials": 20}
