"""v1_baseline — BLOCK_SIZE: 1024, no optimization.
ko: BLOCK_SIZE: 1024, 최적화 없음

Direct translation of ``torch.nn.functional.gelu(x, approximate=...)``: the tensor is flattened
(a non-contiguous input is copied first) and each program computes one block of 1024
elements, with the exact form ``0.5 * x * (1 + erf(x / sqrt(2)))`` or the tanh form
``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_APPROXIMATIONS = ("none", "tanh")


@triton.jit
def _gelu_kernel(x_ptr, out_ptr, n_elements, USE_TANH: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    if USE_TANH:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        tanh = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
        out = 0.5 * x * (1.0 + tanh)
    else:
        out = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def _check(x: torch.Tensor, approximate: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"x: dtype {x.dtype} is not supported (float32, float16, bfloat16)")
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"approximate: must be 'none' or 'tanh', got {approximate!r}")


def triton_gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``torch.nn.functional.gelu(x, approximate=approximate)``."""
    _check(x, approximate)
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    _gelu_kernel[grid](x, out, n, USE_TANH=approximate == "tanh", BLOCK_SIZE=BLOCK_SIZE)
    return out
