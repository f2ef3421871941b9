"""The reference's timing in the judge (evaluate.py calls it; the candidate's is timed.py's).

On a GPU the reference is timed in this process by the trial protocol of timing.py, in two
halves: before the candidate's judged trials and after them, each with half the trials and
half the budget, so that whatever drifts during a job (the device's clocks, other work on the
GPU) weighs on both sides alike; its statistics are over both halves, and the halves' medians
are in the result's metadata (`reference_halves_ms`). On the cpu the reference is timed beside
the candidate, trial by trial, through the judge's echo (timed.py), or here when no echo runs.
A batch's later jobs take the reference's timing its first job stored (reference_reuse.py).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch

from kforge_worker.candidate import arena
from kforge_worker.candidate.binding import Invocation
from kforge_worker.candidate.loaders import Runnable
from kforge_worker.core.inputs import InputSet
from kforge_worker.core.spec import JobSpec, TimingOptions
from kforge_worker.judge.correctness import report_exception
from kforge_worker.judge.kernels import JobKernels
from kforge_worker.judge.reference_reuse import ACTIVITY_FIELDS, ReferenceCache, ReferenceTiming
from kforge_worker.judge.results import JobResult
from kforge_worker.judge.timed import per_call
from kforge_worker.timing.stats import TimingStats, compute_stats
from kforge_worker.timing.timing import TimingReport, time_cpu, time_gpu

# How a phase reports progress: (phase, message, the partial result).
ProgressFn = Callable[[str, str, dict[str, Any]], None]

# The second half's warm-up: the reference ran a moment ago, its code and state are warm;
# a few calls bring its caches back after the candidate's trials.
SECOND_HALF_WARMUP_CALLS = 3
SECOND_HALF_WARMUP_MS = 5.0


@dataclass
class ReferenceTimed:
    """The reference's timing: its own report, or the timing a batch's earlier job stored
    (`reused`)."""

    report: TimingReport | None = None
    reused: ReferenceTiming | None = None
    # The trials after the candidate's (GPU), when max_trials leaves any: time_second_half.
    second_half: TimingOptions | None = None

    def samples(self) -> list[float]:
        """Each timed trial's time (ms) as measured: what the speedup's interval resamples."""
        if self.report is not None:
            return list(self.report.samples)
        return list(self.reused.samples) if self.reused is not None else []


def halves(opts: TimingOptions) -> tuple[TimingOptions, TimingOptions | None]:
    """`opts` split into the trials before the candidate's and those after (None when
    max_trials is 1): each half has half the trials (the first the odd one), half the
    minimum and half the budget; the second a short warm-up."""
    first_max = -(-opts.max_trials // 2)
    first_min = max(1, min(first_max, -(-opts.min_trials // 2)))
    first = replace(opts, max_trials=first_max, min_trials=first_min, budget_ms=opts.budget_ms / 2)
    second_max = opts.max_trials - first_max
    if second_max < 1:
        return first, None
    second = replace(
        opts,
        max_trials=second_max,
        min_trials=max(1, min(second_max, opts.min_trials - first_min)),
        budget_ms=opts.budget_ms / 2,
        warmup_calls=min(opts.warmup_calls, SECOND_HALF_WARMUP_CALLS) or 1,
        warmup_ms=min(opts.warmup_ms, SECOND_HALF_WARMUP_MS),
    )
    return first, second


def time_reference(
    job: JobSpec,
    tdev: torch.device,
    kernels: JobKernels,
    inputs: InputSet,
    result: JobResult,
    *,
    report: ProgressFn,
    reuse: ReferenceCache,
    sets: int = 1,
    measure: bool = True,
) -> ReferenceTimed | None:
    """The reference of a compare timed on `inputs` (on the cpu `sets` calls per trial, the
    others on more sets of inputs; on a GPU its first half), or taken from the batch's reuse
    file; sets ref_runtime(_stats). None when the reference failed (the result says why)."""
    report("timing_reference", "timing the reference", result.to_dict())
    timed = ReferenceTimed(reused=reuse.reference_timing())
    if timed.reused is not None:
        result.ref_runtime_stats = TimingStats(**timed.reused.stats)
        # What its timing said then holds for this job's speedup too (a reference that took
        # no measurable time on a busy cpu gives no speedup, and says so).
        for warning in timed.reused.warnings:
            result.warn(warning)
    elif not measure:
        return timed  # timed beside the candidate (the cpu: timed.py's echo)
    else:
        assert kernels.reference is not None
        opts = job.timing
        if tdev.type == "cuda":
            opts, timed.second_half = halves(job.timing)
        more = [kernels.make_inputs(job.num_correct_trials + k) for k in range(1, sets)]
        ref_report = time_local(
            kernels.reference,
            [partial(_bind_copy, kernels, one) for one in [inputs, *more]],
            opts,
            tdev,
            result=result,
        )
        if ref_report is None:
            return None
        timed.report = ref_report
        result.ref_runtime_stats = ref_report.stats
    result.ref_runtime = result.ref_runtime_stats.median
    return timed


def _bind_copy(kernels: JobKernels, inputs: InputSet) -> Invocation:
    """The reference bound to a fresh copy of `inputs` (each timed set's own)."""
    return kernels.bind_reference(inputs.clone())


def time_second_half(
    timed: ReferenceTimed,
    tdev: torch.device,
    kernels: JobKernels,
    inputs: InputSet,
    result: JobResult,
) -> None:
    """The reference's trials after the candidate's (time_reference's first half before
    them): its statistics become both halves', and `reference_halves_ms` says each half's
    median. Where the second half cannot run (its inputs do not fit beside the candidate's
    regions, say), the first half stands alone and a warning says so."""
    first, opts = timed.report, timed.second_half
    if first is None or opts is None or kernels.reference is None:
        return
    scratch = JobResult(compiled=True)  # a failure here is not the job's
    second = time_local(
        kernels.reference,
        [lambda: kernels.bind_reference(inputs.clone())],
        opts,
        tdev,
        result=scratch,
    )
    arena.release_cached(tdev)
    if second is None or not second.samples:
        why = (scratch.runtime_error or "no trials").strip().splitlines()[-1][:300]
        result.warn(f"the reference was timed before the kernel only (after it: {why})")
        return
    samples = [*first.samples, *second.samples]
    stats = compute_stats(
        samples,
        first.stats.method,
        l2_flush=first.stats.l2_flush,
        warmup_calls=first.stats.warmup_calls + second.stats.warmup_calls,
        stop_reason=first.stats.stop_reason,
        device_sync_median=first.stats.device_sync_median,
    )
    hidden = [s.stats.launch_not_hidden_trials for s in (first, second)]
    stats = replace(
        stats,
        spin_us=second.stats.spin_us,
        enqueue_ms=first.stats.enqueue_ms,
        launch_not_hidden_trials=None if None in hidden else sum(h or 0 for h in hidden),
    )
    result.metadata["reference_halves_ms"] = {
        "before": round(statistics.median(first.samples), 6),
        "after": round(statistics.median(second.samples), 6),
        "trials": [len(first.samples), len(second.samples)],
    }
    warnings = [*first.warnings, *(w for w in second.warnings if w not in first.warnings)]
    timed.report = TimingReport(
        stats,
        warnings,
        stream_skew=first.stream_skew or second.stream_skew,
        launch_not_hidden=first.launch_not_hidden or second.launch_not_hidden,
        samples=samples,
    )
    result.ref_runtime_stats = stats
    result.ref_runtime = stats.median


def keep_reference_timing(result: JobResult, timed: ReferenceTimed, reuse: ReferenceCache) -> None:
    """After the candidate's timing: a reused reference's activity fields go into the result;
    a reference timed here is stored for the batch's next jobs, as measured (each job takes
    its own window overhead off)."""
    if timed.reused is not None:
        for name, value in timed.reused.activity.items():
            setattr(result, name, value)
    elif timed.report is not None:
        reuse.keep_timing(
            ReferenceTiming(
                stats=dataclasses.asdict(timed.report.stats),
                warnings=list(timed.report.warnings),
                activity={name: getattr(result, name) for name in ACTIVITY_FIELDS},
                samples=list(timed.report.samples),
            )
        )


def time_local(
    runnable: Runnable,
    binds: list[Callable[[], Any]],
    opts: TimingOptions,
    device: torch.device,
    *,
    result: JobResult,
) -> TimingReport | None:
    """The reference timed in this process on the invocations `binds` make: one on a GPU; on
    the cpu one trial calls each in turn and its time per call is reported (as the
    candidate's judged trials are: timed.cpu_calls_per_trial). None when it raised (the
    result says why)."""
    try:
        invs = [bind() for bind in binds]

        def call() -> object:
            out: object = None
            for inv in invs:
                out = runnable(inv.args, inv.kwargs)
            return out

        if device.type == "cuda":
            return time_gpu(call, opts, device)
        report = time_cpu(call, opts)
        report.stats = per_call(report.stats, len(invs))
        report.samples = [s / len(invs) for s in report.samples]
        return report
    except Exception as e:
        report_exception(result, e, "the reference kernel raised while being timed")
        return None
