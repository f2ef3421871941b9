"""v4_optimized — several short rows per program, autotuned num_warps, exp2, one read, one write.
ko: 짧은 행은 프로그램당 여러 행, num_warps 자동 튜닝, exp2, 한 번 읽고 한 번 쓰기

The combination: each program loads a [ROWS, BLOCK_SIZE] tile (BLOCK_SIZE = the row length
rounded up to a power of two; several rows per program when rows are short, so a program
always moves at least ~4K elements), reduces it in registers and writes it: one read and one
write per element. Exponentials are ``exp2`` with log2(e) folded in, the division is one
reciprocal per row, num_warps is autotuned per row length. Rows longer than 32768 elements
take a two-pass online kernel.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

MAX_FUSED_BLOCK = 32768
LONG_ROW_BLOCK = 4096
TARGET_TILE = 4096  # elements per program, at least
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_CONFIGS = [triton.Config({}, num_warps=w) for w in (8, 4, 16, 2)]
# The Triton interpreter (TRITON_INTERPRET=1, the cpu device) cannot benchmark configs.
if os.environ.get("TRITON_INTERPRET") == "1":
    _CONFIGS = _CONFIGS[:1]


@triton.autotune(configs=_CONFIGS, key=["n_cols", "ROWS", "BLOCK_SIZE"])
@triton.jit
def _softmax_rows_kernel(
    x_ptr,
    out_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    out_row_stride,
    ROWS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    LOG2E: tl.constexpr = 1.4426950408889634
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    rows64 = rows.to(tl.int64)[:, None]
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows64 * x_row_stride + cols[None, :], mask=mask, other=float("-inf"))
    x = x.to(tl.float32) * LOG2E
    numerator = tl.exp2(x - tl.max(x, axis=1)[:, None])
    out = numerator * (1.0 / tl.sum(numerator, axis=1))[:, None]
    tl.store(
        out_ptr + rows64 * out_row_stride + cols[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=mask,
    )


@triton.jit
def _softmax_long_row_kernel(
    x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr
):
    # Online softmax over tiles (base 2): per-lane running maximum and rescaled sum.
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    lane_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32) * LOG2E
        new_max = tl.maximum(lane_max, x)
        # A lane that has seen only -inf keeps a zero sum (exp(-inf - 0) = 0, never inf - inf).
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp2(lane_max - shift) + tl.exp2(x - shift)
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    lane_weight = tl.exp2(lane_max - row_max)
    inv_denominator = 1.0 / tl.sum(lane_sum * lane_weight, axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32) * LOG2E
        out = tl.exp2(x - row_max) * inv_denominator
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
        if block <= MAX_FUSED_BLOCK:
            per_program = min(max(1, TARGET_TILE // block), triton.next_power_of_2(n_rows))
            grid = (triton.cdiv(n_rows, per_program),)
            _softmax_rows_kernel[grid](
                rows,
                out,
                n_rows,
                n_cols,
                rows.stride(0),
                out.stride(0),
                ROWS=per_program,
                BLOCK_SIZE=block,
            )
        else:
            _softmax_long_row_kernel[(n_rows,)](
                rows,
                out,
                n_cols,
                rows.stride(0),
                out.stride(0),
                BLOCK_SIZE=LONG_ROW_BLOCK,
                num_warps=8,
            )
    out = out.view(moved.shape)
    return out.movedim(-1, dim) if x.dim() > 0 else out
