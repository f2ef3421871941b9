"""The fused comparison kernel (fused_compare.py) against the torch path, through Triton's
interpreter here; test_gpu.py runs the same verification compiled on a GPU."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from worker_jobs import run_python_compiled

from kforge_worker.check import fused_compare
from kforge_worker.check.compare import (
    Tolerance,
    compare_fused,
    compare_torch,
    fused_ready,
    output_spread,
    verify_fused,
)

CPU = torch.device("cpu")
# numpy (the interpreter) warns on inf - inf and 1e300 / 1e-300; a GPU computes them silently.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
VARIANTS = [
    (dtype, exact)
    for dtype in fused_compare.SUPPORTED
    for exact in ((False,) if dtype.is_floating_point else (True, False))
]


@pytest.mark.parametrize(("dtype", "exact"), VARIANTS, ids=str)
def test_the_kernel_gives_what_torch_gives_on_every_verification_case(dtype, exact):
    assert verify_fused(CPU, dtype, exact) == []


def _same(fused, torch_result) -> None:
    assert dataclasses.replace(fused, spread=None) == torch_result


def test_a_non_contiguous_output_with_scattered_mismatches_across_launches(monkeypatch):
    # Four launches of two blocks (the last partial): the counts, maxima and the first
    # mismatch's index are reduced across launches as within one.
    monkeypatch.setattr(fused_compare, "LAUNCH_ELEMENTS", 2 * fused_compare.BLOCK)
    gen = torch.Generator().manual_seed(5)
    want = torch.randn(7 * fused_compare.BLOCK + 3, 2, generator=gen).t()
    got = want.clone()
    flat = got.reshape(-1)
    for i in (5 * fused_compare.BLOCK + 1, 6 * fused_compare.BLOCK, flat.numel() - 1):
        flat[i] += 1.0
    got = flat.reshape(got.shape).t().contiguous().t()
    assert not got.is_contiguous()
    tol = Tolerance(1e-2, 1e-2)
    fused = compare_fused("o", want, got, tol, False)
    _same(fused, compare_torch("o", want, got, tol, False))
    assert fused.mismatch_count == 3 and fused.first_mismatch is not None
    assert fused.spread == output_spread(want, got, tol)


def test_a_zero_dimensional_output():
    tol = Tolerance(1e-2, 1e-2)
    want, got = torch.tensor(2.0), torch.tensor(2.5)
    _same(compare_fused("o", want, got, tol, False), compare_torch("o", want, got, tol, False))


def test_an_output_at_an_unaligned_offset():
    # A view one element into its storage is read from an aligned copy (the kernel the
    # zygote compiled assumes 16-byte aligned pointers).
    tol = Tolerance(1e-2, 1e-2)
    base = torch.randn(1001)
    want, got = base[1:], (base + 0.5)[1:]
    assert want.data_ptr() % 16
    _same(compare_fused("o", want, got, tol, False), compare_torch("o", want, got, tol, False))


def test_a_kernel_that_miscounts_is_caught_by_the_verification(monkeypatch):
    real = fused_compare.output_stats

    def one_mismatch_hidden(*args, **kwargs):
        stats = real(*args, **kwargs)
        return dataclasses.replace(stats, mismatches=max(0, stats.mismatches - 1))

    monkeypatch.setattr(fused_compare, "output_stats", one_mismatch_hidden)
    problems = verify_fused(CPU, torch.float32, False)
    assert problems and "mismatch_count: fused" in problems[0]


def test_a_kernel_that_cannot_run_is_not_trusted(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no kernel image")

    monkeypatch.setattr(fused_compare, "output_stats", broken)
    assert verify_fused(CPU, torch.float16, False) == [
        "float16: the fused kernel failed: no kernel image"
    ]


def test_the_cpu_device_compares_with_torch():
    assert not fused_ready(CPU, torch.float32, False)


_JIT_LOOKUP = """
import json, os, sys
import torch
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
from triton.runtime.jit import MockTensor
from kforge_worker.check import fused_compare as F

F.precompile(90)
cache = os.environ["TRITON_CACHE_DIR"]
before = set(os.listdir(cache))


class NoGpu:  # what JITFunction.run asks the driver for, on an H100
    def get_current_device(self): return 0
    def get_current_stream(self, device=None): return 0
    def get_current_target(self): return GPUTarget("cuda", 90, 32)


driver.set_active(NoGpu())
new = {}
for dtype, exact in F.PRECOMPILED + ((torch.int8, True),):
    view = F._VIEWS.get(dtype, dtype)
    kinds = (view, view, torch.float64, torch.int64, torch.int64, torch.float64)
    args = [MockTensor(t) for t in kinds]
    F.compare_blocks.warmup(*args, grid=(1,), EXACT=exact, BF16=dtype == torch.bfloat16,
                            BLOCK=F.BLOCK, **F.LAUNCH_OPTIONS)
    now = set(os.listdir(cache))
    new[str(dtype)] = len(now - before)
    before = now
digest_args = [MockTensor(torch.int32), MockTensor(torch.int64), MockTensor(torch.int64)]
F.digest_blocks.warmup(*digest_args, grid=(1,), BLOCK=F.BLOCK, num_warps=F.NUM_WARPS)
new["digest"] = len(set(os.listdir(cache)) - before)
print(json.dumps(new))
"""


@pytest.mark.slow
def test_the_zygotes_precompiled_variants_are_what_a_launch_looks_up(tmp_path):
    # Compiled for an H100 without a GPU, then looked up as a launch would (the JIT's own
    # run(), with a driver that answers for a device): no new compile for a precompiled
    # variant or the digest kernel; int8, not precompiled, compiles (so the check can fail).
    done = run_python_compiled(_JIT_LOOKUP, TRITON_CACHE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    compiled = json.loads(done.stdout.strip().splitlines()[-1])
    assert compiled.pop("torch.int8") == 1
    assert compiled.pop("digest") == 0
    assert compiled == {str(dtype): 0 for dtype, _ in fused_compare.PRECOMPILED}


def test_a_disagreement_of_the_kernel_is_in_the_jobs_warnings(tmp_path, monkeypatch):
    # What a job says when, on its GPU, the kernel disagreed with torch at its verification
    # (there the comparison fell back to torch ops: the verdict stands, the warning says so).
    import worker_kernels as K
    from worker_jobs import make_job, run

    from kforge_worker.check import compare

    monkeypatch.setitem(
        compare.FUSED_DISAGREEMENTS, "cuda:0 float32 exact=False", "mismatch_count: fused 3"
    )
    result = run(make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path))
    assert result["correctness"], result
    assert any("disagreed with torch's" in w for w in result["warnings"]), result["warnings"]


def test_the_digest_kernel_gives_the_torch_paths_sums():
    # bits_digest's two sums mod 2**64 (words of every sign, across blocks, at positions past
    # 2**32): what a GPU process checks once before it uses the kernel.
    from kforge_worker.check.compare import digest_differences

    assert digest_differences(CPU) == []


def test_a_digest_kernel_that_miscounts_is_not_used(monkeypatch):
    from kforge_worker.check.compare import digest_differences

    real = fused_compare.word_sums
    monkeypatch.setattr(fused_compare, "word_sums", lambda w, o: (real(w, o)[0] + 1, 0))
    assert digest_differences(CPU)[0].startswith("1 words at 0: kernel")
