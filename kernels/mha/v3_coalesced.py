"""v3_coalesced — BLOCK_M: 64, BLOCK_N: 64, row-major K/V tiles, head-major program order, exp2.
ko: BLOCK_M: 64, BLOCK_N: 64, 행 우선 K/V 타일, 헤드 우선 프로그램 순서, exp2

Memory-access pattern on top of the online softmax: K and V tiles are loaded as row-major
[BLOCK_N, head_dim] blocks (each key's head_dim elements contiguous, one coalesced sweep; K is
transposed in registers for the dot), and the query blocks of one (batch, head) are
consecutive program ids, so the programs running together share the same K and V and read
them from L2 instead of HBM. Softmax in base 2 with scale * log2(e) folded into one multiply.
Causal programs stop at the diagonal.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
MAX_HEAD_DIM = 256
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _flash_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,
    sq_b, sq_h, sq_m, sq_d, sk_b, sk_h, sk_n, sk_d, sv_b, sv_h, sv_n, sv_d,
    so_b, so_h, so_m, so_d,
    heads, q_len, k_len, head_dim, sm_scale,
    IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    b = tl.program_id(1) // heads
    h = tl.program_id(1) % heads
    qk_scale = sm_scale * 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    d_mask = dims < head_dim
    q_base = q_ptr + b.to(tl.int64) * sq_b + h.to(tl.int64) * sq_h
    k_base = k_ptr + b.to(tl.int64) * sk_b + h.to(tl.int64) * sk_h
    v_base = v_ptr + b.to(tl.int64) * sv_b + h.to(tl.int64) * sv_h
    q = tl.load(
        q_base + rows[:, None] * sq_m + dims[None, :] * sq_d,
        mask=(rows[:, None] < q_len) & d_mask[None, :],
        other=0.0,
    )
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    end = k_len
    if IS_CAUSAL:
        end = tl.minimum(k_len, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kv_mask = (cols[:, None] < k_len) & d_mask[None, :]
        k = tl.load(k_base + cols[:, None] * sk_n + dims[None, :] * sk_d, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        valid = cols[None, :] < k_len
        if IS_CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        s = tl.where(valid, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, axis=1))
        p = tl.exp2(s - new_max[:, None])
        rescale = tl.exp2(row_max - new_max)
        row_sum = row_sum * rescale + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * sv_n + dims[None, :] * sv_d, mask=kv_mask, other=0.0)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        row_max = new_max
    out_ptrs = out_ptr + b.to(tl.int64) * so_b + h.to(tl.int64) * so_h
    out_ptrs += rows[:, None] * so_m + dims[None, :] * so_d
    out = acc / row_sum[:, None]
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
    grid = (triton.cdiv(q_len, BLOCK_M), batch * heads)
    if out.numel() > 0:
        _flash_attention_kernel[grid](
            q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            heads, q_len, k_len, head_dim, sm_scale,
            IS_CAUSAL=bool(is_causal),
            PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        )  # fmt: skip
    return out.view((*query.shape[:-1], head_dim))
