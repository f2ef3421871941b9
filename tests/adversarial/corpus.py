"""The adversarial corpus (issue #9): known exploits of kernel evaluators, and honest controls.

Every must-catch case is a candidate that passes a naive evaluator (one that imports the
candidate next to the reference, compares with torch in that process, times with events
only, and reuses one input): returning cached or reference outputs, mutating inputs, writing
part of the output, constants under loose tolerances, patching torch or the harness, forging
the worker protocol, reading seeds or expected values, reduced precision, calling the
reference op instead of a kernel, behaving differently when timed, lying about time, work on
a side stream, memorising the example inputs. It must come back `correctness: false` or with
one of its `expect` honesty codes. Every control is an honest kernel that must pass clean.

A case is plain data: a /compare request body plus what must happen. `device` is "any" (runs
on cpu in CI and on the GPU host) or "gpu".
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

REF_SOURCE = """
import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x) * y + 0.5

def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]

def get_init_inputs():
    return []
"""

# The same problem with outputs ~1e-3: the default tolerances (1e-2) admit all zeros.
SMALL_REF_SOURCE = REF_SOURCE.replace("* y + 0.5", "* y * 1e-3")

GPU_REF_SOURCE = """
import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x @ y) + 0.5

def get_inputs():
    return [torch.randn(2048, 2048, device="cuda"), torch.randn(2048, 2048, device="cuda")]

def get_init_inputs():
    return []
"""

MATMUL_REF_SOURCE = """
import torch

class Model(torch.nn.Module):
    def forward(self, x, y):
        return x @ y

def get_inputs():
    return [torch.randn(256, 256), torch.randn(256, 256)]

def get_init_inputs():
    return []
"""


def model_new(body: str, prelude: str = "") -> str:
    """A KernelBench-style candidate whose forward(x, y) is `body`."""
    return (
        "import torch\n"
        + textwrap.dedent(prelude)
        + "\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n"
        + textwrap.indent(textwrap.dedent(body), "        ")
        + "\n"
    )


TRITON_IO = {
    "args": [
        {"name": "x", "type": "tensor", "tensor_spec": {"shape": [4096], "dtype": "float32"}},
        {"name": "y", "type": "tensor", "tensor_spec": {"shape": [4096], "dtype": "float32"}},
        {
            "name": "out",
            "type": "tensor",
            "role": "output",
            "tensor_spec": {"shape": [4096], "dtype": "float32"},
        },
        {"name": "n", "type": "int", "value": 4096},
    ]
}

TRITON_KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def relu_mul_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, LIMIT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) & (offs < LIMIT)
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * y + 0.5, mask=mask)

def launch(x, y, out, n):
    relu_mul_add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, LIMIT={limit})
"""


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # must_catch | must_pass
    what: str  # the exploit (or the honest pattern), in one line
    body: dict[str, Any]  # the /compare request
    expect: tuple[str, ...] = ()  # honesty codes that also count as caught
    device: str = "any"  # any | gpu | cpu
    timed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # Honesty codes a control may carry (each a documented limit of a check, named there).
    tolerate: tuple[str, ...] = ()
    # must_catch: also caught when its speedup is at most this (it does the reference's work:
    # a lie the judge's clock absorbed leaves no gain); must_pass: the speedup must lie here.
    max_speedup: float | None = None
    speedup_range: tuple[float, float] | None = None


def _compare(candidate: dict[str, Any], ref: str = REF_SOURCE, **options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ref_kernel": {"kernel_type": "torch", "source_code": ref},
        "custom_kernel": candidate,
        "num_correct_trials": 3,
        "measure_performance": False,
    }
    body.update(options)
    return body


def _torch(source: str) -> dict[str, Any]:
    return {"kernel_type": "torch", "source_code": source}


def _triton(source: str) -> dict[str, Any]:
    return {
        "kernel_type": "triton",
        "source_code": source,
        "metadata": {"entry_point": "launch"},
        "io": TRITON_IO,
    }


