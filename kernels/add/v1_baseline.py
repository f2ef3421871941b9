"""v1_baseline — BLOCK_SIZE: 1024, no optimization.
ko: BLOCK_SIZE: 1024, 최적화 없음

Direct translation of ``torch.add(x, y, alpha=alpha)`` (``x + alpha * y``): the tensors are
flattened (non-contiguous inputs are copied to contiguous ones first) and each program adds
one block of 1024 consecutive elements, masked at the tail.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    out = x.to(tl.float32) + alpha * y.to(tl.float32)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def _check(x: torch.Tensor, y: torch.Tensor) -> None:
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in _DTYPES:
            raise TypeError(
                f"{name}: dtype {t.dtype} is not supported (float32, float16, bfloat16)"
            )
    if x.shape != y.shape:
        raise ValueError(f"y: shape {list(y.shape)} must equal x's shape {list(x.shape)}")
    if x.dtype != y.dtype:
        raise TypeError(f"y: dtype {y.dtype} must equal x's dtype {x.dtype}")
    if x.device != y.device:
        raise ValueError(f"y: device {y.device} must equal x's device {x.device}")


def triton_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """``torch.add(x, y, alpha=alpha)`` for same-shape float32/float16/bfloat16 tensors."""
    _check(x, y)
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    _add_kernel[grid](x, y, out, n, float(alpha), BLOCK_SIZE=BLOCK_SIZE)
    return out
