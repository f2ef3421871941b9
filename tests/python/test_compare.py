"""Output comparison rules."""

from __future__ import annotations

import math

import pytest
import torch

import kforge_worker.check.compare as compare_module
from kforge_worker.check.compare import (
    Tolerance,
    bits_digest,
    compare_tensors,
    output_spread,
    plain_tensor_problem,
    resolve_tolerance,
    same_bits,
)

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (torch.float32, 1e-2),
        (torch.float16, 1e-2),
        (torch.bfloat16, 1e-2),
        (torch.float64, 1e-6),
        (torch.int32, 0.0),
        (torch.bool, 0.0),
    ],
)
def test_default_tolerances(dtype, expected):
    assert resolve_tolerance(dtype, None, None) == Tolerance(expected, expected)


def test_overrides_apply_except_to_bool():
    assert resolve_tolerance(torch.float32, 1e-3, None) == Tolerance(1e-3, 1e-2)
    assert resolve_tolerance(torch.int64, 1.0, 0.0) == Tolerance(1.0, 0.0)
    assert resolve_tolerance(torch.bool, 1.0, 1.0) == Tolerance(0.0, 0.0)


def test_fp32_tolerance_boundary():
    # |actual - expected| <= atol + rtol * |expected| with the default 1e-2 / 1e-2.
    tol = resolve_tolerance(torch.float32, None, None)
    expected = torch.tensor([1.0, 100.0, 0.0], dtype=torch.float32)
    inside = expected + torch.tensor([0.015, 0.5, 9e-3])
    outside = expected + torch.tensor([0.025, 0.0, 0.0])
    assert compare_tensors("o", expected, inside, tol).passed
    result = compare_tensors("o", expected, outside, tol)
    assert not result.passed and result.mismatch_count == 1
    assert result.first_mismatch is not None and result.first_mismatch.index == [0]


def test_tanh_gelu_matches_exact_gelu_at_the_default_fp32_tolerance():
    # The old server's (and KernelBench's) default: a tanh-approximated GELU (max error ~5e-4)
    # is correct against the exact one, as it was there.
    x = torch.linspace(-6, 6, 4096, dtype=torch.float32)
    exact = torch.nn.functional.gelu(x)
    approx = torch.nn.functional.gelu(x, approximate="tanh")
    result = compare_tensors("o", exact, approx, resolve_tolerance(torch.float32, None, None))
    assert result.passed and 1e-4 < result.max_abs_error < 1e-2


def test_fp16_default_accepts_what_a_tight_tolerance_rejects():
    expected = torch.full((4,), 2.0, dtype=torch.float16)
    actual = expected + torch.tensor(0.02, dtype=torch.float16)
    assert compare_tensors(
        "o", expected, actual, resolve_tolerance(torch.float16, None, None)
    ).passed
    tight = Tolerance(1e-4, 1e-4)
    assert not compare_tensors("o", expected, actual, tight).passed


def test_integers_are_exact():
    expected = torch.arange(10, dtype=torch.int32)
    actual = expected.clone()
    actual[7] += 1
    result = compare_tensors("o", expected, actual, resolve_tolerance(torch.int32, None, None))
    assert not result.passed and result.mismatch_count == 1
    assert result.first_mismatch.expected == 7 and result.first_mismatch.actual == 8


def test_nan_positions_must_match_and_nan_is_no_wildcard():
    tol = Tolerance(1e-4, 1e-4)
    nan = math.nan
    expected = torch.tensor([1.0, nan, 3.0])
    assert compare_tensors("o", expected, torch.tensor([1.0, nan, 3.0]), tol).passed
    missing = compare_tensors("o", expected, torch.tensor([1.0, 2.0, 3.0]), tol)
    extra = compare_tensors("o", expected, torch.tensor([nan, nan, 3.0]), tol)
    assert not missing.passed and missing.first_mismatch.index == [1]
    assert not extra.passed and extra.first_mismatch.index == [0]
    assert math.isinf(extra.max_abs_error)
    all_nan = compare_tensors("o", torch.ones(3), torch.full((3,), nan), tol)
    assert not all_nan.passed and all_nan.mismatch_count == 3


def test_infinities_must_match_in_position_and_sign():
    tol = Tolerance(1e-4, 1e-4)
    inf = math.inf
    expected = torch.tensor([inf, -inf, 1.0])
    assert compare_tensors("o", expected, torch.tensor([inf, -inf, 1.0]), tol).passed
    assert not compare_tensors("o", expected, torch.tensor([-inf, -inf, 1.0]), tol).passed
    assert not compare_tensors("o", expected, torch.tensor([1e30, -inf, 1.0]), tol).passed
    assert not compare_tensors("o", expected, torch.tensor([inf, -inf, inf]), tol).passed