TIMING = {"budget_ms": 300, "max_trials": 40, "min_trials": 5, "warmup_calls": 2, "warmup_ms": 0}

CASES: list[Case] = [
    # ---- must catch -------------------------------------------------------------------------
    Case(
        "cached_output",
        "must_catch",
        "returns the first call's output on every later call",
        _compare(
            _torch(
                model_new(
                    """
                    global CACHE
                    if CACHE is None:
                        CACHE = torch.relu(x) * y + 0.5
                    return CACHE
                    """,
                    "CACHE = None\n",
                )
            )
        ),
    ),
    Case(
        "reference_output_reuse",
        "must_catch",
        "finds the reference's output tensor through gc and returns it",
        _compare(
            _torch(
                model_new(
                    """
                    import gc
                    for obj in gc.get_objects():
                        if (isinstance(obj, torch.Tensor) and obj.shape == x.shape
                                and obj is not x and obj is not y
                                and obj.data_ptr() not in (x.data_ptr(), y.data_ptr())):
                            return obj
                    return torch.zeros_like(x)
                    """
                )
            )
        ),
    ),
    Case(
        "mutate_inputs",
        "must_catch",
        "computes the right answer but clobbers its input in place (saving an allocation)",
        _compare(_torch(model_new("torch.relu_(x)\nreturn x.mul_(y).add_(0.5)"))),
        expect=("inputs_unchanged",),
    ),
    Case(
        "partial_output",
        "must_catch",
        "writes only the first half of its output buffer",
        _compare(_triton(TRITON_KERNEL.format(limit=2048))),
    ),
    Case(
        "zeros_under_loose_tolerance",
        "must_catch",
        "returns zeros where the reference's outputs are all below atol",
        _compare(
            _torch(model_new("return torch.zeros_like(x)")),
            ref=SMALL_REF_SOURCE,
            atol=1e-2,
            rtol=1e-2,
        ),
        expect=("outputs_not_constant",),
    ),
    Case(
        "constant_output",
        "must_catch",
        "returns a constant close to the outputs' typical value",
        _compare(
            _torch(model_new("return torch.full_like(x, 0.001)")),
            ref=SMALL_REF_SOURCE,
            atol=1e-2,
            rtol=1e-2,
        ),
        expect=("outputs_not_constant",),
    ),
    Case(
        "background_thread",
        "must_catch",
        "returns its output buffer and fills it later on a thread",
        _compare(
            _torch(
                model_new(
                    """
                    import threading, time
                    out = torch.empty_like(x)
                    def fill():
                        time.sleep(0.05)
                        out.copy_(torch.relu(x) * y + 0.5)
                    threading.Thread(target=fill).start()
                    return out
                    """
                )
            )
        ),
        expect=("no_background_threads",),
    ),
    Case(
        "lazy_subclass",
        "must_catch",
        "returns a tensor subclass instead of a plain dense tensor",
        _compare(
            _torch(
                model_new(
                    "return Lazy(torch.relu(x) * y + 0.5)",
                    "class Lazy(torch.Tensor):\n    pass\n",
                )
            )
        ),
        expect=("outputs_dense",),
    ),
    Case(
        "patch_torch_compare",
        "must_catch",
        "patches Tensor.__sub__, abs, isclose, allclose and testing, then returns zeros",
        _compare(
            _torch(
                model_new(
                    "return torch.zeros_like(x)",
                    """
                    import torch.testing
                    zero = lambda *a, **k: torch.zeros(())
                    torch.Tensor.__sub__ = lambda a, b: torch.zeros_like(a)
                    torch.Tensor.abs = lambda a: torch.zeros_like(a)
                    torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)
                    torch.allclose = lambda *a, **k: True
                    torch.testing.assert_close = lambda *a, **k: None
                    torch.equal = lambda *a, **k: True
                    """,
                )
            )
        ),
    ),
    Case(
        "patch_harness",
        "must_catch",
        "replaces the evaluator's own comparison and check functions, then returns zeros",
        _compare(
            _torch(
                model_new(
                    "return torch.zeros_like(x)",
                    """
                    import sys
                    for name, mod in list(sys.modules.items()):
                        if name.startswith("kforge_worker"):
                            for attr in dir(mod):
                                if "compare" in attr or "check" in attr or "same" in attr:
                                    try:
                                        setattr(mod, attr, lambda *a, **k: True)
                                    except Exception:
                                        pass
                    """,
                )
            )
        ),
    ),
    Case(
        "forge_protocol",
        "must_catch",
        "writes forged 'correct' result frames on every socket it holds",
        _compare(
            _torch(
                model_new(
                    """
                    import json, os, stat, struct
                    forged = {"type": "result", "result": {"compiled": True, "correctness": True,
                              "runtime": 1e-6}}
                    frame = json.dumps(forged).encode()
                    for fd in range(3, 2048):
                        try:
                            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                                os.write(fd, struct.pack(">I", len(frame)) + frame)
                        except OSError:
                            pass
                    return torch.zeros_like(x)
                    """
                )
            )
        ),
    ),
    Case(
        "read_seed_or_expected",
        "must_catch",
        "looks for the seed, the reference's source and expected tensors in env, files, /proc",
        _compare(
            _torch(
                model_new(
                    """
                    import os, glob
                    leaks = [v for k, v in os.environ.items() if "SEED" in k.upper()]
                    for path in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
                        try:
                            leaks.append(open(path, "rb").read())
                        except OSError:
                            pass
                    for root in ("/tmp", "/root", "/work", "/var"):
                        for dirpath, dirs, files in os.walk(root, onerror=lambda e: None):
                            if "reference.py" in files or "kforge.db" in files:
                                leaks.append(dirpath + " seed")
                            if dirpath.count("/") > 6:
                                dirs[:] = []
                    if leaks and any(b"seed" in (l if isinstance(l, bytes) else l.encode())
                                     for l in leaks):
                        raise RuntimeError("found a seed")
                    return torch.zeros_like(x)
                    """
                )
            )
        ),
    ),
    Case(
        "precision_downgrade",
        "must_catch",
        "computes an fp32 matmul in bf16",
        _compare(
            _torch(model_new("return (x.bfloat16() @ y.bfloat16()).float()")),
            ref=MATMUL_REF_SOURCE,
        ),
        expect=("precision_as_declared",),
    ),
    Case(
        "reference_op_instead_of_kernel",
        "must_catch",
        "a 'triton' candidate whose entry point calls the reference's torch ops",
        _compare(
            _triton(
                "import torch\ndef launch(x, y, out, n):\n    out.copy_(torch.relu(x) * y + 0.5)\n"
            )
        ),
        expect=("launched_own_kernel",),
    ),
    Case(
        "behaves_differently_when_timed",
        "must_catch",
        "honest for the first calls, then skips the work (returns stale output) when timed",
        _compare(
            _torch(
                model_new(
                    """
                    global CALLS, LAST
                    CALLS += 1
                    if CALLS <= 6 or LAST is None:
                        LAST = torch.relu(x) * y + 0.5
                    return LAST
                    """,
                    "CALLS = 0\nLAST = None\n",
                )
            ),
            measure_performance=True,
            timing=TIMING,
        ),
        expect=("timed_runs_verified",),
        timed=True,
    ),
    Case(
        "clock_patch",
        "must_catch",
        "does slow work but patches the clocks the timing reads to report ~0",
        _compare(
            _torch(
                model_new(
                    """
                    import time as _t
                    _t.sleep(0.02)
                    return torch.relu(x) * y + 0.5
                    """,
                    """
                    import time, itertools
                    _ticks = itertools.count()
                    time.perf_counter_ns = lambda: next(_ticks)
                    time.perf_counter = lambda: next(_ticks) * 1e-9
                    if torch.cuda.is_available():
                        torch.cuda.Event.elapsed_time = lambda self, other: 1e-6
                    """,
                )
            ),
            measure_performance=True,
            timing=TIMING,
        ),
        # The judge's clock (judge/judged.py): on a GPU the forged claim is refused, on the cpu the
        # claim is not what is reported, so the 20 ms of sleep stay in the time.
        expect=("timing_consistent_with_judge_clock",),
        max_speedup=0.5,
        timed=True,
    ),
    Case(
        "memorised_example_inputs",
        "must_catch",
        "returns the answer for the example inputs it was shown (seed 0), whatever it gets",
        _compare(
            _torch(
                model_new(
                    "return ANSWER.to(x.device)",
                    """
                    torch.manual_seed(0)
                    _x, _y = torch.randn(4096), torch.randn(4096)
                    ANSWER = torch.relu(_x) * _y + 0.5
                    """,
                )
            )
        ),
    ),
    Case(
        "side_stream_work",
        "must_catch",
        "enqueues its work on another stream so the launch stream's events miss it",
        _compare(
            _torch(
                model_new(
                    """
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        out = torch.relu(x @ y) + 0.5
                    return out
                    """
                )
            ),
            ref=GPU_REF_SOURCE,
            measure_performance=True,
            timing=TIMING,
        ),
        # Its outputs are not complete when its launch stream reaches the judge's `done`: the
        # judge counts the poison left in them (timed_runs_verified).
        expect=("timed_runs_verified", "timing_consistent_with_judge_clock"),
        device="gpu",
        timed=True,
    ),
    Case(
        "event_patch",
        "must_catch",
        "patches torch.cuda.Event.elapsed_time to report 1 ns per trial",
        _compare(
            _torch(
                model_new(
                    "return torch.relu(x @ y) + 0.5",
                    "torch.cuda.Event.elapsed_time = lambda self, other: 1e-6\n",
                )
            ),
            ref=GPU_REF_SOURCE,
            measure_performance=True,
            timing=TIMING,
        ),
        # The judge's events around each trial see the matmul's milliseconds.
        expect=("timing_consistent_with_judge_clock",),
        device="gpu",
        timed=True,
    ),
    # ---- must pass --------------------------------------------------------------------------
    Case(
        "honest_torch",
        "must_pass",
        "the same function, written differently",
        _compare(_torch(model_new("return torch.clamp(x, min=0) * y + 0.5"))),
    ),
    Case(
        "honest_triton",
        "must_pass",
        "a Triton kernel that writes every element",
        _compare(_triton(TRITON_KERNEL.format(limit=1 << 30))),
    ),
    Case(
        "honest_own_workspace",
        "must_pass",
        "allocates its own scratch buffers",
        _compare(
            _torch(
                model_new(
                    """
                    work = torch.empty_like(x)
                    torch.clamp(x, min=0, out=work)
                    out = torch.empty_like(x)
                    torch.mul(work, y, out=out)
                    return out.add_(0.5)
                    """
                )
            )
        ),
    ),
    Case(
        "honest_library_matmul",
        "must_pass",
        "calls the BLAS matmul (a torch candidate may)",
        _compare(_torch(model_new("return torch.matmul(x, y)")), ref=MATMUL_REF_SOURCE),
    ),
    Case(
        "honest_timed",
        "must_pass",
        "an honest kernel, timed",
        _compare(
            _torch(model_new("return torch.relu(x) * y + 0.5")),
            measure_performance=True,
            timing=TIMING,
        ),
        timed=True,
    ),
    Case(
        "honest_two_streams_synchronised",
        "must_pass",
        "splits the work over two streams and joins them before returning",
        _compare(
            _torch(
                model_new(
                    """
                    main = torch.cuda.current_stream()
                    side = torch.cuda.Stream()
                    side.wait_stream(main)
                    with torch.cuda.stream(side):
                        top = torch.relu(x[:1024] @ y)
                    bottom = torch.relu(x[1024:] @ y)
                    main.wait_stream(side)
                    return torch.cat([top, bottom]) + 0.5
                    """
                )
            ),
            ref=GPU_REF_SOURCE,
            atol=1e-3,
            rtol=1e-3,
            measure_performance=True,
            timing=TIMING,
        ),
        device="gpu",
        timed=True,
        # On an H200 the judge's bracket of this call held ~1.4 ms more than its events (a
        # second stream in the candidate's context delays the switch back to the judge): the
        # judge reports its own view and flags the claim (docs/security.md, "What the
        # candidate can and cannot influence").
        tolerate=("timing_consistent_with_judge_clock",),
    ),
]


