"""Output comparison: dtype-aware tolerances, strict NaN/Inf rules, actionable reports.

An element passes when |actual - expected| <= atol + rtol * |expected| (both finite), or
when both are NaN, or both are the same infinity. NaN is never a wildcard. Integer and bool
outputs are compared exactly unless the request overrides the tolerance (bool: always
exact). Outputs must be plain dense tensors (`type(x) is torch.Tensor`, strided, on the
expected device): lazy subclasses and placeholders fail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kforge_worker.check.bits import bits_view

# fused_compare is imported in the functions that use it, on purpose: its @triton.jit decides
# when the module is imported whether its kernels are compiled or interpreted, so it must not
# be imported before TRITON_INTERPRET has its final value (warm_kernels.py).

# fp32/fp16/bf16 at 1e-2: the kernel evaluation server's and KernelBench's default.
_FLOAT_TOLERANCE: dict[torch.dtype, float] = {
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
    torch.float32: 1e-2,
    torch.float64: 1e-6,
}


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


def resolve_tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None) -> Tolerance:
    """The dtype's default tolerance (fp32/fp16/bf16 1e-2, fp64 1e-6, integers exact), with
    the request's overrides applied (never to bool)."""
    if dtype == torch.bool:
        return Tolerance(0.0, 0.0)
    default = _FLOAT_TOLERANCE.get(dtype, 1e-2 if dtype.is_floating_point else 0.0)
    return Tolerance(default if atol is None else atol, default if rtol is None else rtol)


@dataclass(frozen=True)
class Mismatch:
    index: list[int]
    expected: Any
    actual: Any


@dataclass(frozen=True)
class TensorComparison:
    """How one output compares with its expected value."""

    name: str
    passed: bool
    reason: str  # why it failed before element comparison ("" if it got that far)
    atol: float
    rtol: float
    numel: int = 0
    mismatch_count: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0  # over elements whose expected value is non-zero
    first_mismatch: Mismatch | None = None
    # The fused comparison's output_spread() of the same pair, computed in the same pass
    # (None from the torch path: call output_spread()).
    spread: OutputSpread | None = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        """One actionable sentence, e.g. for validation_error."""
        if self.reason:
            return f"output '{self.name}': {self.reason}"
        if self.passed:
            return f"output '{self.name}': all {self.numel} elements match"
        text = (
            f"output '{self.name}': {self.mismatch_count} of {self.numel} elements differ "
            f"(max abs error {_fmt(self.max_abs_error)}, max rel error {_fmt(self.max_rel_error)}"
        )
        if self.first_mismatch is not None:
            m = self.first_mismatch
            text += f"; first at {m.index}: expected {_fmt(m.expected)}, got {_fmt(m.actual)}"
        return text + f"; atol={_fmt(self.atol)}, rtol={_fmt(self.rtol)})"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def plain_tensor_problem(value: Any, device: torch.device) -> str | None:
    """Why `value` is not a plain dense tensor on `device`, or None if it is."""
    if not isinstance(value, torch.Tensor):
        return f"is a {type(value).__name__}, expected a torch.Tensor"
    if type(value) is not torch.Tensor:
        return f"is a {type(value).__qualname__} (a Tensor subclass); return a plain torch.Tensor"
    if value.layout != torch.strided:
        return f"has layout {value.layout}; return a dense (strided) tensor"
    if value.is_meta or value.device.type == "meta":
        return "is a meta tensor (no data)"
    if value.device != device:
        return f"is on {value.device}, expected {device}"
    return None


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads included); used to detect mutated inputs."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.numel() == 0:
        return True
    bits_a, bits_b = bits_view(a.contiguous()), bits_view(b.contiguous())
    if bits_a is None or bits_b is None:
        return bool(torch.equal(a, b))
    return bool(torch.equal(bits_a, bits_b))


@dataclass(frozen=True)
class BitsDigest:
    """What same_bits() compares, kept in a few integers: a tensor's layout and two sums of
    its 32-bit words (plain, and each word times an odd weight of its position, mod 2**64),
    so any one changed word changes it. For an input too large to copy: taken before a call
    and again after it, it tells whether the call changed the input without a second copy
    of it in device memory."""

    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    plain: int
    weighted: int


DIGEST_CHUNK_WORDS = 1 << 24  # 64 MiB of words per pass: ~0.4 GiB of int64 temporaries


