"""Timing: warm-up, adaptive trials, statistics (docs/evaluation-protocol.md "Timing").

GPU, method "cuda_event" (docs/architecture.md "What the GPU time means"). Per trial, all
outside the timed window:
1. the per-trial hook, if any (`TrialHook`: the caller's own step; the candidate process
   copies the next input set in and re-poisons its outputs there);
2. the persisting L2 lines are reset (cuCtxResetPersistingL2Cache, best effort) and a
   buffer of max(2 x L2, 64 MiB) is READ (a sum into a one-element tensor): the previous
   trial's dirty lines are written back now, and L2 is left holding clean lines of the
   buffer, as Nsight Compute's `--cache-control all` leaves it;
3. the device is synchronised, then a spin kernel (a device-side busy wait on
   %globaltimer, `GlobalTimerSpin`) is enqueued on the launch stream, long enough to cover
   the host's enqueue of the call (measured before the trials: `spin_us_for`);
then the start event, the call, the end event, all enqueued while the spin runs, so the
GPU starts the call's first kernel as soon as the spin ends: the window holds the device's
time for the call, not the host's launch of it. After the end event the host checks
whether the start event had already completed (the spin ran out before the call was
enqueued: "launch not hidden"; such a trial holds the host's launch, tens of microseconds
that would dominate the mean of a few trials of a small kernel, so it is not counted and is
run again with a longer spin, at most MAX_SPIN_GROWTHS times; after that the trials count,
and a warning says so) and synchronises the whole device; the host clock from the spin's
expected end to that synchronisation gives a second, device-synchronised time per trial:
work the call left running on other streams shows up there, not in the events ("work
outside the launch stream").

"cuda_graph" captures the call once and times graph replays the same way (one launch per
trial; the spin still hides it). CPU ("cpu_wall_clock"): perf_counter_ns around each call.

Trials continue until the relative standard error of the mean is under rse_target, or
max_trials, or budget_ms of trial-loop wall time, but never fewer than min_trials.

The loop knows nothing of jobs or results: `time_gpu(fn, opts, device, hook)` and
`time_cpu(fn, opts, hook)` return a TimingReport, and activity.py's profiled pass re-runs the
same trial protocol (`GpuTrialRunner`) on `TimingReport.call`. The candidate process runs
them on the candidate (candidate.py), the judge on the reference and, with the candidate's
spin, on an empty call (evaluate.py `_null_overhead_ms`: the judge's wall-clock check).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import torch

from kforge_worker.spec import TimingOptions

MIN_FLUSH_BYTES = 64 << 20
STREAM_SKEW_RATIO = 0.5  # device-synchronised median may exceed the event median by 50 %...
STREAM_SKEW_FLOOR_MS = 0.05  # ...or by 0.05 ms, whichever is larger

# Spin sizing (spin_us_for): factor x the measured enqueue time + margin, within [floor, cap].
SPIN_FLOOR_US = 10.0
SPIN_FACTOR = 1.5
SPIN_MARGIN_US = 10.0
SPIN_CAP_US = 20_000.0
ENQUEUE_SAMPLES = 7  # calls whose host enqueue time is measured before the trials
LAUNCH_NOT_HIDDEN_FRACTION = 0.1  # more uncovered trials than this is flagged
MAX_SPIN_GROWTHS = 4  # a call that synchronises with the host cannot be covered by any spin

# Names of the profiler ranges the trial protocol opens (activity.py finds them in traces).
FLUSH_RANGE = "kforge_flush"
SPIN_RANGE = "kforge_spin"
WINDOW_RANGE = "kforge_window"
# The caller's between-trial step in a profiled pass (input rotation, output re-poisoning).
PREPARE_RANGE = "kforge_prepare"

# The empty windows whose median event time is the window overhead (window_overhead_ms), and
# the floor of a time it is taken from (CUDA events resolve about 0.5 us).
WINDOW_PROBE_TRIALS = 21
WINDOW_PROBE_SPIN_US = 100.0
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


# Called twice per timed trial, both outside the timed window: hook(index, None) before the
# trial's flush (its return value is ignored), and hook(index, sample) after the trial's
# synchronisation, which returns True to stop timing after this trial (the judge's gate:
# stop_reason "judge"). A GPU trial run again because its launch was not hidden gets
# hook(index, None) again and no hook(index, sample) for the first run. An exception raised
# by the hook ends timing with it.
TrialHook = Callable[[int, TrialSample | None], bool]


@dataclass
class TimingReport:
    stats: TimingStats
    warnings: list[str] = field(default_factory=list)
    stream_skew: str = ""  # why the device-synchronised time is far above the event time
    launch_not_hidden: str = ""  # why the event time may include host launch time
    # What was timed (the call, or the replay of its CUDA graph; keeps the graph alive), for
    # activity.py's profiled pass. None on cpu.
    call: Callable[[], object] | None = field(default=None, repr=False, compare=False)
    # Every timed trial's time (ms), in order: what the speedup's interval resamples.
    samples: list[float] = field(default_factory=list, repr=False, compare=False)


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


def window_overhead_ms(device: torch.device, *, l2_flush: bool) -> float:
    """The event window's own time on `device`: the median event time of WINDOW_PROBE_TRIALS
    trials of the protocol (flush, spin, start event, end event) with nothing in the
    window. About 1.25 us on an H200; an event time less it matches Nsight Compute's
    gpu__time_duration of the same work within a few tenths of a microsecond."""
    runner = GpuTrialRunner(device, l2_flush=l2_flush, spin_us=WINDOW_PROBE_SPIN_US)
    samples = [runner.run(_nothing) for _ in range(WINDOW_PROBE_TRIALS)]
    # Only windows whose two events were both enqueued while the spin ran hold nothing but
    # the events (a spin of SPIN_FLOOR_US was too short for that in some processes, whose
    # probes then read 3-9 us instead of 1.25 on an H200).
    hidden = [s.event_ms for s in samples if s.launch_hidden] or [s.event_ms for s in samples]
    return statistics.median(hidden)


def _nothing() -> None:
    return None


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


def spin_us_for(enqueue_ms: float) -> float:
    """The spin that covers a call whose host enqueue takes `enqueue_ms`, in microseconds:
    SPIN_FACTOR x enqueue + SPIN_MARGIN_US, at least SPIN_FLOOR_US, at most SPIN_CAP_US."""
    if not math.isfinite(enqueue_ms) or enqueue_ms < 0:
        return SPIN_CAP_US
    return min(SPIN_CAP_US, max(SPIN_FLOOR_US, SPIN_FACTOR * enqueue_ms * 1e3 + SPIN_MARGIN_US))


def next_spin_us(spin_us: float, observed_enqueue_ms: float) -> float:
    """The spin after a trial whose enqueue (`observed_enqueue_ms`) outlasted `spin_us`:
    at least double, and enough for what was observed; unchanged once the cap is reached
    (a call that synchronises the host cannot be covered by any spin)."""
    if spin_us >= SPIN_CAP_US:
        return spin_us
    return min(SPIN_CAP_US, max(2.0 * spin_us, spin_us_for(observed_enqueue_ms)))


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


def warm_up(fn: Callable[[], object], opts: TimingOptions, sync: Callable[[], None]) -> int:
    calls = 0
    start = time.perf_counter_ns()
    while calls < opts.warmup_calls or (time.perf_counter_ns() - start) / 1e6 < opts.warmup_ms:
        fn()
        sync()
        calls += 1
    return calls


def _next_reason(
    samples: Sequence[float], opts: TimingOptions, loop_start_ns: int, stop: bool
) -> str | None:
    reason = stop_reason(samples, opts, (time.perf_counter_ns() - loop_start_ns) / 1e6)
    return "judge" if stop and reason is None else reason


def time_cpu(
    fn: Callable[[], object], opts: TimingOptions, hook: TrialHook | None = None
) -> TimingReport:
    """Wall-clock timing on the CPU (no cache flush); `hook` as for time_gpu."""
    warmups = warm_up(fn, opts, lambda: None)
    samples: list[float] = []
    loop_start = time.perf_counter_ns()
    while True:
        index = len(samples)
        if hook is not None:
            hook(index, None)
        t0 = time.perf_counter_ns()
        fn()
        ms = (time.perf_counter_ns() - t0) / 1e6
        samples.append(ms)
        stop = hook(index, TrialSample(ms, ms, True)) if hook is not None else False
        reason = _next_reason(samples, opts, loop_start, stop)
        if reason is not None:
            break
    return TimingReport(
        compute_stats(samples, "cpu_wall_clock", warmup_calls=warmups, stop_reason=reason),
        samples=samples,
    )


class L2Flusher:
    """Evicts the GPU's L2 between trials: reset persisting lines, then READ 2x L2, so the
    previous trial's dirty lines are written back here and L2 ends up holding clean lines."""

    def __init__(self, device: torch.device) -> None:
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
        self.nbytes = max(2 * l2, MIN_FLUSH_BYTES)
        self._buffer = torch.ones(self.nbytes // 4, dtype=torch.float32, device=device)
        self._sink = torch.empty((), dtype=torch.float32, device=device)
        self._reset = _persisting_l2_reset()
        self.persisting_reset_ok = self._reset is not None

    def flush(self) -> None:
        if self._reset is not None and self._reset() != 0:
            self._reset = None
            self.persisting_reset_ok = False
        torch.sum(self._buffer, dim=0, out=self._sink)


def _persisting_l2_reset() -> Callable[[], int] | None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return lambda: int(fn())


# A spin on the device's %globaltimer (ns), the same kernel as the native worker's
# kforge_spin (src/kforge/cuda/gpu_timer.cc; tests/python/test_timing.py checks the PTX is
# the same): unlike torch.cuda._sleep, which counts SM cycles and so depends on the clock the
# GPU runs at when it is calibrated (an H200 measured 345 MHz idle and 1980 MHz busy: a spin
# calibrated idle ran 5.7 times short), it waits a fixed time.
_SPIN_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry kforge_spin(.param .u64 kforge_spin_ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [kforge_spin_ns];
  mov.u64 %rd2, %globaltimer;
$L_spin:
  mov.u64 %rd3, %globaltimer;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra $L_spin;
  ret;
}
"""


class GlobalTimerSpin:
    """Spins a given number of microseconds on a stream of the current (torch's) context;
    loaded once per process and device (module load through the driver API)."""

    _functions: ClassVar[dict[int, ctypes.c_void_p]] = {}

    def __init__(self, device: torch.device) -> None:
        self._lib = ctypes.CDLL("libcuda.so.1")
        key = _device_index(device)
        if key not in self._functions:
            torch.cuda.set_device(key)
            torch.empty(0, device=device)  # torch binds its context lazily
            module = ctypes.c_void_p()
            self._check(self._lib.cuModuleLoadData(ctypes.byref(module), _SPIN_PTX + b"\0"))
            fn = ctypes.c_void_p()
            self._check(self._lib.cuModuleGetFunction(ctypes.byref(fn), module, b"kforge_spin"))
            self._functions[key] = fn
        self._fn = self._functions[key]

    @staticmethod
    def _check(result: int) -> None:
        if result != 0:
            raise RuntimeError(f"loading the spin kernel failed with CUresult {result}")

    def spin(self, us: float, stream: torch.cuda.Stream) -> None:
        if us <= 0:
            return
        ns = ctypes.c_uint64(int(us * 1e3))
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(ns), ctypes.c_void_p))
        result = self._lib.cuLaunchKernel(
            self._fn, 1, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(stream.cuda_stream), params, None
        )
        self._check(result)


class Spinner:
    """A device-side busy wait of a given length on the current stream (GlobalTimerSpin: a
    fixed time whatever clock the GPU runs at; torch.cuda._sleep, which counts SM cycles,
    was used before and ran short when its calibration saw an idle GPU's clock)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        try:
            self._spin: GlobalTimerSpin | None = GlobalTimerSpin(device)
        except (OSError, RuntimeError, AttributeError):
            self._spin = None

    @property
    def available(self) -> bool:
        return self._spin is not None

    def spin(self, us: float) -> None:
        if self._spin is not None and us > 0:
            self._spin.spin(us, torch.cuda.current_stream(self.device))


_FLUSHERS: dict[int, L2Flusher] = {}
_SPINNERS: dict[int, Spinner] = {}


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def flusher_for(device: torch.device) -> L2Flusher:
    """The device's flusher, allocated once per process."""
    key = _device_index(device)
    if key not in _FLUSHERS:
        _FLUSHERS[key] = L2Flusher(device)
    return _FLUSHERS[key]


def spinner_for(device: torch.device) -> Spinner:
    key = _device_index(device)
    if key not in _SPINNERS:
        _SPINNERS[key] = Spinner(device)
    return _SPINNERS[key]


@contextlib.contextmanager
def _no_range(name: str) -> Iterator[None]:
    yield


class GpuTrialRunner:
    """One trial of the GPU protocol (see the module docstring). `annotate` wraps the flush,
    the spin and the call in profiler ranges (FLUSH_RANGE, SPIN_RANGE, WINDOW_RANGE) so a
    profiled pass can tell the call's kernels from the protocol's own."""

    def __init__(
        self,
        device: torch.device,
        *,
        l2_flush: bool,
        spin_us: float,
        annotate: bool = False,
    ) -> None:
        self.device = device
        self.flusher = flusher_for(device) if l2_flush else None
        self.spinner = spinner_for(device)
        self.spin_us = spin_us if self.spinner.available else 0.0
        self.stream = torch.cuda.current_stream(device)
        self._range: Callable[[str], contextlib.AbstractContextManager[object]] = (
            torch.profiler.record_function if annotate else _no_range
        )
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self.last_enqueue_ms = 0.0  # host time to enqueue the call in the last trial

    def run(self, call: Callable[[], object]) -> TrialSample:
        if self.flusher is not None:
            with self._range(FLUSH_RANGE):
                self.flusher.flush()
        torch.cuda.synchronize(self.device)
        spin_enqueued = time.perf_counter_ns()
        if self.spin_us > 0:
            with self._range(SPIN_RANGE):
                self.spinner.spin(self.spin_us)
        self._start.record(self.stream)
        host_start = time.perf_counter_ns()
        with self._range(WINDOW_RANGE):
            call()
        self.last_enqueue_ms = (time.perf_counter_ns() - host_start) / 1e6
        self._end.record(self.stream)
        hidden = self.spin_us > 0 and not self._start.query()
        torch.cuda.synchronize(self.device)
        done = time.perf_counter_ns()
        # The device-synchronised time starts where the spin is expected to end.
        window_start = max(host_start, spin_enqueued + int(self.spin_us * 1e3))
        return TrialSample(
            event_ms=self._start.elapsed_time(self._end),
            synced_ms=max(0.0, (done - window_start) / 1e6),
            launch_hidden=hidden,
        )


def measure_enqueue_ms(call: Callable[[], object], device: torch.device) -> float:
    """Median host time to enqueue one call (no synchronisation inside the measurement)."""
    samples = []
    for _ in range(ENQUEUE_SAMPLES):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    torch.cuda.synchronize(device)
    return statistics.median(samples)


def time_gpu(
    fn: Callable[[], object],
    opts: TimingOptions,
    device: torch.device,
    hook: TrialHook | None = None,
    *,
    spin_us: float | None = None,
) -> TimingReport:
    """Times `fn` on the GPU with the trial protocol of the module docstring. `spin_us`
    fixes the spin (and keeps it, whatever the trials show) instead of sizing it from the
    call's enqueue time: the judge's empty trials mirror a candidate's spin that way."""
    warnings: list[str] = []
    warmups = warm_up(fn, opts, lambda: torch.cuda.synchronize(device))
    target: Callable[[], object] = fn
    method = "cuda_event"
    if opts.cuda_graph:
        graph = capture_graph(fn, warnings)
        if graph is not None:
            target = graph.replay
            method = "cuda_graph"
    enqueue_ms = measure_enqueue_ms(target, device)
    fixed_spin = spin_us is not None
    runner = GpuTrialRunner(
        device,
        l2_flush=opts.l2_flush,
        spin_us=spin_us if spin_us is not None else spin_us_for(enqueue_ms),
    )
    if runner.flusher is not None and not runner.flusher.persisting_reset_ok:
        warnings.append("could not reset the persisting L2 cache (cuCtxResetPersistingL2Cache)")
    if not runner.spinner.available:
        warnings.append(
            "no device-side spin (the driver refused its kernel): the event time includes "
            "the host's launch of the call"
        )
    events: list[float] = []
    synced: list[float] = []
    uncovered = 0  # counted trials whose launch was not hidden
    growths = 0
    loop_start = time.perf_counter_ns()
    while True:
        index = len(events)
        if hook is not None:
            hook(index, None)
        sample = runner.run(target)
        if runner.spin_us > 0 and not sample.launch_hidden:
            if growths < MAX_SPIN_GROWTHS and not fixed_spin:
                # Run again with a longer spin: this trial's time holds the host's launch.
                growths += 1
                runner.spin_us = next_spin_us(runner.spin_us, runner.last_enqueue_ms)
                continue
            uncovered += 1
        events.append(sample.event_ms)
        synced.append(sample.synced_ms)
        stop = hook(index, sample) if hook is not None else False
        reason = _next_reason(events, opts, loop_start, stop)
        if reason is not None:
            break
    sync_median = percentile(sorted(synced), 50)
    stats = compute_stats(
        events,
        method,
        l2_flush=runner.flusher is not None,
        warmup_calls=warmups,
        stop_reason=reason,
        device_sync_median=sync_median,
    )
    stats = _with_spin(stats, runner, enqueue_ms, uncovered)
    report = TimingReport(stats, warnings, call=target, samples=events)
    report.stream_skew = stream_skew_message(sync_median, stats.median)
    if report.stream_skew:
        warnings.append(report.stream_skew)
    if runner.spin_us > 0:
        report.launch_not_hidden = launch_not_hidden_message(uncovered, len(events), enqueue_ms)
        if report.launch_not_hidden:
            warnings.append(report.launch_not_hidden)
    return report


def _with_spin(
    stats: TimingStats, runner: GpuTrialRunner, enqueue_ms: float, uncovered: int
) -> TimingStats:
    return replace(
        stats,
        spin_us=runner.spin_us,
        enqueue_ms=enqueue_ms,
        launch_not_hidden_trials=uncovered if runner.spin_us > 0 else None,
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


def capture_graph(fn: Callable[[], object], warnings: list[str]) -> torch.cuda.CUDAGraph | None:
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
