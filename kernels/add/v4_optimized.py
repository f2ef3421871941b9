"""v4_optimized — autotuned tiles (BLOCK_SIZE x 1-8 per program) and warps, wide loads.
ko: 타일(BLOCK_SIZE x 프로그램당 1-8개)과 num_warps 자동 튜닝, 넓은 벡터 로드

The combination: contiguous inputs take v2's tiled walk (each program TILES_PER_PROGRAM steps
of BLOCK_SIZE, 512-4096) with both and num_warps autotuned per size (many 128-bit loads in
flight per SM, which is what a bandwidth-bound op needs on an H100); inputs with strided rows
are read in place with 2-D [BLOCK_M, BLOCK_N] tiles (several short rows per program) instead
of being copied. Math in fp32, one rounding to the output dtype.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# v2's tiled walk (TILES_PER_PROGRAM steps of BLOCK_SIZE per program) under autotune: the
# first config is v2's own (1024 x 4, 4 warps), which reached 94 % (add) and 90 % (gelu) of
# the copy bandwidth on an H100 where the flat autotuned kernel reached 89.5 % and 81.6 %.
_CONFIGS = [
    triton.Config({"BLOCK_SIZE": 1024, "TILES_PER_PROGRAM": 4}, num_warps=4),
    triton.Config({"BLOCK_SIZE": 1024, "TILES_PER_PROGRAM": 8}, num_warps=4),
    triton.Config({"BLOCK_SIZE": 1024, "TILES_PER_PROGRAM": 2}, num_warps=4),
    triton.Config({"BLOCK_SIZE": 2048, "TILES_PER_PROGRAM": 4}, num_warps=8),
    triton.Config({"BLOCK_SIZE": 512, "TILES_PER_PROGRAM": 8}, num_warps=4),
    triton.Config({"BLOCK_SIZE": 4096, "TILES_PER_PROGRAM": 2}, num_warps=8),
    # One tile per program: on an H100 (2026-11-27, CUDA graphs, 4096x4096 float32 GELU) these
    # ran 46.6 us against 49.8 us for v2's 1024 x 4, level with torch (46.8 us).
    triton.Config({"BLOCK_SIZE": 1024, "TILES_PER_PROGRAM": 1}, num_warps=4),
    triton.Config({"BLOCK_SIZE": 2048, "TILES_PER_PROGRAM": 1}, num_warps=8),
    triton.Config({"BLOCK_SIZE": 4096, "TILES_PER_PROGRAM": 1}, num_warps=16),
]
# The Triton interpreter (TRITON_INTERPRET=1, the cpu device) cannot benchmark configs.
if os.environ.get("TRITON_INTERPRET") == "1":
    _CONFIGS = _CONFIGS[:1]


@triton.autotune(configs=_CONFIGS, key=["n_elements"])
@triton.jit
def _add_flat_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n_elements,
    alpha,
    BLOCK_SIZE: tl.constexpr,
    TILES_PER_PROGRAM: tl.constexpr,
):
    tile_start = tl.program_id(0).to(tl.int64) * (BLOCK_SIZE * TILES_PER_PROGRAM)
    for t in tl.static_range(TILES_PER_PROGRAM):
        offsets = tile_start + t * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, (x + alpha * y).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_tile_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,
    alpha,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    col_blocks = tl.cdiv(n_cols, BLOCK_N)
    pid = tl.program_id(0)
    rows = (pid // col_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % col_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows64 = rows.to(tl.int64)[:, None]
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows64 * x_row_stride + cols[None, :], mask=mask).to(tl.float32)
    y = tl.load(y_ptr + rows64 * y_row_stride + cols[None, :], mask=mask).to(tl.float32)
    out = (x + alpha * y).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + rows64 * n_cols + cols[None, :], out, mask=mask)


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


def _rows(t: torch.Tensor) -> torch.Tensor:
    """A 2-D view (rows, last dim) with contiguous rows, without copying when possible."""
    n_cols = t.shape[-1] if t.dim() > 0 else 1
    if t.dim() > 0 and t.stride(-1) == 1:
        try:
            return t.view(-1, n_cols)
        except RuntimeError:
            pass  # leading dimensions cannot be merged without a copy
    return t.contiguous().view(-1, n_cols)


def triton_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """``torch.add(x, y, alpha=alpha)`` for same-shape float32/float16/bfloat16 tensors."""
    _check(x, y)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    if x.is_contiguous() and y.is_contiguous():

        def grid(meta: dict[str, int]) -> tuple[int]:
            return (triton.cdiv(n, meta["BLOCK_SIZE"] * meta["TILES_PER_PROGRAM"]),)

        _add_flat_kernel[grid](x, y, out, n, float(alpha))
        return out
    x2, y2 = _rows(x), _rows(y)
    n_rows, n_cols = x2.shape
    block_n = min(triton.next_power_of_2(n_cols), 1024)
    block_m = max(1, 4096 // block_n)
    grid = (triton.cdiv(n_rows, block_m) * triton.cdiv(n_cols, block_n),)
    _add_tile_kernel[grid](
        x2,
        y2,
        out,
        n_rows,
        n_cols,
        x2.stride(0),
        y2.stride(0),
        float(alpha),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=8 if block_m * block_n >= 4096 else 4,
    )
    return out
