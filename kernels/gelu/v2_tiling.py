"""v2_tiling — BLOCK_SIZE: 1024 x 4 sub-blocks per program (4096-element tiles).
ko: BLOCK_SIZE: 1024 x 프로그램당 4개 서브블록 (4096 원소 타일)

Each program owns a tile of TILES_PER_PROGRAM * BLOCK_SIZE consecutive elements and walks it
in BLOCK_SIZE steps (an unrolled ``tl.static_range`` loop): a 4x smaller grid than v1, several
independent loads in flight per program. A non-contiguous input is copied first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
TILES_PER_PROGRAM = 4
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_APPROXIMATIONS = ("none", "tanh")


@triton.jit
def _gelu(x, USE_TANH: tl.constexpr):
    if USE_TANH:
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0))
    return 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_tile_kernel(
    x_ptr,
    out_ptr,
    n_elements,
    USE_TANH: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILES_PER_PROGRAM: tl.constexpr,
):
    tile_start = tl.program_id(0).to(tl.int64) * (BLOCK_SIZE * TILES_PER_PROGRAM)
    for t in tl.static_range(TILES_PER_PROGRAM):
        offsets = tile_start + t * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, _gelu(x, USE_TANH).to(out_ptr.dtype.element_ty), mask=mask)


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
    grid = (triton.cdiv(n, BLOCK_SIZE * TILES_PER_PROGRAM),)
    _gelu_tile_kernel[grid](
        x,
        out,
        n,
        USE_TANH=approximate == "tanh",
        BLOCK_SIZE=BLOCK_SIZE,
        TILES_PER_PROGRAM=TILES_PER_PROGRAM,
    )
    return out
