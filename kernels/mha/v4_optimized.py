"""v4_optimized — autotuned BLOCK_M/BLOCK_N/warps/stages, mask-free inner loop, causal skipping.
ko: BLOCK_M/BLOCK_N/num_warps/num_stages 자동 튜닝, 마스크 없는 내부 루프, causal 블록 건너뛰기

The combination, FlashAttention-2 style: one program per query block of one (batch, head),
query blocks of a head adjacent (K/V reuse in L2), Q held in registers, K/V streamed as
row-major tiles through a software pipeline (num_stages), online softmax in base 2 with the
scale folded in, P cast to fp16/bf16 for the second tensor-core dot, fp32 accumulation. The
key loop is split in two: full key blocks that need no mask (everything left of the diagonal
when causal, every full block otherwise) run without any compare or select, and only the
diagonal/tail blocks apply the causal and bounds masks; causal programs never visit blocks
right of the diagonal (half the work). Block sizes, warps and pipeline depth are autotuned
per shape; fp32 inputs use IEEE dots (no TF32 rounding).
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

MAX_HEAD_DIM = 256
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# BLOCK_M must be a multiple of BLOCK_N (the causal diagonal splits on BLOCK_N boundaries).
_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 32}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 32}, num_warps=4, num_stages=4),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=4),
]
# The Triton interpreter (TRITON_INTERPRET=1, the cpu device) cannot benchmark configs.
if os.environ.get("TRITON_INTERPRET") == "1":
    _CONFIGS = _CONFIGS[1:2]


@triton.jit
def _attend(
    acc, row_sum, row_max, q, k_ptrs, v_ptrs, sk_n, sv_n, rows, d_mask, k_len, qk_scale,
    start, end,
    MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, EVEN_D: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    """Online-softmax update over key blocks [start, end); MASKED applies bounds and causality."""
    offs_n = tl.arange(0, BLOCK_N)
    for block_start in range(start, end, BLOCK_N):
        cols = block_start + offs_n
        if MASKED:
            kv_mask = (cols[:, None] < k_len) & d_mask[None, :]
            k = tl.load(k_ptrs + block_start * sk_n, mask=kv_mask, other=0.0)
        elif EVEN_D:
            k = tl.load(k_ptrs + block_start * sk_n)
        else:
            k = tl.load(k_ptrs + block_start * sk_n, mask=d_mask[None, :], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        if MASKED:
            valid = cols[None, :] < k_len
            if IS_CAUSAL:
                valid = valid & (cols[None, :] <= rows[:, None])
            s = tl.where(valid, s * qk_scale, float("-inf"))
            new_max = tl.maximum(row_max, tl.max(s, axis=1))
            s = s - new_max[:, None]
        else:
            s = s * qk_scale
            new_max = tl.maximum(row_max, tl.max(s, axis=1))
            s = s - new_max[:, None]
        p = tl.exp2(s)
        rescale = tl.exp2(row_max - new_max)
        row_sum = row_sum * rescale + tl.sum(p, axis=1)
        if MASKED:
            v = tl.load(v_ptrs + block_start * sv_n, mask=kv_mask, other=0.0)
        elif EVEN_D:
            v = tl.load(v_ptrs + block_start * sv_n)
        else:
            v = tl.load(v_ptrs + block_start * sv_n, mask=d_mask[None, :], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * rescale[:, None], input_precision=PRECISION)
        row_max = new_max
    return acc, row_sum, row_max


@triton.autotune(configs=_CONFIGS, key=["q_len", "k_len", "BLOCK_D", "IS_CAUSAL", "PRECISION"])
@triton.jit
def _flash_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,
    sq_b, sq_h, sq_m, sq_d, sk_b, sk_h, sk_n, sk_d, sv_b, sv_h, sv_n, sv_d,
    so_b, so_h, so_m, so_d,
    heads, q_len, k_len, head_dim, sm_scale,
    IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr, EVEN_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    b = tl.program_id(1) // heads
    h = tl.program_id(1) % heads
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    d_mask = dims < head_dim
    offs_n = tl.arange(0, BLOCK_N)
    q_base = q_ptr + b.to(tl.int64) * sq_b + h.to(tl.int64) * sq_h
    k_ptrs = k_ptr + b.to(tl.int64) * sk_b + h.to(tl.int64) * sk_h
    k_ptrs += offs_n[:, None] * sk_n + dims[None, :] * sk_d
    v_ptrs = v_ptr + b.to(tl.int64) * sv_b + h.to(tl.int64) * sv_h
    v_ptrs += offs_n[:, None] * sv_n + dims[None, :] * sv_d
    q = tl.load(
        q_base + rows[:, None] * sq_m + dims[None, :] * sq_d,
        mask=(rows[:, None] < q_len) & d_mask[None, :],
        other=0.0,
    )
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    # Key blocks [0, full_end) need no mask; [full_end, masked_end) hold the causal diagonal
    # and/or the ragged tail of the keys.
    full_end = (k_len // BLOCK_N) * BLOCK_N
    masked_end = k_len
    if IS_CAUSAL:
        full_end = tl.minimum(full_end, pid_m * BLOCK_M)
        masked_end = tl.minimum(k_len, (pid_m + 1) * BLOCK_M)
    acc, row_sum, row_max = _attend(
        acc, row_sum, row_max, q, k_ptrs, v_ptrs, sk_n, sv_n, rows, d_mask, k_len, qk_scale,
        0, full_end,
        MASKED=False, IS_CAUSAL=IS_CAUSAL, EVEN_D=EVEN_D, PRECISION=PRECISION,
        BLOCK_N=BLOCK_N,
    )  # fmt: skip
    acc, row_sum, row_max = _attend(
        acc, row_sum, row_max, q, k_ptrs, v_ptrs, sk_n, sv_n, rows, d_mask, k_len, qk_scale,
        full_end, masked_end,
        MASKED=True, IS_CAUSAL=IS_CAUSAL, EVEN_D=EVEN_D, PRECISION=PRECISION,
        BLOCK_N=BLOCK_N,
    )  # fmt: skip
    out = acc / row_sum[:, None]
    out_ptrs = out_ptr + b.to(tl.int64) * so_b + h.to(tl.int64) * so_h
    out_ptrs += rows[:, None] * so_m + dims[None, :] * so_d
    tl.store(
        out_ptrs, out.to(out_ptr.dtype.element_ty), mask=(rows[:, None] < q_len) & d_mask[None, :]
    )


def _check(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    enable_gqa: bool,
) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in _DTYPES:
            raise TypeError(
                f"{name}: dtype {t.dtype} is not supported (float32, float16, bfloat16)"
            )
        if t.dim() < 2:
            raise ValueError(f"{name}: needs at least 2 dimensions (..., sequence, head_dim)")
        if t.dtype != query.dtype or t.device != query.device:
            raise TypeError(
                f"{name}: must match query's dtype and device ({query.dtype}, {query.device})"
            )
    if attn_mask is not None:
        raise ValueError("attn_mask: not supported (use is_causal=True for a causal mask)")
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p: only 0.0 is supported, got {dropout_p}")
    if enable_gqa:
        raise ValueError("enable_gqa: not supported (key and value need query's heads)")
    if key.shape[:-2] != query.shape[:-2] or value.shape[:-1] != key.shape[:-1]:
        raise ValueError(
            f"key/value: shapes {list(key.shape)} and {list(value.shape)} must match query's "
            f"{list(query.shape)} in every dimension but the sequence length"
        )
    if key.shape[-1] != query.shape[-1] or value.shape[-1] != query.shape[-1]:
        raise ValueError("value: key and value need query's head_dim")
    if not 1 <= query.shape[-1] <= MAX_HEAD_DIM:
        raise ValueError(f"query: head_dim {query.shape[-1]} must be between 1 and {MAX_HEAD_DIM}")
    if key.shape[-2] == 0:
        raise ValueError("key: the key sequence must not be empty")


def _as_4d(t: torch.Tensor) -> torch.Tensor:
    """[batch, heads, sequence, head_dim] without copying (strides are passed to the kernel)."""
    if t.dim() == 4:
        return t
    if t.dim() < 4:
        return t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
    return t.reshape(-1, *t.shape[-3:])


def triton_mha(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """``torch.nn.functional.scaled_dot_product_attention`` forward (no mask tensor, no dropout).

    ``is_causal`` masks key j for query i when j > i (top-left aligned, as SDPA does);
    ``scale`` defaults to 1 / sqrt(head_dim)."""
    _check(query, key, value, attn_mask, dropout_p, enable_gqa)
    q, k, v = _as_4d(query), _as_4d(key), _as_4d(value)
    batch, heads, q_len, head_dim = q.shape
    k_len = k.shape[2]
    out = torch.empty((batch, heads, q_len, head_dim), dtype=q.dtype, device=q.device)
    sm_scale = float(scale) if scale is not None else 1.0 / math.sqrt(head_dim)
    if out.numel() > 0:
        block_d = max(16, triton.next_power_of_2(head_dim))

        def grid(meta: dict[str, int]) -> tuple[int, int]:
            return (triton.cdiv(q_len, meta["BLOCK_M"]), batch * heads)

        _flash_attention_kernel[grid](
            q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            heads, q_len, k_len, head_dim, sm_scale,
            IS_CAUSAL=bool(is_causal),
            PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
            EVEN_D=head_dim == block_d,
            BLOCK_D=block_d,
        )  # fmt: skip
    return out.view((*query.shape[:-1], head_dim))
