"""v1_baseline — BLOCK_SIZE: 1024, no optimization (three passes over each row).
ko: BLOCK_SIZE: 1024, 최적화 없음 (행마다 세 번 순회)

Direct translation of ``torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)``:
one program per row (the trailing ``normalized_shape`` dimensions flattened), reading it three
times in blocks of 1024 elements: the mean, the biased variance ``mean((x - mean)**2)``, then
``(x - mean) / sqrt(var + eps) * weight + bias``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _layer_norm_kernel(
    x_ptr,
    weight_ptr,
    bias_ptr,
    out_ptr,
    n_cols,
    x_row_stride,
    eps,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * n_cols
    total = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        total += tl.sum(tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32), axis=0)
    mean = total / n_cols
    squares = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        centered = tl.where(mask, x - mean, 0.0)
        squares += tl.sum(centered * centered, axis=0)
    rstd = 1.0 / tl.sqrt(squares / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        out = (x - mean) * rstd
        if HAS_WEIGHT:
            out = out * tl.load(weight_ptr + cols, mask=mask).to(tl.float32)
        if HAS_BIAS:
            out = out + tl.load(bias_ptr + cols, mask=mask).to(tl.float32)
        tl.store(out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def _check(
    x: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
) -> tuple[int, ...]:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"x: dtype {x.dtype} is not supported (float32, float16, bfloat16)")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or tuple(x.shape[x.dim() - len(shape) :]) != shape or len(shape) > x.dim():
        raise ValueError(
            f"normalized_shape: {list(shape)} must be a non-empty suffix of x's shape "
            f"{list(x.shape)}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor or None, got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(
                f"{name}: shape {list(t.shape)} must equal normalized_shape {list(shape)}"
            )
        if t.dtype not in _DTYPES or t.device != x.device:
            raise TypeError(
                f"{name}: must be a float tensor on {x.device}, got {t.dtype} on {t.device}"
            )
    return shape


def _rows(t: torch.Tensor, n_cols: int) -> torch.Tensor:
    """A 2-D view (rows, n_cols) with contiguous rows, without copying when possible."""
    if t.stride(-1) == 1:
        try:
            return t.view(-1, n_cols)
        except RuntimeError:
            pass  # the dimensions cannot be merged without a copy
    return t.contiguous().view(-1, n_cols)


def triton_layer_norm(
    x: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """``torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)``."""
    shape = _check(x, normalized_shape, weight, bias)
    n_cols = math.prod(shape)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    rows = _rows(x, n_cols)
    w = weight.contiguous() if weight is not None else rows
    b = bias.contiguous() if bias is not None else rows
    _layer_norm_kernel[(rows.shape[0],)](
        rows,
        w,
        b,
        out,
        n_cols,
        rows.stride(0),
        float(eps),
        HAS_WEIGHT=weight is not None,
        HAS_BIAS=bias is not None,
        BLOCK_SIZE=BLOCK_SIZE,
    )
    return out
