"""Timing: warm-up, adaptive trials, statistics (DESIGN.md "Evaluation protocol").

GPU ("cuda_event"): before every trial, outside the timed window, the persisting L2 lines
are reset (cuCtxResetPersistingL2Cache, best effort) and a buffer of 2x the L2 size (at
least 64 MiB) is overwritten; CUDA events on the current stream bracket the call. After
the end event a device-wide synchronize and a host clock give a second, device-synchronised
time per trial: work the call left running on other streams shows up there, not in the
events ("work outside the launch stream"). "cuda_graph" captures the call once and times
graph replays the same way. CPU ("cpu_wall_clock"): perf_counter_ns around each call.

Trials continue until the relative standard error of the mean is under rse_target, or
max_trials, or budget_ms of trial-loop wall time, but never fewer than min_trials.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from kforge_worker.spec import TimingOptions

MIN_FLUSH_BYTES = 64 << 20
STREAM_SKEW_RATIO = 0.5  # device-synchronised median may exceed the event median by 50 %...
STREAM_SKEW_FLOOR_MS = 0.05  # ...or by 0.05 ms, whichever is larger


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
    stop_reason: str = ""  # rse_target | max_trials | budget
    device_sync_median: float | None = None


@dataclass
class TimingReport:
    stats: TimingStats
    warnings: list[str] = field(default_factory=list)
    stream_skew: str = ""  # why the device-synchronised time is far above the event time


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


def _warm_up(fn: Callable[[], object], opts: TimingOptions, sync: Callable[[], None]) -> int:
    calls = 0
    start = time.perf_counter_ns()
    while calls < opts.warmup_calls or (time.perf_counter_ns() - start) / 1e6 < opts.warmup_ms:
        fn()
        sync()
        calls += 1
    return calls


# Per-trial hooks, both outside the timed window: `before_trial()` runs before the cache
# flush (the candidate process re-poisons its outputs there); `after_trial(index, ms)` runs
# after the trial's synchronisation and returns True to stop (the judge's gate, see
# candidate.py).
BeforeTrial = Callable[[], None]
AfterTrial = Callable[[int, float], bool]


def time_cpu(
    fn: Callable[[], object],
    opts: TimingOptions,
    *,
    before_trial: BeforeTrial | None = None,
    after_trial: AfterTrial | None = None,
) -> TimingReport:
    """Wall-clock timing on the CPU (no cache flush)."""
    warmups = _warm_up(fn, opts, lambda: None)
    samples: list[float] = []
    loop_start = time.perf_counter_ns()
    while True:
        if before_trial is not None:
            before_trial()
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
        stop = after_trial(len(samples) - 1, samples[-1]) if after_trial is not None else False
        reason = stop_reason(samples, opts, (time.perf_counter_ns() - loop_start) / 1e6)
        if stop and reason is None:
            reason = "judge"
        if reason is not None:
            break
    return TimingReport(
        compute_stats(samples, "cpu_wall_clock", warmup_calls=warmups, stop_reason=reason)
    )


class L2Flusher:
    """Evicts the GPU's L2 between trials: reset persisting lines, then overwrite 2x L2."""

    def __init__(self, device: torch.device) -> None:
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
        self.nbytes = max(2 * l2, MIN_FLUSH_BYTES)
        self._buffer = torch.empty(self.nbytes, dtype=torch.uint8, device=device)
        self._fill = 0
        self._reset = _persisting_l2_reset()
        self.persisting_reset_ok = self._reset is not None

    def flush(self) -> None:
        if self._reset is not None and self._reset() != 0:
            self._reset = None
            self.persisting_reset_ok = False
        self._fill = (self._fill + 1) & 0xFF
        self._buffer.fill_(self._fill)


def _persisting_l2_reset() -> Callable[[], int] | None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return lambda: int(fn())


def time_cuda(
    fn: Callable[[], object],
    opts: TimingOptions,
    device: torch.device,
    *,
    before_trial: BeforeTrial | None = None,
    after_trial: AfterTrial | None = None,
) -> TimingReport:
    """CUDA-event timing with L2 flush and a device-synchronised cross-check."""
    warnings: list[str] = []
    warmups = _warm_up(fn, opts, torch.cuda.synchronize)
    target: Callable[[], object] = fn
    method = "cuda_event"
    if opts.cuda_graph:
        graph = _capture_graph(fn, warnings)
        if graph is not None:
            target = graph.replay
            method = "cuda_graph"
    flusher = L2Flusher(device) if opts.l2_flush else None
    if flusher is not None and not flusher.persisting_reset_ok:
        warnings.append("could not reset the persisting L2 cache (cuCtxResetPersistingL2Cache)")
    stream = torch.cuda.current_stream(device)
    events: list[float] = []
    synced: list[float] = []
    loop_start = time.perf_counter_ns()
    while True:
        if before_trial is not None:
            before_trial()
        if flusher is not None:
            flusher.flush()
        torch.cuda.synchronize(device)
        start_evt = torch.cuda.Event(enable_timing=True)
        end_evt = torch.cuda.Event(enable_timing=True)
        host_start = time.perf_counter_ns()
        start_evt.record(stream)
        target()
        end_evt.record(stream)
        torch.cuda.synchronize(device)
        synced.append((time.perf_counter_ns() - host_start) / 1e6)
        events.append(start_evt.elapsed_time(end_evt))
        stop = after_trial(len(events) - 1, events[-1]) if after_trial is not None else False
        reason = stop_reason(events, opts, (time.perf_counter_ns() - loop_start) / 1e6)
        if stop and reason is None:
            reason = "judge"
        if reason is not None:
            break
    sync_median = percentile(sorted(synced), 50)
    stats = compute_stats(
        events,
        method,
        l2_flush=flusher is not None,
        warmup_calls=warmups,
        stop_reason=reason,
        device_sync_median=sync_median,
    )
    skew = ""
    if sync_median - stats.median > max(STREAM_SKEW_RATIO * stats.median, STREAM_SKEW_FLOOR_MS):
        skew = (
            f"work outside the launch stream: device-synchronised median {sync_median:.4g} ms "
            f"vs CUDA-event median {stats.median:.4g} ms (work on other streams or on the "
            "host is not covered by the events)"
        )
        warnings.append(skew)
    return TimingReport(stats, warnings, stream_skew=skew)


def _capture_graph(fn: Callable[[], object], warnings: list[str]) -> torch.cuda.CUDAGraph | None:
    """Captures one call on a side stream; None (with a warning) if it cannot be captured."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            fn()
        torch.cuda.synchronize()
        graph.replay()
        torch.cuda.synchronize()
        return graph
    except Exception as e:  # any capture failure falls back to eager timing
        torch.cuda.synchronize()
        warnings.append(f"CUDA-graph capture failed, timed eager launches instead: {e}")
        return None
