"""v3_coalesced — BLOCK_SIZE: 2048, persistent grid-stride loop, 128-bit vector loads, strided rows.
ko: BLOCK_SIZE: 2048, 퍼시스턴트 grid-stride 루프, 128비트 벡터 로드, 스트라이드 행 지원

Memory-access pattern first: a persistent grid (a few programs per SM) walks the flattened
tensor in a grid-stride loop, so at every step the programs together touch one contiguous
span, and ``tl.multiple_of``/``tl.max_contiguous`` let every thread issue 128-bit accesses.
An input whose rows are contiguous but strided (e.g. ``x[:, :k]``) is read in place, row by
row, instead of being copied; other layouts are copied to contiguous first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 2048
ROW_BLOCK = 1024
PROGRAMS_PER_SM = 4
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_APPROXIMATIONS = ("none", "tanh")


@triton.jit
def _gelu(x, USE_TANH: tl.constexpr):
    if USE_TANH:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0))
    return 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_flat_kernel(x_ptr, out_ptr, n_elements, USE_TANH: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    first = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    step = tl.num_programs(0).to(tl.int64) * BLOCK_SIZE
    for start in range(first, n_elements, step):
        offsets = start + tl.arange(0, BLOCK_SIZE)
        offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, _gelu(x, USE_TANH).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_rows_kernel(
    x_ptr, out_ptr, n_cols, x_row_stride, USE_TANH: tl.constexpr, BLOCK_SIZE: tl.constexpr
):
    # One program per (row, column block); rows may be strided, columns are contiguous.
    col_blocks = tl.cdiv(n_cols, BLOCK_SIZE)
    pid = tl.program_id(0)
    row = (pid // col_blocks).to(tl.int64)
    cols = (pid % col_blocks) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask).to(tl.float32)
    out = _gelu(x, USE_TANH).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + row * n_cols + cols, out, mask=mask)


def _check(x: torch.Tensor, approximate: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"x: dtype {x.dtype} is not supported (float32, float16, bfloat16)")
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"approximate: must be 'none' or 'tanh', got {approximate!r}")


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


def triton_gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``torch.nn.functional.gelu(x, approximate=approximate)``."""
    _check(x, approximate)
    use_tanh = approximate == "tanh"
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    if x.is_contiguous():
        programs = min(triton.cdiv(n, BLOCK_SIZE), _num_sms(x.device) * PROGRAMS_PER_SM)
        _gelu_flat_kernel[(programs,)](x, out, n, USE_TANH=use_tanh, BLOCK_SIZE=BLOCK_SIZE)
        return out
    x2 = _rows(x)
    n_rows, n_cols = x2.shape
    grid = (n_rows * triton.cdiv(n_cols, ROW_BLOCK),)
    _gelu_rows_kernel[grid](x2, out, n_cols, x2.stride(0), USE_TANH=use_tanh, BLOCK_SIZE=ROW_BLOCK)
    return out
