"""v3_coalesced — BLOCK_SIZE: next_power_of_2(row), the row read once into registers.
ko: BLOCK_SIZE: next_power_of_2(행 길이), 행을 레지스터에 한 번만 읽음

Memory-access pattern first: one program per row loads the whole row in one coalesced sweep
(BLOCK_SIZE = the row length rounded up to a power of two, num_warps grown with it so every
thread holds a few consecutive elements), takes the maximum and the sum from registers and
writes the output: one read and one write per element, the minimum traffic. Rows longer
than 32768 elements do not fit in registers and take a two-pass online kernel instead.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_FUSED_BLOCK = 32768
LONG_ROW_BLOCK = 4096
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _softmax_row_kernel(
    x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    out = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_long_row_kernel(
    x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr
):
    # Online softmax over tiles: per-lane running maximum and rescaled sum, then the output.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    lane_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        # A lane that has seen only -inf keeps a zero sum (exp(-inf - 0) = 0, never inf - inf).
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    lane_weight = tl.exp(lane_max - row_max)
    denominator = tl.sum(lane_sum * lane_weight, axis=0)
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
        block = triton.next_power_of_2(n_cols)
        args = (rows, out, n_cols, rows.stride(0), out.stride(0))
        if block <= MAX_FUSED_BLOCK:
            warps = 16 if block >= 16384 else 8 if block >= 4096 else 4 if block >= 1024 else 2
            _softmax_row_kernel[(n_rows,)](*args, BLOCK_SIZE=block, num_warps=warps)
        else:
            _softmax_long_row_kernel[(n_rows,)](*args, BLOCK_SIZE=LONG_ROW_BLOCK, num_warps=8)
    out = out.view(moved.shape)
    return out.movedim(-1, dim) if x.dim() > 0 else out
