"""Statistics of timed trials (docs/evaluation-protocol.md "Statistics"): `TimingStats` and how it
is computed from the trials (compute_stats), less the event window's own time
(without_window_overhead), the stop rule of the trial loop (stop_reason), the 95 % interval of
a speedup (speedup_interval, speedup_verdict) and the warnings of a timing. Pure arithmetic:
the trial protocol that produces the samples is timing.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kforge_worker.core.spec import TimingOptions

STREAM_SKEW_RATIO = 0.5  # device-synchronised median may exceed the event median by 50 %...
STREAM_SKEW_FLOOR_MS = 0.05  # ...or by 0.05 ms, whichever is larger
LAUNCH_NOT_HIDDEN_FRACTION = 0.1  # more uncovered trials than this is flagged
# The floor of a time the window overhead is taken from (CUDA events resolve about 0.5 us).
EVENT_RESOLUTION_MS = 0.0005


@dataclass(frozen=True)
class TimingStats:
    """Statistics of one timed kernel, in milliseconds."""

    mean: float
    std: float
    min: float
    max: float
    median: float
    percentile_5: float
    percentile_95: float
    percentile_99: float
    trials: int
    rse: float
    method: str  # cuda_event | cuda_graph | cpu_wall_clock
    unit: str = "ms"
    l2_flush: bool = False
    warmup_calls: int = 0
    stop_reason: str = ""  # rse_target | max_trials | budget | judge
    device_sync_median: float | None = None
    # GPU only (None on cpu): the spin before the start event at the last trial, the median
    # host time to enqueue one call, and the trials whose enqueue the spin did not cover.
    spin_us: float | None = None
    enqueue_ms: float | None = None
    launch_not_hidden_trials: int | None = None
    # GPU only: the event window's own device time (`without_window_overhead`), subtracted
    # from every location statistic above, and the event-time median before that.
    window_overhead_us: float | None = None
    event_median: float | None = None


@dataclass(frozen=True)
class TrialSample:
    """One timed trial (ms): the event time (the wall clock on cpu) and the
    device-synchronised host time (the same on cpu)."""

    event_ms: float
    synced_ms: float
    launch_hidden: bool  # the call was fully enqueued before the spin ended (True on cpu)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def relative_standard_error(samples: Sequence[float]) -> float:
    """(std / sqrt(n)) / mean with the sample std; inf with fewer than two samples."""
    n = len(samples)
    if n < 2:
        return math.inf
    mean = sum(samples) / n
    if mean <= 0:
        return 0.0 if all(s == mean for s in samples) else math.inf
    var = sum((s - mean) ** 2 for s in samples) / (n - 1)
    return math.sqrt(var) / math.sqrt(n) / mean


def compute_stats(
    samples_ms: Sequence[float],
    method: str,
    *,
    l2_flush: bool = False,
    warmup_calls: int = 0,
    stop_reason: str = "",
    device_sync_median: float | None = None,
) -> TimingStats:
    if not samples_ms:
        raise ValueError("no timing samples")
    values = sorted(samples_ms)
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    rse = relative_standard_error(values) if n > 1 else 0.0
    return TimingStats(
        mean=mean,
        std=std,
        min=values[0],
        max=values[-1],
        median=percentile(values, 50),
        percentile_5=percentile(values, 5),
        percentile_95=percentile(values, 95),
        percentile_99=percentile(values, 99),
        trials=n,
        rse=rse,
        method=method,
        l2_flush=l2_flush,
        warmup_calls=warmup_calls,
        stop_reason=stop_reason,
        device_sync_median=device_sync_median,
    )


def without_window_overhead(stats: TimingStats, overhead_ms: float) -> TimingStats:
    """`stats` less the event window's own time (docs/architecture.md "What the GPU time
    means"): the event pair's cost, measured on an empty window (`window_overhead_ms`),
    which every event time holds and Nsight Compute's kernel duration does not. No
    statistic goes below EVENT_RESOLUTION_MS; the spread (std, rse) is unchanged."""

    def less(value: float) -> float:
        return max(EVENT_RESOLUTION_MS, value - overhead_ms)

    return replace(
        stats,
        mean=less(stats.mean),
        min=less(stats.min),
        max=less(stats.max),
        median=less(stats.median),
        percentile_5=less(stats.percentile_5),
        percentile_95=less(stats.percentile_95),
        percentile_99=less(stats.percentile_99),
        window_overhead_us=overhead_ms * 1e3,
        event_median=stats.median,
    )


SPEEDUP_CONFIDENCE = 0.95


SPEEDUP_RESAMPLES = 2000


# The bootstrap sees the spread of one run's trials, not what moves between runs (the
# machine's load, which process ran first): identical kernels through bench/identity.py read
# up to ~10 % apart on the 2-core cpu machine and ~3 % below 2^20 elements on an H200
# (docs/benchmarks.md). The interval is widened by this much on each side.
SPEEDUP_SYSTEMATIC = {"cpu": 0.10, "cuda": 0.03}


# Within one job on a GPU the candidate is timed through the judge's clock from its own process
# and the reference in the judge: the two paths read identical kernels of 2-6 us up to ~0.4 us
# apart on an H200 (docs/benchmarks.md, identity), which no fraction covers at every size. Each
# side's median is taken as uncertain by this much (ms) as well.
SPEEDUP_SYSTEMATIC_MS = {"cpu": 0.0, "cuda": 0.00025}


# With fewer trials than this on either side a bootstrap has too few values to resample (its
# interval collapses onto a few ratios), so the interval is the range of the ratios of any
# reference trial to any candidate trial instead: a verdict from it holds for every pairing.
SPEEDUP_MIN_TRIALS = 5


def speedup_interval(
    reference: Sequence[float],
    candidate: Sequence[float],
    *,
    seed: int = 0,
    systematic: float = 0.0,
    systematic_ms: float = 0.0,
) -> tuple[float, float] | None:
    """A SPEEDUP_CONFIDENCE interval of reference median / candidate median: the percentile
    bootstrap over both sides' trials, each resampled on its own (SPEEDUP_RESAMPLES times,
    with `seed`, so a result can be computed again); with fewer than SPEEDUP_MIN_TRIALS on a
    side, the range of trial-to-trial ratios. Widened by `systematic` (a fraction) on each
    side and by `systematic_ms` of uncertainty in each side's median (`widened_by_time`);
    None with fewer than 2 trials a side."""
    import numpy as np

    if len(reference) < 2 or len(candidate) < 2:
        return None
    if min(len(reference), len(candidate)) < SPEEDUP_MIN_TRIALS:
        low = min(reference) / max(*candidate, 1e-12)
        high = max(reference) / max(min(candidate), 1e-12)
        return widened_by_time(
            (low * (1.0 - systematic), high * (1.0 + systematic)),
            statistics.median(reference),
            statistics.median(candidate),
            systematic_ms,
        )
    rng = np.random.default_rng(seed)
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    ref_medians = np.median(ref[rng.integers(0, ref.size, (SPEEDUP_RESAMPLES, ref.size))], axis=1)
    cand_medians = np.median(
        cand[rng.integers(0, cand.size, (SPEEDUP_RESAMPLES, cand.size))], axis=1
    )
    ratio = ref_medians / np.maximum(cand_medians, 1e-12)
    tail = (1.0 - SPEEDUP_CONFIDENCE) / 2.0
    low, high = np.quantile(ratio, [tail, 1.0 - tail])
    return widened_by_time(
        (float(low) * (1.0 - systematic), float(high) * (1.0 + systematic)),
        statistics.median(reference),
        statistics.median(candidate),
        systematic_ms,
    )


def widened_by_time(
    interval: tuple[float, float], reference_ms: float, candidate_ms: float, absolute_ms: float
) -> tuple[float, float]:
    """`interval` of reference_ms / candidate_ms (medians) widened for `absolute_ms` of
    uncertainty in each: low by (1 - a/ref) / (1 + a/cand), high by (1 + a/ref) / (1 - a/cand),
    infinite when the candidate's median is not above a."""
    if absolute_ms <= 0:
        return interval
    ref = max(reference_ms, 1e-12)
    cand = max(candidate_ms, 1e-12)
    low = interval[0] * max(0.0, 1.0 - absolute_ms / ref) / (1.0 + absolute_ms / cand)
    if absolute_ms >= cand:
        return low, math.inf
    return low, interval[1] * (1.0 + absolute_ms / ref) / (1.0 - absolute_ms / cand)