def bits_digest(t: torch.Tensor) -> BitsDigest:
    """`t`'s BitsDigest, computed on its device in chunks (a contiguous tensor is never
    copied whole; a non-contiguous one is taken a slice of its first dimension at a time)."""
    plain, weighted, offset = 0, 0, 0
    mask = (1 << 64) - 1
    for part in _contiguous_parts(t.detach()):
        raw = part.reshape(-1).view(torch.uint8)
        words = raw[: raw.numel() // 4 * 4].view(torch.int32)
        tail = raw[words.numel() * 4 :]
        chunks = [tail]
        if words.numel() and words.data_ptr() % 16 == 0 and digest_kernel_ready(words.device):
            from kforge_worker.check import fused_compare

            more_plain, more_weighted = fused_compare.word_sums(words, offset)
            plain, weighted = (plain + more_plain) & mask, (weighted + more_weighted) & mask
            offset += words.numel()
        else:
            chunks = [*torch.split(words, DIGEST_CHUNK_WORDS), tail]
        for chunk in chunks:
            if chunk.numel() == 0:
                continue
            more_plain, more_weighted = _word_sums_torch(chunk, offset)
            plain, weighted = (plain + more_plain) & mask, (weighted + more_weighted) & mask
            offset += chunk.numel()
    return BitsDigest(str(t.dtype), tuple(t.shape), tuple(t.stride()), plain, weighted)


def _word_sums_torch(chunk: torch.Tensor, offset: int) -> tuple[int, int]:
    """bits_digest's two sums over one chunk of words (or tail bytes) at `offset`."""
    wide = chunk.to(torch.int64)
    odd = torch.arange(2 * offset + 1, 2 * (offset + wide.numel()), 2, device=wide.device)
    return int(wide.sum()), int((wide * odd).sum())


# Whether fused_compare.word_sums computes bits_digest's sums on a device in this process:
# checked once against the torch path (digest_kernel_ready).
_DIGEST_KERNEL: dict[str, bool] = {}


def digest_kernel_ready(device: torch.device) -> bool:
    """True where bits_digest sums a tensor's words with one kernel pass (a CUDA device, the
    kernel giving the torch path's sums on words of every sign, lengths across blocks and a
    position offset); the torch path (two synchronisations per 64 MiB) otherwise."""
    if device.type != "cuda":
        return False
    key = str(device)
    if key not in _DIGEST_KERNEL:
        _DIGEST_KERNEL[key] = not digest_differences(device)
    return _DIGEST_KERNEL[key]


def digest_differences(device: torch.device) -> list[str]:
    """Where fused_compare.word_sums differs from the torch path (empty: nowhere)."""
    from kforge_worker.check import fused_compare

    gen = torch.Generator().manual_seed(99)
    info = torch.iinfo(torch.int32)
    problems = []
    try:
        for length, offset in ((1, 0), (fused_compare.BLOCK * 3 + 7, 5), (4096, (1 << 33) + 1)):
            words = torch.randint(info.min, info.max, (length,), generator=gen, dtype=torch.int32)
            words[:2] = torch.tensor([info.min, info.max], dtype=torch.int32)[: min(2, length)]
            words = words.to(device)
            fused = fused_compare.word_sums(words, offset)
            mask = (1 << 64) - 1
            plain, weighted = _word_sums_torch(words, offset)
            if fused != (plain & mask, weighted & mask):
                problems.append(
                    f"{length} words at {offset}: kernel {fused}, torch {(plain, weighted)}"
                )
    except Exception as e:  # a kernel that cannot run here is not one to use
        problems.append(f"the digest kernel failed: {e}")
    return problems


def _contiguous_parts(t: torch.Tensor) -> list[torch.Tensor]:
    if t.is_contiguous() or t.dim() == 0:
        return [t.contiguous()]
    return [p for row in t.unbind(0) for p in _contiguous_parts(row)]


def unravel_index(flat_index: int, shape: torch.Size) -> list[int]:
    index = []
    for dim in reversed(shape):
        index.append(flat_index % dim)
        flat_index //= dim
    return list(reversed(index))


def _fail(name: str, tol: Tolerance, reason: str, numel: int = 0) -> TensorComparison:
    return TensorComparison(name, False, reason, tol.atol, tol.rtol, numel=numel)


def compare_tensors(
    name: str, expected: torch.Tensor, actual: Any, tol: Tolerance
) -> TensorComparison:
    """Compares one output with its expected value (expected comes from trusted code)."""
    problem = plain_tensor_problem(actual, expected.device)
    if problem is not None:
        return _fail(name, tol, problem, expected.numel())
    if actual.dtype != expected.dtype:
        return _fail(
            name,
            tol,
            f"dtype mismatch: expected {_dtype(expected.dtype)}, got {_dtype(actual.dtype)}",
            expected.numel(),
        )
    if actual.shape != expected.shape:
        return _fail(
            name,
            tol,
            f"shape mismatch: expected {list(expected.shape)}, got {list(actual.shape)}",
            expected.numel(),
        )
    if expected.is_complex():
        return _fail(name, tol, f"unsupported dtype {_dtype(expected.dtype)}", expected.numel())
    numel = expected.numel()
    if numel == 0:
        return TensorComparison(name, True, "", tol.atol, tol.rtol)
    exact = tol.atol == 0.0 and tol.rtol == 0.0 and not expected.dtype.is_floating_point
    if fused_ready(expected.device, expected.dtype, exact):
        return compare_fused(name, expected, actual, tol, exact)
    return compare_torch(name, expected, actual, tol, exact)


def compare_torch(
    name: str, expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance, exact: bool
) -> TensorComparison:
    """compare_tensors' element comparison with torch ops (any device), once the dtypes and
    shapes are known to agree and the tensors are not empty."""
    numel = expected.numel()
    flat_actual, flat_expected = actual.detach().reshape(-1), expected.detach().reshape(-1)
    device = expected.device
    with torch.no_grad():
        # In chunks: float64 copies and masks of a whole multi-GB output would need several
        # times its size in device memory (KernelBench level 1 has 6 GB outputs). The totals
        # stay on the device until the end: one synchronisation per output, not several per
        # chunk (a 6 GB output is 100 chunks).
        count_t = torch.zeros((), dtype=torch.int64, device=device)
        max_abs_t = torch.zeros((), dtype=torch.float64, device=device)
        max_rel_t = torch.zeros((), dtype=torch.float64, device=device)
        nonfinite_t = torch.zeros((), dtype=torch.bool, device=device)
        for begin in range(0, numel, _CHUNK):
            a = flat_actual[begin : begin + _CHUNK]
            b = flat_expected[begin : begin + _CHUNK]
            mismatch, diff, both_finite, b64 = _mismatch(a, b, tol, exact)
            count_t += mismatch.sum()
            nonfinite_t |= (mismatch & ~both_finite).any()
            finite_diff = torch.where(both_finite, diff, 0.0)
            max_abs_t = torch.maximum(max_abs_t, finite_diff.max())
            nonzero = both_finite & (b64 != 0)
            rel = torch.where(nonzero, finite_diff / b64.abs(), 0.0)
            max_rel_t = torch.maximum(max_rel_t, rel.max())
        count = int(count_t.item())
        max_abs, max_rel = float(max_abs_t.item()), float(max_rel_t.item())
        if count == 0:
            return TensorComparison(name, True, "", tol.atol, tol.rtol, numel, 0, max_abs, max_rel)
        first = _first_mismatch(flat_actual, flat_expected, tol, exact)
        if bool(nonfinite_t.item()):
            max_abs = max_rel = math.inf
    first_mismatch = Mismatch(
        index=unravel_index(first, expected.shape),
        expected=flat_expected[first].item(),
        actual=flat_actual[first].item(),
    )
    return TensorComparison(
        name, False, "", tol.atol, tol.rtol, numel, count, max_abs, max_rel, first_mismatch
    )


def compare_fused(
    name: str, expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance, exact: bool
) -> TensorComparison:
    """compare_torch's result, and output_spread's, from one pass of fused_compare's kernel
    (a CUDA tensor of a dtype it supports; the caller checked)."""
    from kforge_worker.check import fused_compare

    stats = fused_compare.output_stats(expected, actual, tol.atol, tol.rtol, exact)
    numel = expected.numel()
    spread = OutputSpread(
        stats.finite,
        stats.low,
        stats.high,
        stats.max_expected,
        stats.within_zero,
        stats.max_error,
        stats.constant,
    )
    if stats.mismatches == 0:
        return TensorComparison(
            name, True, "", tol.atol, tol.rtol, numel, 0, stats.max_abs, stats.max_rel, None, spread
        )
    index = unravel_index(stats.first_mismatch, expected.shape)
    at = tuple(index)
    first = Mismatch(index, expected.detach()[at].item(), actual.detach()[at].item())
    max_abs, max_rel = stats.max_abs, stats.max_rel
    if stats.nonfinite_mismatch:
        max_abs = max_rel = math.inf
    count = stats.mismatches
    return TensorComparison(
        name, False, "", tol.atol, tol.rtol, numel, count, max_abs, max_rel, first, spread
    )


# Whether the fused kernel judges a (device, dtype, exact) in this process: decided by
# verify_fused() at its first use, False where it disagreed with the torch path (and
# FUSED_DISAGREEMENTS says on what). The zygote compiles the common ones (warmup.py).
_FUSED: dict[tuple[str, torch.dtype, bool], bool] = {}
FUSED_DISAGREEMENTS: dict[str, str] = {}


def fused_ready(device: torch.device, dtype: torch.dtype, exact: bool) -> bool:
    """True where compare_tensors uses the fused kernel: a CUDA device, a dtype the kernel
    reads, and the kernel verified against the torch path on this device."""
    if device.type != "cuda":
        return False
    from kforge_worker.check import fused_compare

    if dtype not in fused_compare.SUPPORTED:
        return False
    key = (str(device), dtype, exact)
    ready = _FUSED.get(key)
    if ready is None:
        problems = verify_fused(device, dtype, exact)
        ready = not problems
        _FUSED[key] = ready
        if problems:
            FUSED_DISAGREEMENTS[f"{device} {_dtype(dtype)} exact={exact}"] = problems[0]
    return ready


def verify_fused(device: torch.device, dtype: torch.dtype, exact: bool) -> list[str]:
    """Where the fused kernel's comparison differs from the torch path's on
    fused_compare.verification_cases (empty: none). A kernel that fails to compile or
    launch is one difference."""
    from kforge_worker.check import fused_compare

    problems = []
    try:
        for case, want, got, atol, rtol in fused_compare.verification_cases(dtype, exact, device):
            tol = Tolerance(atol, rtol)
            fused = compare_fused("v", want, got, tol, exact)
            torch_result = compare_torch("v", want, got, tol, exact)
            differs = _differences(fused, torch_result)
            if dtype.is_floating_point:
                differs += _differences(fused.spread, output_spread(want, got, tol))
            if differs:
                problems.append(f"{_dtype(dtype)}, {case}: " + "; ".join(differs))
    except Exception as e:  # a kernel that cannot run here is not one to trust
        problems.append(f"{_dtype(dtype)}: the fused kernel failed: {e}")
    return problems


def _differences(fused: Any, reference: Any) -> list[str]:
    """Fields of two comparisons (or spreads) that differ, NaN equal to NaN."""
    out = []
    for key, want in vars(reference).items():
        if key == "spread":
            continue
        got = getattr(fused, key)
        if isinstance(want, Mismatch) and isinstance(got, Mismatch):
            same = want.index == got.index and _same(want.expected, got.expected)
            same = same and _same(want.actual, got.actual)
        else:
            same = _same(want, got)
        if not same:
            out.append(f"{key}: fused {got!r}, torch {want!r}")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


# Elements compared at once (16 Mi: a few 128 MB float64 temporaries).
_CHUNK = 1 << 24


def _mismatch(
    actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, exact: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For one chunk: which elements mismatch, |actual - expected| and where both are finite
    (in float64), and expected in float64."""
    a, b = actual.to(torch.float64), expected.to(torch.float64)
    diff = (a - b).abs()
    both_finite = torch.isfinite(a) & torch.isfinite(b)
    if exact:
        close = actual == expected
    else:
        within = diff <= tol.atol + tol.rtol * b.abs()
        both_nan = torch.isnan(a) & torch.isnan(b)
        close = torch.where(both_finite, within, (a == b) | both_nan)
    return ~close, diff, both_finite, b


def _first_mismatch(
    actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, exact: bool
) -> int:
    """The flat index of the first mismatching element (the caller knows there is one)."""
    for begin in range(0, expected.numel(), _CHUNK):
        mismatch = _mismatch(
            actual[begin : begin + _CHUNK], expected[begin : begin + _CHUNK], tol, exact
        )[0]
        if bool(mismatch.any().item()):
            return begin + int(torch.argmax(mismatch.to(torch.uint8)).item())
    raise AssertionError("a mismatch was counted and not found again")


@dataclass(frozen=True)
class OutputSpread:
    """Reductions over the elements where the expected output is finite (honesty checks)."""

    finite: int  # how many expected elements are finite
    low: float  # smallest finite expected value
    high: float  # largest
    max_abs: float  # largest |expected|
    within_zero: bool  # every |expected| <= atol + rtol * |expected|: zeros would pass
    max_error: float  # largest |actual - expected|
    actual_constant: bool  # every actual element equals the first (NaN never does)


def output_spread(expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance) -> OutputSpread:
    """`OutputSpread` of two same-shaped floating-point outputs, in float64, chunk by chunk (the
    whole tensors' float64 copies and masks would need several times their size)."""
    want = expected.detach().reshape(-1)
    got = actual.detach().to(want.device).reshape(-1)
    device = want.device
    first = got[:1].to(torch.float64)
    f64 = torch.float64
    finite = torch.zeros((), dtype=torch.int64, device=device)
    low = torch.full((), math.inf, dtype=f64, device=device)
    high = torch.full((), -math.inf, dtype=f64, device=device)
    max_abs = torch.zeros((), dtype=f64, device=device)
    max_error = torch.zeros((), dtype=f64, device=device)
    within_zero = torch.ones((), dtype=torch.bool, device=device)
    constant = torch.ones((), dtype=torch.bool, device=device)
    with torch.no_grad():
        # Chunk by chunk, the reductions kept on the device: one synchronisation at the end.
        for begin in range(0, want.numel(), _CHUNK):
            w = want[begin : begin + _CHUNK].to(torch.float64)
            g = got[begin : begin + _CHUNK].to(torch.float64)
            constant &= (g == first).all()
            mask = torch.isfinite(w)
            finite += mask.sum()
            low = torch.minimum(low, torch.where(mask, w, math.inf).min())
            high = torch.maximum(high, torch.where(mask, w, -math.inf).max())
            w_abs = w.abs()
            max_abs = torch.maximum(max_abs, torch.where(mask, w_abs, 0.0).max())
            within_zero &= (~mask | (w_abs <= tol.atol + tol.rtol * w_abs)).all()
            err = (g - w).abs()
            max_error = torch.maximum(max_error, torch.where(mask & ~err.isnan(), err, 0.0).max())
        values = torch.stack([finite.to(torch.float64), low, high, max_abs, max_error]).tolist()
        flags = torch.stack([within_zero, constant]).tolist()
    count, lo, hi, top, error = values
    return OutputSpread(int(count), lo, hi, top, bool(flags[0]), error, bool(flags[1]))


def finite_range(t: torch.Tensor) -> tuple[float, float] | None:
    """The smallest and largest finite element of a floating-point tensor (None when it has
    none): on a GPU from the fused kernel's pass, else chunk by chunk in its own dtype."""
    flat = t.detach().reshape(-1)
    if flat.numel() == 0:
        return None
    if fused_ready(flat.device, flat.dtype, False):
        from kforge_worker.check import fused_compare

        stats = fused_compare.output_stats(flat, flat, 0.0, 0.0, False)
        return None if stats.finite == 0 else (stats.low, stats.high)
    low = torch.full((), math.inf, dtype=torch.float64, device=flat.device)
    high = torch.full((), -math.inf, dtype=torch.float64, device=flat.device)
    with torch.no_grad():
        for begin in range(0, flat.numel(), _CHUNK):
            chunk = flat[begin : begin + _CHUNK]
            finite = torch.isfinite(chunk)
            low = torch.minimum(low, torch.where(finite, chunk, math.inf).min().double())
            high = torch.maximum(high, torch.where(finite, chunk, -math.inf).max().double())
    lo, hi = torch.stack([low, high]).tolist()
    return None if lo > hi else (lo, hi)


def clear_of_every_value(c: float, t: torch.Tensor, tol: Tolerance) -> bool:
    """Whether `c` is outside the tolerance of every finite element of `t`, compared element
    by element in float64, a chunk at a time."""
    flat = t.detach().reshape(-1)
    with torch.no_grad():
        for begin in range(0, flat.numel(), _CHUNK):
            w = flat[begin : begin + _CHUNK].to(torch.float64)
            outside = ~torch.isfinite(w) | ((w - c).abs() > tol.atol + tol.rtol * w.abs())
            if not bool(outside.all()):
                return False
    return True


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
