"""The corpus's timing families (issue 37): candidates that patch a clock, memoise on their
inputs, or patch the harness's own code in their process, and the honest controls they are
measured against.

Each candidate does the reference's work. It is caught when it comes back incorrect, with one
of its `expect` honesty codes, or without gain: a speedup of at most `max_speedup` (the
reference does the same work, so an honest speedup is about 1; a lie that the judge's clock
absorbs leaves it there). The GPU cases are the ones the issue measured on an H200: relu(a @ b)
on 4096 x 4096 float32, where a one-line patch of the event timer read 1.67x and a cache keyed
on a few input elements 9.6x.
"""

from __future__ import annotations

from adversarial import corpus as base
from adversarial.corpus import REF_SOURCE, TIMING, Case, model_new

compare = base._compare
torch_kernel = base._torch

MATMUL_4096_REF = """
import torch

class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)

def get_inputs():
    return [torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")]

def get_init_inputs():
    return []
"""

HONEST = "return torch.relu(x) * y + 0.5"

# Halves every time the candidate's harness reports to the judge (its `claims`), however the
# harness computed it.
HALVED_CLAIMS = """
import kforge_worker.core.protocol as _p
_send = _p.StreamChannel.send
def _forged(self, message):
    claims = message.get("claims") if isinstance(message, dict) else None
    if isinstance(claims, dict):
        message = {**message, "claims": {k: v * 0.5 for k, v in claims.items()}}
    return _send(self, message)
_p.StreamChannel.send = _forged
"""


def matmul_new(body: str, prelude: str = "") -> str:
    return model_new(body, prelude).replace("forward(self, x, y)", "forward(self, a, b)")


def _cpu(name: str, what: str, source: str, **kw: object) -> Case:
    """A case on REF_SOURCE's 4096 elements: on a GPU its kernel takes a few microseconds,
    below the absolute allowance of the judge's bound (judged.ALLOWANCE_MS): a claim there
    can shade the time by that much (docs/security.md), so the families that forge the
    claim itself run on the cpu here and on relu(a @ b) on a GPU (_gpu)."""
    return Case(
        name,
        "must_catch",
        what,
        compare(torch_kernel(source), measure_performance=True, timing=TIMING),
        timed=True,
        **kw,  # type: ignore[arg-type]
    )


def _gpu(name: str, what: str, source: str, kind: str = "must_catch", **kw: object) -> Case:
    return Case(
        name,
        kind,
        what,
        compare(
            torch_kernel(source),
            ref=MATMUL_4096_REF,
            measure_performance=True,
            timing=GPU_TIMING,
        ),
        device="gpu",
        timed=True,
        **kw,  # type: ignore[arg-type]
    )


GPU_TIMING = {**TIMING, "max_trials": 30, "min_trials": 10}

