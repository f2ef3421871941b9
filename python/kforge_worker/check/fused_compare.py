"""The judge's comparison of one output in a single pass over it (one Triton kernel).

compare.py's torch path computes the same reductions with some 50 elementwise float64 kernels
per 16 Mi elements (compare_tensors, then output_spread): on a GPU, a quarter of KernelBench's
wall time went there. Here each element of both tensors is read once, everything the two
need is reduced per block, and torch reduces the blocks' partials: `OutputStats`.

The rules are compare.py's, operation for operation in float64 (the tolerance's
`atol + rtol * |expected|` unfused, as torch computes it), and compare.verify_fused checks the
kernel against the torch path on `verification_cases` (NaN, infinities, signed zeros,
subnormals, tolerance boundaries, integers) before a process first trusts it for a dtype on a
device: a difference turns the fused path off there, and the job's result says why.

Also here: `digest_blocks`, compare.bits_digest's two sums of a tensor's words in one pass
(checked the same way: compare.digest_kernel_ready). The zygote compiles both (`precompile`).

Import this module only after TRITON_INTERPRET has its final value (see warm_kernels.py).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kforge_worker.check.bits import bits_view

# 8 elements per thread: float64 temporaries of 16 would spill registers.
BLOCK = 1024
NUM_WARPS = 4
# Elements per launch: at most 64 Ki blocks (6 MiB of partials).
LAUNCH_ELEMENTS = BLOCK << 16

# Torch dtypes the kernel reads (bool as uint8); any other dtype takes the torch path.
SUPPORTED = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
)


# A Triton kernel: Triton has no types, and its parameters stay unannotated (Triton reads
# annotations as part of the kernel's signature).
@triton.jit  # type: ignore[untyped-decorator]
def compare_blocks(  # type: ignore[no-untyped-def]  # noqa: ANN201, PLR0917
    actual_ptr,  # noqa: ANN001
    expected_ptr,  # noqa: ANN001
    consts_ptr,  # noqa: ANN001  float64 [atol, rtol, inf, the actual output's first element]
    numel_ptr,  # noqa: ANN001  int64 [elements in this launch]
    ints_ptr,  # noqa: ANN001  int64 [blocks, 6]: see _INT_REDUCTIONS
    floats_ptr,  # noqa: ANN001  float64 [blocks, 6]: see _FLOAT_REDUCTIONS
    EXACT: tl.constexpr,
    BF16: tl.constexpr,  # the tensors are bfloat16, passed as int16 bits
    BLOCK: tl.constexpr,
):
    # Sizes and constants come through memory, not as scalar arguments: Triton specialises
    # on an integer argument's value (divisible by 16 or not), and floats would be fp32.
    pid = tl.program_id(0)
    n = tl.load(numel_ptr)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < n
    a_raw = tl.load(actual_ptr + offs, mask=inb, other=0)
    b_raw = tl.load(expected_ptr + offs, mask=inb, other=0)
    atol = tl.load(consts_ptr)
    rtol = tl.load(consts_ptr + 1)
    inf = tl.load(consts_ptr + 2)
    first_actual = tl.load(consts_ptr + 3)
    if BF16:
        # bfloat16 is float32's upper half: widened by a shift, exactly (subnormals too,
        # which Triton's interpreter's own conversion flushes).
        a = ((a_raw.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True).to(tl.float64)
        b = ((b_raw.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True).to(tl.float64)
    else:
        a = a_raw.to(tl.float64)
        b = b_raw.to(tl.float64)
    diff = tl.abs(a - b)
    # Ordered comparisons: false for NaN, so finite means neither NaN nor an infinity.
    both_finite = (tl.abs(a) < inf) & (tl.abs(b) < inf) & inb
    b_abs = tl.abs(b)
    if EXACT:
        close = a_raw == b_raw
    else:
        within = diff <= atol + rtol * b_abs
        both_nan = (a != a) & (b != b)  # noqa: PLR0124  NaN is the value unequal to itself
        close = tl.where(both_finite, within, (a == b) | both_nan)
    mismatch = (close == 0) & inb
    # compare_tensors' reductions
    mismatches = tl.sum(mismatch.to(tl.int64), axis=0)
    first = tl.min(tl.where(mismatch, offs, n), axis=0)
    nonfinite_mismatch = tl.max((mismatch & (both_finite == 0)).to(tl.int64), axis=0)
    finite_diff = tl.where(both_finite, diff, 0.0)
    max_abs = tl.max(finite_diff, axis=0)
    nonzero = both_finite & (b != 0.0)
    max_rel = tl.max(tl.where(nonzero, finite_diff / tl.where(nonzero, b_abs, 1.0), 0.0), axis=0)
    # output_spread's reductions, over the elements whose expected value is finite
    w_finite = (b_abs < inf) & inb
    finite = tl.sum(w_finite.to(tl.int64), axis=0)
    low = tl.min(tl.where(w_finite, b, inf), axis=0)
    high = tl.max(tl.where(w_finite, b, -inf), axis=0)
    max_expected = tl.max(tl.where(w_finite, b_abs, 0.0), axis=0)
    admits_zero = b_abs <= atol + rtol * b_abs
    zero_bad = tl.max((w_finite & (admits_zero == 0)).to(tl.int64), axis=0)
    not_nan = diff == diff  # noqa: PLR0124
    max_error = tl.max(tl.where(w_finite & not_nan, diff, 0.0), axis=0)
    nonconstant = tl.max(((a != first_actual) & inb).to(tl.int64), axis=0)

    ints = ints_ptr + pid * 6
    tl.store(ints, mismatches)
    tl.store(ints + 1, first)
    tl.store(ints + 2, nonfinite_mismatch)
    tl.store(ints + 3, finite)
    tl.store(ints + 4, zero_bad)
    tl.store(ints + 5, nonconstant)
    floats = floats_ptr + pid * 6
    tl.store(floats, max_abs)
    tl.store(floats + 1, max_rel)
    tl.store(floats + 2, low)
    tl.store(floats + 3, high)
    tl.store(floats + 4, max_expected)
    tl.store(floats + 5, max_error)


# A Triton kernel: Triton has no types, and its parameters stay unannotated (Triton reads
# annotations as part of the kernel's signature).
@triton.jit  # type: ignore[untyped-decorator]
def digest_blocks(  # type: ignore[no-untyped-def]  # noqa: ANN201
    words_ptr,  # noqa: ANN001  int32 words
    meta_ptr,  # noqa: ANN001  int64 [words in this launch, position of the first in the tensor]
    sums_ptr,  # noqa: ANN001  int64 [blocks, 2]: plain and weighted sums (wrapping)
    BLOCK: tl.constexpr,
):
    # compare.bits_digest's two sums: each word sign-extended to 64 bits, and each times the
    # odd weight 2 * position + 1; int64 arithmetic wraps, i.e. sums mod 2**64.
    pid = tl.program_id(0)
    n = tl.load(meta_ptr)
    first = tl.load(meta_ptr + 1)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < n
    words = tl.load(words_ptr + offs, mask=inb, other=0).to(tl.int64)
    weights = 2 * (first + offs) + 1
    tl.store(sums_ptr + pid * 2, tl.sum(words, axis=0))
    tl.store(sums_ptr + pid * 2 + 1, tl.sum(words * weights, axis=0))  # masked words are 0


def word_sums(words: torch.Tensor, first: int) -> tuple[int, int]:
    """The plain and weighted sums (mod 2**64) of contiguous int32 `words` whose first is word
    `first` of its tensor: digest_blocks, one synchronisation at the end."""
    device = words.device
    parts = []
    for begin in range(0, words.numel(), LAUNCH_ELEMENTS):
        length = min(LAUNCH_ELEMENTS, words.numel() - begin)
        blocks = triton.cdiv(length, BLOCK)
        meta = torch.tensor([length, first + begin], dtype=torch.int64, device=device)
        sums = torch.empty((blocks, 2), dtype=torch.int64, device=device)
        digest_blocks[(blocks,)](
            words[begin : begin + length], meta, sums, BLOCK=BLOCK, num_warps=NUM_WARPS
        )
        parts.append(sums.sum(0))
    if not parts:
        return 0, 0
    plain, weighted = torch.stack(parts).sum(0).tolist()
    mask = (1 << 64) - 1
    return plain & mask, weighted & mask


@dataclass(frozen=True)
class OutputStats:
    """Everything compare_tensors and output_spread reduce, for one pair of same-shaped,
    same-dtype tensors."""

    mismatches: int
    first_mismatch: int  # flat index; numel when there is none
    nonfinite_mismatch: bool  # a mismatch where an element is NaN or infinite
    max_abs: float  # largest |actual - expected| where both are finite
    max_rel: float  # ... divided by |expected|, where expected is also non-zero
    finite: int  # expected elements that are finite
    low: float  # smallest finite expected value (inf when none)
    high: float  # largest (-inf when none)
    max_expected: float  # largest finite |expected|
    within_zero: bool  # every finite |expected| <= atol + rtol * |expected|
    max_error: float  # largest non-NaN |actual - expected| where expected is finite
    constant: bool  # every actual element equals the first (NaN never does)


def output_stats(
    expected: torch.Tensor, actual: torch.Tensor, atol: float, rtol: float, exact: bool
) -> OutputStats:
    """The stats of `actual` against `expected` (same shape, dtype and device; any layout),
    one kernel launch per LAUNCH_ELEMENTS, one synchronisation at the end."""
    want, got = _flat(expected), _flat(actual)
    numel, device = want.numel(), want.device
    bf16 = expected.dtype == torch.bfloat16
    if numel == 0:
        return OutputStats(0, 0, False, 0.0, 0.0, 0, math.inf, -math.inf, 0.0, True, 0.0, True)
    consts = torch.tensor([atol, rtol, math.inf, 0.0], dtype=torch.float64, device=device)
    consts[3] = actual.detach()[(0,) * actual.dim()].to(torch.float64)
    ints_parts: list[torch.Tensor] = []
    floats_parts: list[torch.Tensor] = []
    for begin in range(0, numel, LAUNCH_ELEMENTS):
        length = min(LAUNCH_ELEMENTS, numel - begin)
        blocks = triton.cdiv(length, BLOCK)
        sizes = torch.tensor([length], dtype=torch.int64, device=device)
        ints = torch.empty((blocks, 6), dtype=torch.int64, device=device)
        floats = torch.empty((blocks, 6), dtype=torch.float64, device=device)
        compare_blocks[(blocks,)](
            got[begin : begin + length],
            want[begin : begin + length],
            consts,
            sizes,
            ints,
            floats,
            EXACT=exact,
            BF16=bf16,
            BLOCK=BLOCK,
            **LAUNCH_OPTIONS,
        )
        ints[:, 1] = torch.where(ints[:, 1] < length, ints[:, 1] + begin, numel)
        ints_parts.append(_reduce(ints, _INT_REDUCTIONS))
        floats_parts.append(_reduce(floats, _FLOAT_REDUCTIONS))
    ints_done = _reduce(torch.stack(ints_parts), _INT_REDUCTIONS).tolist()
    floats_done = _reduce(torch.stack(floats_parts), _FLOAT_REDUCTIONS).tolist()
    mismatches, first, nonfinite, finite, zero_bad, nonconstant = ints_done
    max_abs, max_rel, low, high, max_expected, max_error = floats_done
    return OutputStats(
        mismatches=int(mismatches),
        first_mismatch=int(first),
        nonfinite_mismatch=bool(nonfinite),
        max_abs=max_abs,
        max_rel=max_rel,
        finite=int(finite),
        low=low,
        high=high,
        max_expected=max_expected,
        within_zero=not zero_bad,
        max_error=max_error,
        constant=not nonconstant,
    )


# Launch options; part of the compiled kernel's key, so precompile() uses them too. The
# tolerance's multiply-add stays two roundings, as torch computes it (no FMA).
LAUNCH_OPTIONS = {"num_warps": NUM_WARPS, "enable_fp_fusion": False}


# How each column of the partials is reduced over blocks (and over launches):
# ints [mismatches, first, nonfinite_mismatch, finite, zero_bad, nonconstant],
# floats [max_abs, max_rel, low, high, max_expected, max_error].
_INT_REDUCTIONS = ("sum", "min", "max", "sum", "max", "max")
_FLOAT_REDUCTIONS = ("max", "max", "min", "max", "max", "max")


def _reduce(rows: torch.Tensor, how: tuple[str, ...]) -> torch.Tensor:
    return torch.stack([getattr(rows[:, i], op)() for i, op in enumerate(how)])


def _flat(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    if flat.data_ptr() % 16:
        # A view at an odd offset: copied, since an unaligned pointer is another
        # specialisation of the kernel (a compile, ~1 s, in the job) than the zygote's.
        flat = flat.clone()
    view = _VIEWS.get(flat.dtype)
    return flat if view is None else flat.view(view)


# How the kernel reads a dtype Triton does not take as it is (or as the kernel wants it).
_VIEWS = {torch.bool: torch.uint8, torch.bfloat16: torch.int16}


# What verification_cases() builds from: floats a kernel must tell apart or match, in float64
# (cast to the dtype under test: what overflows becomes an infinity, as in a kernel's output).
_EDGE_VALUES = (
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1e-3,
    -2.5,
    100.0,
    1e4,
    6.0e4,
    1e-30,
    3.0e38,
    1.0e300,
    math.inf,
    -math.inf,
    math.nan,
)


def verification_cases(
    dtype: torch.dtype, exact: bool, device: torch.device
) -> list[tuple[str, torch.Tensor, torch.Tensor, float, float]]:
    """(name, expected, actual, atol, rtol) pairs on which the fused kernel must give exactly
    what the torch path gives: every pair of edge values, each side of the tolerance's
    boundary, a mismatch only in the last of several blocks, a constant output, and integer
    extremes. Deterministic (a fixed seed)."""
    gen = torch.Generator().manual_seed(1234)
    cases: list[tuple[str, torch.Tensor, torch.Tensor, float, float]] = []
    size = 3 * BLOCK + 17  # four blocks, the last partial

    def add(name: str, want: torch.Tensor, got: torch.Tensor, atol: float, rtol: float) -> None:
        cases.append((name, want.to(device), got.to(device), atol, rtol))

    if dtype.is_floating_point:
        pairs = torch.tensor(
            [(w, g) for w in _EDGE_VALUES for g in _EDGE_VALUES], dtype=torch.float64
        ).to(dtype)
        centre = torch.tensor([1.0, 100.0, -3.0, 0.25, 0.0, -0.0, 1e-3, 7.5], dtype=torch.float64)
        for atol, rtol in ((1e-2, 1e-2), (1e-5, 0.3), (0.0, 0.0)):
            want, got = _boundary(centre, atol + rtol * centre.abs(), dtype)
            add(
                f"edge pairs and the tolerance's boundary, atol={atol} rtol={rtol}",
                torch.cat([pairs[:, 0], want]),
                torch.cat([pairs[:, 1], got]),
                atol,
                rtol,
            )
        base = torch.randn(size, generator=gen, dtype=torch.float64).to(dtype)
        late = base.clone()
        late[size - 5] = late[size - 5].to(torch.float64) * 1.5 + 1.0
        add("a mismatch in the last block only", base, late, 1e-2, 1e-2)
        add("a constant output", base, torch.full_like(base, 0.5), 1e-2, 1e-2)
        add("a NaN output", base, torch.full_like(base, math.nan), 1e-2, 1e-2)
        nothing_finite = torch.full((9,), math.nan, dtype=dtype)
        add("no finite expected value", nothing_finite, pairs[:9, 1], 0.1, 0.1)
        return cases
    if dtype == torch.bool:
        want = torch.randint(0, 2, (size,), generator=gen).to(torch.bool)
        got = want.clone()
        got[size - 3] = ~got[size - 3]
        add("a mismatch in the last block only", want, got, 0.0, 0.0)
        add("equal", want, want.clone(), 0.0, 0.0)
        return cases
    info = torch.iinfo(dtype)
    want = torch.randint(max(info.min, -1000), min(info.max, 1000), (size,), generator=gen)
    want = want.to(dtype)
    got = want.clone()
    got[size - 3] += 1
    got[2 * BLOCK + 1] -= 2
    extremes = torch.tensor([info.min, info.max, 0, -1 if info.min < 0 else 1], dtype=dtype)
    flipped = torch.tensor([info.max, info.min, 0, 0], dtype=dtype)
    add("equal", want, want.clone(), 0.0, 0.0)
    for atol, rtol in ((0.0, 0.0),) if exact else ((1.0, 0.0), (0.5, 0.25), (1.0, 1.0)):
        add(
            f"mismatches in the last blocks and extremes, atol={atol} rtol={rtol}",
            torch.cat([want, extremes]),
            torch.cat([got, flipped]),
            atol,
            rtol,
        )
    return cases


def _boundary(
    centre: torch.Tensor, bound: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Expected values and actual values on, just inside and just outside `centre ± bound`
    (in the dtype: the rounded boundary and its neighbours, one unit in the last place)."""
    want = centre.to(dtype)
    wants, gots = [], []
    for sign in (1.0, -1.0):
        edge = (want.to(torch.float64) + sign * bound).to(dtype)
        bits = bits_of(edge)
        for step in (-1, 0, 1):
            wants.append(want)
            gots.append(from_bits(bits + step, dtype))
    return torch.cat(wants), torch.cat(gots)


