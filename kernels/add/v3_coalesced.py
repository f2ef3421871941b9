"""v3_coalesced — BLOCK_SIZE: 2048, persistent grid-stride loop, 128-bit vector loads, strided rows.
ko: BLOCK_SIZE: 2048, 퍼시스턴트 grid-stride 루프, 128비트 벡터 로드, 스트라이드 행 지원

Memory-access pattern first: a persistent grid (a few programs per SM) walks the flattened
tensors in a grid-stride loop, so at every step the programs together touch one contiguous
span of memory, and ``tl.multiple_of``/``tl.max_contiguous`` let every thread issue 128-bit
loads and stores. Inputs whose rows are contiguous but strided (e.g. ``x[:, :k]``) are read in
place, row by row, instead of being copied; other layouts are copied to contiguous first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 2048
ROW_BLOCK = 1024
PROGRAMS_PER_SM = 4
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _add_flat_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK_SIZE: tl.constexpr):
    first = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    step = tl.num_programs(0).to(tl.int64) * BLOCK_SIZE
    for start in range(first, n_elements, step):
        offsets = start + tl.arange(0, BLOCK_SIZE)
        offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, (x + alpha * y).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_rows_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n_cols,
    x_row_stride,
    y_row_stride,
    alpha,
    BLOCK_SIZE: tl.constexpr,
):
    # One program per (row, column block); rows may be strided, columns are contiguous.
    col_blocks = tl.cdiv(n_cols, BLOCK_SIZE)
    pid = tl.program_id(0)
    row = (pid // col_blocks).to(tl.int64)
    cols = (pid % col_blocks) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + row * y_row_stride + cols, mask=mask).to(tl.float32)
    out = (x + alpha * y).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + row * n_cols + cols, out, mask=mask)


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


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def triton_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """``torch.add(x, y, alpha=alpha)`` for same-shape float32/float16/bfloat16 tensors."""
    _check(x, y)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    if x.is_contiguous() and y.is_contiguous():
        programs = min(triton.cdiv(n, BLOCK_SIZE), _num_sms(x.device) * PROGRAMS_PER_SM)
        _add_flat_kernel[(programs,)](x, y, out, n, float(alpha), BLOCK_SIZE=BLOCK_SIZE)
        return out
    x2, y2 = _rows(x), _rows(y)
    n_rows, n_cols = x2.shape
    grid = (n_rows * triton.cdiv(n_cols, ROW_BLOCK),)
    _add_rows_kernel[grid](
        x2, y2, out, n_cols, x2.stride(0), y2.stride(0), float(alpha), BLOCK_SIZE=ROW_BLOCK
    )
    return out