def speedup_verdict(interval: tuple[float, float] | None) -> str | None:
    """`faster` when the whole interval is above 1, `slower` when below, else
    `indistinguishable` (identical kernels must read so); None without an interval."""
    if interval is None:
        return None
    low, high = interval
    if low > 1.0:
        return "faster"
    if high < 1.0:
        return "slower"
    return "indistinguishable"


def stop_reason(samples: Sequence[float], opts: TimingOptions, elapsed_ms: float) -> str | None:
    """Why to stop now, or None to take another trial."""
    n = len(samples)
    if n < max(1, opts.min_trials):
        return None
    if n >= opts.max_trials:
        return "max_trials"
    if elapsed_ms >= opts.budget_ms:
        return "budget"
    if n >= 2 and relative_standard_error(samples) < opts.rse_target:
        return "rse_target"
    return None


def launch_not_hidden_message(uncovered: int, trials: int, enqueue_ms: float) -> str:
    """The warning for trials whose call was not fully enqueued before the spin ended, or ""
    when they are at most LAUNCH_NOT_HIDDEN_FRACTION of the trials."""
    if trials <= 0 or uncovered <= LAUNCH_NOT_HIDDEN_FRACTION * trials:
        return ""
    return (
        f"launch not hidden: in {uncovered} of {trials} trials the host was still enqueueing "
        f"the call (median enqueue {enqueue_ms:.4g} ms) when the device reached the start "
        "event, so the event time includes host time (the call synchronises with the host, "
        "or launches faster kernels than the host can enqueue)"
    )


def stream_skew_message(sync_median: float, event_median: float) -> str:
    """The warning when the device-synchronised median is far above the event median."""
    if sync_median - event_median <= max(STREAM_SKEW_RATIO * event_median, STREAM_SKEW_FLOOR_MS):
        return ""
    return (
        f"work outside the launch stream: device-synchronised median {sync_median:.4g} ms "
        f"vs CUDA-event median {event_median:.4g} ms (work on other streams or on the "
        "host is not covered by the events)"
    )