def bits_of(t: torch.Tensor) -> torch.Tensor:
    return _bits(t).to(torch.int64)


def from_bits(bits: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    width = _bits(torch.empty(0, dtype=dtype)).dtype
    return bits.to(width).view(dtype)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """bits_view of a dtype the verification cases use (all have one)."""
    view = bits_view(t)
    if view is None:
        raise TypeError(f"{t.dtype} has no integer view")
    return view


# The variants the zygote compiles before any job: (dtype, exact) of most outputs. Others
# compile in the job that first meets them (a second or so, once per job).
PRECOMPILED = (
    (torch.float32, False),
    (torch.float16, False),
    (torch.bfloat16, False),
    (torch.float64, False),
    (torch.int64, True),
    (torch.int32, True),
    (torch.bool, True),
)


def precompile(arch: int) -> list[object]:
    """Compiles PRECOMPILED and the digest kernel for a CUDA target into Triton's cache
    without a GPU, under the keys launches of output_stats() and word_sums() look up. The
    variants compile side by side (threads: Triton's compiles release the GIL in their passes
    and run ptxas as a process; its own async mode does the same); the threads are gone
    before the zygote forks. Returns the compiled kernels (their launchers are built by
    warmup.py)."""
    from concurrent.futures import ThreadPoolExecutor

    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)

    def compare_variant(variant: tuple[torch.dtype, bool]) -> object:
        dtype, exact = variant
        view = _VIEWS.get(dtype, dtype)
        kinds = (view, view, torch.float64, torch.int64, torch.int64, torch.float64)
        options = {"EXACT": exact, "BF16": dtype == torch.bfloat16, "BLOCK": BLOCK}
        return _compile_as_launched(
            compare_blocks, backend, target, kinds, {**options, **LAUNCH_OPTIONS}
        )

    def digest() -> object:
        kinds = (torch.int32, torch.int64, torch.int64)
        options = {"BLOCK": BLOCK, "num_warps": NUM_WARPS}
        return _compile_as_launched(digest_blocks, backend, target, kinds, options)

    workers = max(1, min(len(PRECOMPILED) + 1, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="fused-compile") as pool:
        digest_kernel = pool.submit(digest)
        return [*pool.map(compare_variant, PRECOMPILED), digest_kernel.result()]


def _compile_as_launched(
    fn: object,
    backend: object,
    target: object,
    kinds: tuple[torch.dtype, ...],
    kwargs: dict[str, Any],
) -> object:
    """triton.compile of `fn` for tensors of `kinds` (aligned, as torch allocates them) and
    `kwargs`, bound and specialised as JITFunction.run (Triton 3.6) would for such a launch,
    so the cache entry is the one that launch looks up."""
    from triton import knobs
    from triton.compiler import ASTSource
    from triton.runtime.jit import MockTensor, create_function_from_signature

    kwargs = {
        **kwargs,
        # what JITFunction.run adds before binding
        "debug": fn.debug or knobs.runtime.debug,  # type: ignore[attr-defined]
        "instrumentation_mode": knobs.compilation.instrumentation_mode,
    }
    binder = create_function_from_signature(fn.signature, fn.params, backend)  # type: ignore[attr-defined]
    bound, specialization, options = binder(*[MockTensor(k) for k in kinds], **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(  # type: ignore[attr-defined]
        backend, kwargs, bound, specialization, options
    )
    source = ASTSource(fn, signature, constexprs, attrs)
    return triton.compile(source, target=target, options=options.__dict__)