def test_report_has_errors_and_first_multi_dim_index():
    expected = torch.zeros(4, 8)
    actual = expected.clone()
    actual[1, 3] = 0.5
    actual[2, 5] = 4.0
    result = compare_tensors("out", expected, actual, Tolerance(1e-4, 1e-4))
    assert result.mismatch_count == 2 and result.numel == 32
    assert result.max_abs_error == pytest.approx(4.0)
    assert result.first_mismatch.index == [1, 3]
    assert result.first_mismatch.expected == 0.0 and result.first_mismatch.actual == 0.5
    text = result.describe()
    assert "output 'out': 2 of 32 elements differ" in text
    assert "first at [1, 3]: expected 0, got 0.5" in text and "atol=0.0001" in text


def test_relative_error_ignores_zero_expected():
    result = compare_tensors(
        "o", torch.tensor([2.0, 0.0]), torch.tensor([3.0, 0.0]), Tolerance(0, 0)
    )
    assert result.max_rel_error == pytest.approx(0.5)


def test_dtype_and_shape_mismatch():
    tol = Tolerance(1e-4, 1e-4)
    dtype = compare_tensors("o", torch.zeros(3), torch.zeros(3, dtype=torch.float16), tol)
    assert not dtype.passed and "expected float32, got float16" in dtype.reason
    shape = compare_tensors("o", torch.zeros(3), torch.zeros(4), tol)
    assert not shape.passed and "expected [3], got [4]" in shape.reason


class LazyTensor(torch.Tensor):
    pass


def test_only_plain_dense_tensors_on_the_device():
    assert plain_tensor_problem(torch.zeros(2), CPU) is None
    assert "torch.Tensor" in plain_tensor_problem([1.0, 2.0], CPU)
    lazy = torch.zeros(2).as_subclass(LazyTensor)
    assert "subclass" in plain_tensor_problem(lazy, CPU)
    assert "layout" in plain_tensor_problem(torch.zeros(2, 2).to_sparse(), CPU)
    assert "meta" in plain_tensor_problem(torch.zeros(2, device="meta"), CPU)
    result = compare_tensors("o", torch.zeros(2), lazy, Tolerance(1, 1))
    assert not result.passed and "subclass" in result.reason


def test_non_contiguous_outputs_compare_by_value():
    expected = torch.arange(6.0).reshape(2, 3)
    actual = torch.empty(3, 2).t()  # a (2, 3) view with transposed strides
    actual.copy_(expected)
    assert not actual.is_contiguous()
    transposed = torch.arange(6.0).reshape(3, 2).t()  # values differ
    assert compare_tensors("o", expected, actual, Tolerance(0, 0)).passed
    assert not compare_tensors("o", expected, transposed, Tolerance(0, 0)).passed


def test_same_bits_sees_nan_payloads_and_signed_zero():
    a = torch.tensor([math.nan, 0.0])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([math.nan, -0.0]))
    assert not same_bits(torch.zeros(3), torch.zeros(4))


@pytest.mark.parametrize("chunk", [1, 5, 7, 1 << 24])
def test_chunked_comparison_agrees_with_one_pass(monkeypatch, chunk):
    # Large outputs are compared in chunks (bounded device memory); the report must not depend
    # on where the chunk boundaries fall.
    monkeypatch.setattr("kforge_worker.check.compare._CHUNK", chunk)
    expected = torch.arange(1.0, 25.0).reshape(4, 6)
    actual = expected.clone()
    actual[1, 4] = 100.0  # abs error 89, rel 8.09
    actual[3, 0] = 20.0  # abs error 1, rel 0.0526
    result = compare_tensors("o", expected, actual, Tolerance(1e-4, 1e-4))
    assert result.mismatch_count == 2 and result.numel == 24
    assert result.max_abs_error == pytest.approx(89.0)
    assert result.max_rel_error == pytest.approx(89.0 / 11.0)
    assert result.first_mismatch.index == [1, 4] and result.first_mismatch.actual == 100.0
    actual[3, 0] = math.nan  # a non-finite mismatch in a later chunk
    assert compare_tensors("o", expected, actual, Tolerance(1e-4, 1e-4)).max_abs_error == math.inf
    assert compare_tensors("o", expected, expected.clone(), Tolerance(0, 0)).passed


