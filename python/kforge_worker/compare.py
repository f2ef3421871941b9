"""Output comparison: dtype-aware tolerances, strict NaN/Inf rules, actionable reports.

An element passes when |actual - expected| <= atol + rtol * |expected| (both finite), or
when both are NaN, or both are the same infinity. NaN is never a wildcard. Integer and bool
outputs are compared exactly unless the request overrides the tolerance (bool: always
exact). Outputs must be plain dense tensors (`type(x) is torch.Tensor`, strided, on the
expected device): lazy subclasses and placeholders fail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

# fp32/fp16/bf16 at 1e-2: the kernel evaluation server's and KernelBench's default.
_FLOAT_TOLERANCE: dict[torch.dtype, float] = {
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
    torch.float32: 1e-2,
    torch.float64: 1e-6,
}
_BITS_VIEW: dict[int, torch.dtype] = {
    1: torch.uint8,
    2: torch.int16,
    4: torch.int32,
    8: torch.int64,
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


def bits_view(t: torch.Tensor) -> torch.Tensor | None:
    """`t`'s elements as integers of the same size (a view), or None for complex dtypes and
    sizes with no such integer."""
    view = _BITS_VIEW.get(t.element_size())
    return None if view is None or t.is_complex() else t.view(view)


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
    flat_actual, flat_expected = actual.detach().reshape(-1), expected.detach().reshape(-1)
    count, max_abs, max_rel, first, nonfinite_mismatch = 0, 0.0, 0.0, -1, False
    with torch.no_grad():
        # In chunks: float64 copies and masks of a whole multi-GB output would need several
        # times its size in device memory (KernelBench level 1 has 6 GB outputs).
        for begin in range(0, numel, _CHUNK):
            part = _compare_chunk(
                flat_actual[begin : begin + _CHUNK],
                flat_expected[begin : begin + _CHUNK],
                tol,
                exact,
            )
            count += part.count
            max_abs, max_rel = max(max_abs, part.max_abs), max(max_rel, part.max_rel)
            nonfinite_mismatch = nonfinite_mismatch or part.nonfinite_mismatch
            if first < 0 and part.first >= 0:
                first = begin + part.first
    if count == 0:
        return TensorComparison(name, True, "", tol.atol, tol.rtol, numel, 0, max_abs, max_rel)
    if nonfinite_mismatch:
        max_abs = max_rel = math.inf
    first_mismatch = Mismatch(
        index=unravel_index(first, expected.shape),
        expected=flat_expected[first].item(),
        actual=flat_actual[first].item(),
    )
    return TensorComparison(
        name, False, "", tol.atol, tol.rtol, numel, count, max_abs, max_rel, first_mismatch
    )


# Elements compared at once (16 Mi: a few 128 MB float64 temporaries).
_CHUNK = 1 << 24


@dataclass(frozen=True)
class _ChunkComparison:
    count: int  # mismatching elements
    max_abs: float  # over elements finite in both
    max_rel: float  # over elements finite in both with a non-zero expected value
    first: int  # index of the first mismatch in the chunk, -1 when none
    nonfinite_mismatch: bool  # a mismatch where either side is not finite


def _compare_chunk(
    actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, exact: bool
) -> _ChunkComparison:
    a, b = actual.to(torch.float64), expected.to(torch.float64)
    diff = (a - b).abs()
    both_finite = torch.isfinite(a) & torch.isfinite(b)
    if exact:
        close = actual == expected
    else:
        within = diff <= tol.atol + tol.rtol * b.abs()
        both_nan = torch.isnan(a) & torch.isnan(b)
        close = torch.where(both_finite, within, (a == b) | both_nan)
    mismatch = ~close
    count = int(mismatch.sum().item())
    max_abs, max_rel = _max_errors(diff, b, both_finite)
    if count == 0:
        return _ChunkComparison(0, max_abs, max_rel, -1, False)
    nonfinite = bool((mismatch & ~both_finite).any().item())
    first = int(torch.argmax(mismatch.to(torch.uint8)).item())
    return _ChunkComparison(count, max_abs, max_rel, first, nonfinite)


def _max_errors(
    diff: torch.Tensor, expected: torch.Tensor, finite: torch.Tensor
) -> tuple[float, float]:
    if not bool(finite.any().item()):
        return 0.0, 0.0
    finite_diff = torch.where(finite, diff, torch.zeros_like(diff))
    max_abs = float(finite_diff.max().item())
    nonzero = finite & (expected != 0)
    if not bool(nonzero.any().item()):
        return max_abs, 0.0
    rel = torch.where(nonzero, finite_diff / expected.abs(), torch.zeros_like(diff))
    return max_abs, float(rel.max().item())


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
    first = got[:1].to(torch.float64)
    finite, low, high, max_abs, max_error = 0, math.inf, -math.inf, 0.0, 0.0
    within_zero, constant = True, True
    with torch.no_grad():
        for begin in range(0, want.numel(), _CHUNK):
            w = want[begin : begin + _CHUNK].to(torch.float64)
            g = got[begin : begin + _CHUNK].to(torch.float64)
            constant = constant and bool((g == first).all())
            mask = torch.isfinite(w)
            count = int(mask.sum().item())
            if count == 0:
                continue
            wf, gf = w[mask], g[mask]
            finite += count
            low, high = min(low, float(wf.min())), max(high, float(wf.max()))
            max_abs = max(max_abs, float(wf.abs().max()))
            within_zero = within_zero and bool((wf.abs() <= tol.atol + tol.rtol * wf.abs()).all())
            max_error = max(max_error, float((gf - wf).abs().max()))
    return OutputSpread(finite, low, high, max_abs, within_zero, max_error, constant)


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
