"""The judge's verdict on a judged run of the candidate (timed.py runs it): the statistics the
result reports and the bound on the candidate process's claims (timed.py's module docstring).
On the cpu the times are the judge's own, its wall clock less its echo's empty trials; on a GPU
the claims, accepted only where their median lies within the judge's bound, and a claim grossly
below the judge's view (GROSS_FRACTION, GROSS_MS) fails a fatal check.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from kforge_worker.core.spec import JobSpec
from kforge_worker.judge.judged import (
    ALLOWANCE_FRACTION,
    ALLOWANCE_MS,
    Echo,
    JudgedRun,
    within_bound,
)
from kforge_worker.judge.results import JobResult
from kforge_worker.timing.stats import TimingStats, compute_stats
from kforge_worker.timing.timing import spinner_for

# A claim below this fraction of the judge's view, and more than GROSS_MS below it, is a lie
# no context switch explains: a failed fatal check. Smaller gaps are absorbed (judge_run).
GROSS_FRACTION = 0.5


GROSS_MS = 2.5


@dataclass
class CandidateTiming:
    stats: TimingStats  # what the result reports for the candidate
    run: JudgedRun
    judged_ms: float  # the judge's own median view of a trial's work
    launch_not_hidden: str = ""
    samples: list[float] = field(default_factory=list)  # each reported trial's time (ms)
    # cpu: the reference timed in the same trials through the judge's echo
    ref_stats: TimingStats | None = None
    ref_samples: list[float] = field(default_factory=list)
    ref_warnings: list[str] = field(default_factory=list)  # its warnings, kept for reuse


def _copy_ms(returned: list[torch.Tensor], device: torch.device) -> float:
    """What the candidate's copy of its returned outputs into the regions costs, as the judge
    measures the same bytes copied on the same GPU (its part of every bracket)."""
    nbytes = sum(t.numel() * t.element_size() for t in returned)
    if device.type != "cuda" or nbytes == 0:
        return 0.0
    chunk = min(nbytes, 1 << 28)
    src = torch.empty(chunk, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    spinner = spinner_for(device)
    copies = 8
    times: list[float] = []
    for _ in range(4):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        spinner.spin(200.0)  # the copies are enqueued before the device reaches them
        start.record()
        for _ in range(copies):
            dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / copies)
    return statistics.median(times[1:]) * nbytes / chunk


def judge_run(
    run: JudgedRun,
    *,
    sets: int = 1,
    echo: Echo | None = None,
    job: JobSpec,
    device: torch.device,
    result: JobResult,
    returned: list[torch.Tensor],
    link: Any,
) -> CandidateTiming:
    """The candidate's statistics from the judged run, and the bound on its claims."""
    opts = job.timing
    if device.type != "cuda":
        assert echo is not None
        null = statistics.median(echo.samples) if echo.samples else 0.0
        # The judge's view of one call (the reference's comes the same way, through its
        # echo, so identical kernels are measured identically).
        times = [max((t.bracket_ms - null) / sets, 0.0) for t in run.trials]
        stats = compute_stats(
            times, "cpu_wall_clock", warmup_calls=run.warmup_calls, stop_reason=run.stop_reason
        )
        claims = [t.claim_ms for t in run.trials if t.claim_ms is not None]
        result.metadata["judge_clock"] = {
            "null_ms": round(null, 6),
            "claimed_median_ms": round(statistics.median(claims), 6) if claims else None,
            "source": "the judge's wall clock less its echo's empty trials, per call; the "
            "claims are not used",
        }
        result.add_check("timing_consistent_with_judge_clock", True, "timed by the judge")
        unresolved = _unresolved([t.bracket_ms for t in run.trials], null, "the kernel")
        if unresolved:
            result.warn(unresolved)
        timing = CandidateTiming(stats, run, stats.median, samples=times)
        if echo.ref_samples:
            timing.ref_samples = [max((b - null) / sets, 0.0) for b in echo.ref_samples]
            timing.ref_stats = compute_stats(
                timing.ref_samples, "cpu_wall_clock", stop_reason=run.stop_reason
            )
            unresolved = _unresolved(echo.ref_samples, null, "the reference")
            if unresolved:
                result.warn(unresolved)
                timing.ref_warnings.append(unresolved)
        return timing
    clock = link.clock
    null = clock.null_ms if clock is not None and clock.null_ms is not None else 0.0
    copy = _copy_ms(returned, device)
    counted = run.counted_trials()
    trials = [t for t in counted if math.isfinite(t.bracket_ms) and t.claim_ms is not None]
    method = "cuda_event"
    if opts.cuda_graph and not any("CUDA-graph capture failed" in w for w in run.warnings):
        method = "cuda_graph"
    views = [t.bracket_ms - null - copy for t in trials]
    judged_ms = statistics.median(views) if views else math.inf
    result.metadata["judge_clock"] = {
        "null_ms": round(null, 6),
        "copy_ms": round(copy, 6),
        "judged_median_ms": round(judged_ms, 6),
        "empty_window_claim_ms": (
            round(clock.null_claim_ms, 6)
            if clock is not None and clock.null_claim_ms is not None
            else None
        ),
        "allowance": {"fraction": ALLOWANCE_FRACTION, "ms": ALLOWANCE_MS},
        "source": "the judge's CUDA events around each trial, ordered on the device by "
        "words both processes map (less its empty trial and the copy of returned outputs)",
    }
    if len(trials) < max(1, len(counted) // 2):
        message = (
            f"the kernel's process reported its time for {len(trials)} of "
            f"{len(counted)} timed trials: its timing cannot be checked"
        )
        _refuse(result, message)
        return CandidateTiming(compute_stats([math.inf], method), run, judged_ms)
    # Each trial's time is its claim, raised to the judge's view less the allowance where the
    # claim is lower: a claim can only make a trial look slower than the judge saw it.
    times = [
        max(t.claim_ms or 0.0, v - max(ALLOWANCE_FRACTION * v, ALLOWANCE_MS))
        for t, v in zip(trials, views, strict=True)
    ]
    stats = compute_stats(
        times, method, l2_flush=opts.l2_flush, warmup_calls=run.warmup_calls,
        stop_reason=run.stop_reason,
    )  # fmt: skip
    stats = replace(
        stats,
        spin_us=run.spin_us,
        enqueue_ms=run.enqueue_ms,
        launch_not_hidden_trials=run.unhidden,
    )
    # The verdict on the claims, over the trials whose call was enqueued before the device
    # reached it: in the others (a call that synchronises with the host) the GPU switched
    # back to the judge's waiting context at every host gap, and the bracket holds those
    # switches too.
    hidden = [(t.claim_ms or 0.0, v) for t, v in zip(trials, views, strict=True) if t.hidden]
    if len(hidden) >= max(1, len(trials) // 2):
        claimed = statistics.median(c for c, _ in hidden)
        seen = statistics.median(v for _, v in hidden)
        ok, allowance = within_bound(claimed, seen)
        if not ok:
            message = (
                f"the kernel's process reported a median of {claimed:.4g} ms per trial, but "
                f"the judge's clock saw {seen:.4g} ms of work in each (its bracket less an "
                f"empty trial; allowance {allowance:.3g} ms)"
            )
            if claimed < GROSS_FRACTION * seen and seen - claimed > GROSS_MS:
                _refuse(result, message + ": its timing cannot be trusted")
            else:
                # Within what the judge's bracket can hold besides the work (a second stream's
                # context switch took up to ~2 ms on an H200): not a verdict, but the times
                # reported are the judge's, so the claim bought nothing.
                message += ": the times reported are the judge's view, not the claims"
                result.add_check("timing_consistent_with_judge_clock", False, message, fatal=False)
                result.warn(message)
            return CandidateTiming(stats, run, judged_ms, _not_hidden(run), samples=times)
    result.add_check(
        "timing_consistent_with_judge_clock",
        True,
        f"{len(hidden)} of {len(trials)} trials bounded by the judge's clock"
        + ("" if len(hidden) >= max(1, len(trials) // 2) else "; the rest took its view"),
    )
    return CandidateTiming(stats, run, judged_ms, _not_hidden(run), samples=times)


def _unresolved(brackets: list[float], null: float, who: str) -> str:
    """On the cpu: a warning when most of `who`'s trials (`brackets`, ms) took no longer than
    the echo's empty trial (`null`), so its time reads 0 and no speedup is given; "" when they
    took longer."""
    if not brackets or statistics.median(brackets) > null:
        return ""
    return (
        f"{who} took no measurable time on the judge's clock: its median trial "
        f"({statistics.median(brackets):.4g} ms) was not longer than an empty one "
        f"({null:.4g} ms) on this machine now (a busy cpu), so its time reads 0 and no "
        "speedup is given; time it again, or on larger inputs"
    )


def _not_hidden(run: JudgedRun) -> str:
    trials = len(run.counted_trials())
    if trials == 0 or run.unhidden <= 0.1 * trials:
        return ""
    return (
        f"launch not hidden: in {run.unhidden} of {trials} trials the candidate had not "
        f"enqueued its call when the device reached it (median {run.enqueue_ms:.4g} ms from "
        "the judge's go to its answer), so the time includes host time (the call synchronises "
        "with the host, or launches faster kernels than the host can enqueue)"
    )


def _refuse(result: JobResult, message: str) -> None:
    result.add_check("timing_consistent_with_judge_clock", False, message)
    result.correctness = False
    result.fail("mismatch", message)
    result.warn(message)
