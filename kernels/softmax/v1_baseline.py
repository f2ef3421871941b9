"""v1_baseline — BLOCK_SIZE: 1024, no optimization (three passes over each row).
ko: BLOCK_SIZE: 1024, 최적화 없음 (행마다 세 번 순회)

Direct translation of ``torch.softmax(x, dim)`` = ``exp(x - max(x)) / sum(exp(x - max(x)))``
along ``dim``: one program per row, which it reads three times in blocks of 1024 elements
(the row maximum, the sum of exponentials, then the normalised output).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    row_max = tl.full([], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        row_max = tl.maximum(row_max, tl.max(x, axis=0))
    denominator = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        denominator += tl.sum(tl.exp(x - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        out = tl.exp(x - row_max) / denominator
        tl.store(out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def _check(x: torch.Tensor, dim: int, dtype: torch.dtype | None) -> int:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"x: dtype {x.dtype} is not supported (float32, float16, bfloat16)")
    if dtype is not None:
        raise ValueError("dtype: only None is supported (cast the input instead)")
    rank = max(x.dim(), 1)
    if not -rank <= dim < rank:
        raise IndexError(f"dim: {dim} is out of range for a tensor of rank {x.dim()}")
    return dim % rank


def _rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D view (rows, last dim) with contiguous rows, without copying when possible."""
    n_cols = t.shape[-1] if t.dim() > 0 else 1
    if t.dim() > 0 and t.stride(-1) == 1:
        try:
            return t.view(-1, n_cols)
        except RuntimeError:
            pass  # leading dimensions cannot be merged without a copy
    return t.contiguous().view(-1, n_cols)


def triton_softmax(
    x: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``torch.softmax(x, dim)``: any dim (a dim other than the last is moved there and back)."""
    dim = _check(x, dim, dtype)
    moved = x.movedim(dim, -1) if x.dim() > 0 else x
    rows = _rows(moved)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n_rows, n_cols = rows.shape
    if n_rows > 0 and n_cols > 0:
        _softmax_kernel[(n_rows,)](
            rows, out, n_cols, rows.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE
        )
    out = out.view(moved.shape)
    return out.movedim(-1, dim) if x.dim() > 0 else out