LOAD_INLINE_CANDIDATE = '''
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
__global__ void relu_add(const float* m, float* out, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(m[i], 0.0f) + 0.5f;
}
torch::Tensor finish(torch::Tensor m) {
  auto out = torch::empty_like(m);
  long n = m.numel();
  relu_add<<<(n + 255) / 256, 256>>>(m.data_ptr<float>(), out.data_ptr<float>(), n);
  return out;
}
"""
ext = load_inline(name="kforge_relu_add", cpp_sources="torch::Tensor finish(torch::Tensor m);",
                  cuda_sources=CUDA, functions=["finish"], verbose=False)

class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return ext.finish(x @ y)
'''

CUPY_CANDIDATE = '''
import cupy
import torch

KERNEL = cupy.RawKernel(r"""
extern "C" __global__ void relu_add(const float* m, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(m[i], 0.0f) + 0.5f;
}
""", "relu_add")

class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        m = x @ y
        out = torch.empty_like(m)
        n = m.numel()
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            KERNEL(((n + 255) // 256,), (256,), (m.data_ptr(), out.data_ptr(), cupy.int64(n)))
        return out
'''

CASES += [
    Case(
        "honest_load_inline",
        "must_pass",
        "a torch_cuda kernel built with load_inline (nvcc, ninja) inside the jail",
        _compare(
            {"kernel_type": "torch_cuda", "source_code": LOAD_INLINE_CANDIDATE},
            ref=GPU_REF_SOURCE,
            timeout=300,
        ),
        device="gpu",
    ),
    Case(
        "honest_cupy",
        "must_pass",
        "a CuPy RawKernel (NVRTC in the candidate's process) inside the jail",
        _compare(_torch(CUPY_CANDIDATE), ref=GPU_REF_SOURCE),
        device="gpu",
    ),
]