@pytest.mark.parametrize("chunk", [1, 3, 1 << 24])
def test_output_spread_is_the_same_in_any_chunks(monkeypatch, chunk):
    monkeypatch.setattr("kforge_worker.check.compare._CHUNK", chunk)
    want = torch.tensor([1.0, -4.0, math.inf, 2.0, 0.5])
    got = torch.tensor([1.0, -4.5, math.inf, 2.0, 0.5])
    spread = output_spread(want, got, Tolerance(1e-2, 1e-2))
    assert (spread.finite, spread.low, spread.high, spread.max_abs) == (4, -4.0, 2.0, 4.0)
    assert spread.max_error == pytest.approx(0.5)
    assert not spread.within_zero and not spread.actual_constant
    constant = output_spread(want, torch.full((5,), 3.0), Tolerance(1e-2, 1e-2))
    assert constant.actual_constant
    assert output_spread(want, got, Tolerance(10.0, 0.0)).within_zero


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(5, 7, 3),
        lambda: torch.randn(6, 4).half(),
        lambda: torch.arange(11, dtype=torch.uint8),  # a tail of bytes past the last word
        lambda: torch.tensor([True, False, True]),
        lambda: torch.randn(4, 6).t(),  # not contiguous: taken a row at a time
        lambda: torch.tensor(2.5),
    ],
)
def test_bits_digest_sees_any_one_changed_element_and_nothing_else(make, monkeypatch):
    monkeypatch.setattr(compare_module, "DIGEST_CHUNK_WORDS", 3)  # several chunks per tensor
    t = make()
    before = bits_digest(t)
    assert bits_digest(t.clone()) == before
    for i in range(t.numel()):
        changed = t.clone()  # the same strides
        at = tuple(int(k) for k in torch.unravel_index(torch.tensor(i), t.shape))
        changed[at] = ~changed[at] if t.dtype == torch.bool else changed[at] + 1
        assert bits_digest(changed) != before, i


def test_bits_digest_tells_nan_payloads_layouts_and_dtypes_apart():
    t = torch.full((4,), float("nan"))
    other = t.clone()
    other.view(torch.int32)[2] ^= 1  # another NaN payload
    assert bits_digest(t) != bits_digest(other)
    x = torch.randn(3, 4)
    assert bits_digest(x) != bits_digest(x.t().contiguous().t())  # same values, other strides
    assert bits_digest(x) != bits_digest(x.view(torch.int32))
    assert bits_digest(torch.zeros(8)) != bits_digest(torch.zeros(4))
    assert bits_digest(torch.empty(0)) == bits_digest(torch.empty(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_poison_is_outside_every_expected_values_tolerance(dtype):
    from kforge_worker.candidate.binding import poison_for

    info = torch.finfo(dtype)
    tol = resolve_tolerance(dtype, None, None)
    cases = [
        torch.randn(1000, dtype=torch.float64).to(dtype),
        torch.tensor([info.max, 0.0, 1.0, math.inf, math.nan], dtype=dtype),  # max taken
        torch.tensor([info.max, info.min, 2.0], dtype=dtype),  # both ends taken
        torch.full((4,), math.nan, dtype=dtype),  # nothing finite
    ]
    for want in cases:
        buf = torch.empty_like(want)
        poison_for(buf, want, tol)
        assert buf.unique().numel() == 1
        poison = float(buf[0])
        assert not math.isinf(poison), (want, poison)  # an infinity could match one
        result = compare_tensors("o", want, buf, tol)
        assert result.mismatch_count == want.numel(), (want, poison)


def test_the_poison_is_a_constant_in_a_gap_of_the_range_and_nan_when_none_is_left():
    from kforge_worker.candidate.binding import poison_for

    info = torch.finfo(torch.float16)
    tol = resolve_tolerance(torch.float16, None, None)
    want = torch.tensor([info.min, info.max, 1.0], dtype=torch.float16)
    buf = torch.empty_like(want)
    poison_for(buf, want, tol)  # both ends taken: a third of the maximum, checked element-wise
    assert float(buf[0]) == pytest.approx(info.max / 3, rel=1e-3)
    want = torch.tensor([info.min, info.max, info.max / 3, -info.max / 3], dtype=torch.float16)
    poison_for(buf := torch.empty_like(want), want, tol)  # every finite constant taken
    assert torch.isnan(buf).all()


def test_finite_range_skips_nan_and_infinities_across_chunks(monkeypatch):
    from kforge_worker.check.compare import finite_range

    monkeypatch.setattr(compare_module, "_CHUNK", 4)
    t = torch.tensor([math.nan, 3.0, math.inf, -2.0, 7.5, -math.inf, 0.5, math.nan, 1.0])
    assert finite_range(t) == (-2.0, 7.5)
    assert finite_range(torch.tensor([math.nan, math.inf])) is None
    assert finite_range(torch.empty(0)) is None