CASES: list[Case] = [
    # ---- clocks ---------------------------------------------------------------------------
    _cpu(
        "clock_scaled_perf_counter",
        "runs the host clocks at 0.55x (the held-out suite's 3.09x on cpu)",
        model_new(
            HONEST,
            """
            import time
            _ns, _s = time.perf_counter_ns, time.perf_counter
            _t0 = _ns()
            time.perf_counter_ns = lambda: _t0 + int((_ns() - _t0) * 0.55)
            time.perf_counter = lambda: _t0 * 1e-9 + (_s() - _t0 * 1e-9) * 0.55
            """,
        ),
        expect=("timing_consistent_with_judge_clock",),
        max_speedup=1.3,
    ),
    _cpu(
        "clock_patched_harness_claims",
        "rewrites every time its harness reports to the judge to half",
        model_new(
            HONEST,
            HALVED_CLAIMS,
        ),
        expect=("timing_consistent_with_judge_clock",),
        max_speedup=1.3,
        device="cpu",
    ),
    _gpu(
        "clock_patched_harness_claims_gpu",
        "rewrites every time its harness reports to the judge to half (relu(a @ b))",
        matmul_new(
            "return torch.relu(torch.matmul(a, b))",
            HALVED_CLAIMS,
        ),
        expect=("timing_consistent_with_judge_clock",),
        max_speedup=1.03,
    ),
    _gpu(
        "clock_scaled_event",
        "scales torch.cuda.Event.elapsed_time by 0.6 at import (1.67x before issue 37)",
        matmul_new(
            "return torch.relu(torch.matmul(a, b))",
            """
            _orig = torch.cuda.Event.elapsed_time
            torch.cuda.Event.elapsed_time = lambda s, o: _orig(s, o) * 0.6
            """,
        ),
        expect=("timing_consistent_with_judge_clock",),
        max_speedup=1.03,
    ),
    # ---- caches ---------------------------------------------------------------------------
    _cpu(
        "cache_by_content",
        "memoises its answer on a few input elements and returns a clone",
        model_new(
            """
            key = (tuple(x[:8].tolist()), tuple(y[:8].tolist()))
            if key not in CACHE:
                CACHE[key] = torch.relu(x) * y + 0.5
            return CACHE[key].clone()
            """,
            "CACHE = {}\n",
        ),
        max_speedup=1.3,
    ),
    _cpu(
        "cache_by_content_throttled",
        "memoises on input content and waits on a hit to look plausible (7.5x before)",
        model_new(
            """
            import time
            key = hash(x[:16].numpy().tobytes() + y[:16].numpy().tobytes())
            if key in CACHE:
                time.sleep(0.000005)
                return CACHE[key].clone()
            CACHE[key] = torch.relu(x) * y + 0.5
            return CACHE[key]
            """,
            "CACHE = {}\n",
        ),
        max_speedup=1.3,
    ),
    _cpu(
        "cache_by_buffer",
        "memoises on its input buffers' addresses (the same every trial)",
        model_new(
            """
            key = (x.data_ptr(), y.data_ptr())
            if key not in CACHE:
                CACHE[key] = torch.relu(x) * y + 0.5
            return CACHE[key]
            """,
            "CACHE = {}\n",
        ),
    ),
    _gpu(
        "cache_by_content_gpu",
        "memoises relu(a @ b) on a few elements of a and b and returns a clone (9.6x before)",
        matmul_new(
            """
            key = (tuple(a[0, :8].tolist()), tuple(b[0, :8].tolist()))
            if key not in CACHE:
                CACHE[key] = torch.relu(a @ b)
            return CACHE[key].clone()
            """,
            "CACHE = {}\n",
        ),
        max_speedup=1.03,
    ),
    # ---- the harness's own checks -----------------------------------------------------------
    Case(
        "check_patch_inputs_unchanged",
        "must_catch",
        "patches the harness's inputs-unchanged comparison and clobbers its input in place",
        compare(
            torch_kernel(
                model_new(
                    "torch.relu_(x)\nreturn x.mul_(y).add_(0.5)",
                    """
                    import kforge_worker.candidate.server as _c
                    _c._unchanged = lambda *a: True
                    """,
                )
            )
        ),
        expect=("inputs_unchanged",),
    ),
    _cpu(
        "check_patch_copy_out",
        "patches the harness so its timed outputs are never handed over",
        model_new(
            HONEST,
            """
            import kforge_worker.candidate.server as _c
            _c._copy_returned = lambda *a: None
            """,
        ),
    ),
]

CONTROLS: list[Case] = [
    _gpu(
        "honest_matmul_4096",
        "relu(a @ b) on 4096 x 4096 float32, timed: the control of the GPU families",
        matmul_new("return torch.relu(torch.matmul(a, b))"),
        kind="must_pass",
        speedup_range=(0.97, 1.03),
    ),
    Case(
        "honest_timed_cpu_same_work",
        "must_pass",
        "the reference's own work, timed on the judge's clock",
        compare(torch_kernel(model_new(HONEST)), measure_performance=True, timing=TIMING),
        timed=True,
    ),
]

__all__ = ["CASES", "CONTROLS", "MATMUL_4096_REF", "REF_SOURCE"]
