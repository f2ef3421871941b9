"""v2_tiling — BLOCK_M: 64, BLOCK_N: 32, FlashAttention-style online softmax (one pass over keys).
ko: BLOCK_M: 64, BLOCK_N: 32, FlashAttention 방식 온라인 소프트맥스 (키를 한 번 순회)

Tiling: one program per 64 query rows of one (batch, head) keeps its Q tile in registers and
walks the keys once in tiles of 32, with the online-softmax recurrence: a running row maximum
and row sum, the output accumulator rescaled by exp(m_old - m_new) whenever the maximum grows,
and P @ V accumulated in fp32 (P cast to the input dtype for the tensor-core dot). The
attention matrix is never materialised and Q @ K^T is computed once. Causal programs stop at
the diagonal.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 32
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
    b = tl.program_id(0) // heads
    h = tl.program_id(0) % heads
    pid_m = tl.program_id(1)
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
        k_t = tl.load(
            k_base + cols[None, :] * sk_n + dims[:, None] * sk_d,
            mask=d_mask[:, None] & (cols[None, :] < k_len),
            other=0.0,
        )
        s = tl.dot(q, k_t, input_precision=PRECISION) * sm_scale
        valid = cols[None, :] < k_len
        if IS_CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        s = tl.where(valid, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, axis=1))
        p = tl.exp(s - new_max[:, None])
        rescale = tl.exp(row_max - new_max)
        row_sum = row_sum * rescale + tl.sum(p, axis=1)
        v = tl.load(
            v_base + cols[:, None] * sv_n + dims[None, :] * sv_d,
            mask=(cols[:, None] < k_len) & d_mask[None, :],
            other=0.0,
        )
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
    grid = (batch * heads, triton.cdiv(q_len, BLOCK_M))
    if out.numel() > 0:
        _flash_attention_kernel[grid](
            q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            heads, q_len, k_len, head_dim, sm_scale,
            IS_CAUSAL=bool(is_causal),
            PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        )  # fmt: skip
    return out.view((*query.shape[:-1], head_dim))