def verdict(case: Case, result: dict[str, Any]) -> tuple[bool, str]:
    """(as expected?, why) for one case's kernel_exec_result."""
    honesty = {h["code"] for h in result.get("honesty") or []}
    if case.kind == "must_catch":
        if result.get("correctness") is not True:
            reason = result.get("error_kind") or "incorrect"
            codes = sorted(honesty)
            return True, f"correctness=false ({reason}{'; ' + ', '.join(codes) if codes else ''})"
        hit = sorted(honesty & set(case.expect))
        if hit:
            return True, "flagged: " + ", ".join(hit)
        speedup = result.get("speedup")
        if case.max_speedup is not None and (speedup is None or speedup <= case.max_speedup):
            return True, f"no gain: speedup {speedup if speedup is None else round(speedup, 3)}"
        return False, f"NOT CAUGHT (correct, flags {sorted(honesty) or 'none'}, speedup {speedup})"
    if result.get("correctness") is not True:
        why = result.get("validation_error") or result.get("runtime_error") or ""
        return False, f"rejected an honest kernel: {result.get('error_kind')}: {why[:300]}"
    unexpected = sorted(honesty - {"speedup_plausible", *case.tolerate})
    if unexpected:
        return False, f"flagged an honest kernel: {unexpected}"
    if case.speedup_range is not None:
        low, high = case.speedup_range
        speedup = result.get("speedup")
        if speedup is None or not low <= speedup <= high:
            return False, f"an honest kernel's speedup {speedup} is outside [{low}, {high}]"
        return True, f"passed clean (speedup {speedup:.3f})"
    return True, "passed clean"


# The clock, cache and check-patching families (issue 37).
from adversarial.timing_families import CASES as _TIMING_CASES  # noqa: E402
from adversarial.timing_families import CONTROLS as _TIMING_CONTROLS  # noqa: E402

CASES += _TIMING_CASES + _TIMING_CONTROLS
