"""Timing: warm-up, adaptive trials (docs/evaluation-protocol.md "Timing").

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
max_trials, or budget_ms of trial-loop wall time, but never fewer than min_trials
(stats.stop_reason; the statistics, their warnings and a speedup's interval are stats.py).

The loop knows nothing of jobs or results: `time_gpu(fn, opts, device, hook)` and
`time_cpu(fn, opts, hook)` return a TimingReport, and activity.py's profiled pass re-runs the
same trial protocol (`GpuTrialRunner`) on `TimingReport.call`. The candidate process runs
them on the candidate (candidate/server.py), the judge on the reference and, with the candidate's
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

from kforge_worker.core.spec import TimingOptions
from kforge_worker.timing.stats import (
    TimingStats,
    TrialSample,
    compute_stats,
    launch_not_hidden_message,
    percentile,
    stop_reason,
    stream_skew_message,
)

MIN_FLUSH_BYTES = 64 << 20

# Spin sizing (spin_us_for): factor x the measured enqueue time + margin, within [floor, cap].
SPIN_FLOOR_US = 10.0
SPIN_FACTOR = 1.5
SPIN_MARGIN_US = 10.0
SPIN_CAP_US = 20_000.0
ENQUEUE_SAMPLES = 7  # calls whose host enqueue time is measured before the trials
MAX_SPIN_GROWTHS = 4  # a call that synchronises with the host cannot be covered by any spin

# Names of the profiler ranges the trial protocol opens (activity.py finds them in traces).
FLUSH_RANGE = "kforge_flush"
SPIN_RANGE = "kforge_spin"
WINDOW_RANGE = "kforge_window"
# The caller's between-trial step in a profiled pass (input rotation, output re-poisoning).
PREPARE_RANGE = "kforge_prepare"

# The empty windows whose median event time is the window overhead (window_overhead_ms; the
# floor of a time it is taken from is stats.EVENT_RESOLUTION_MS).
WINDOW_PROBE_TRIALS = 21
WINDOW_PROBE_SPIN_US = 100.0


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


def prepared_call(
    call: Callable[[], object], opts: TimingOptions, device: torch.device, warnings: list[str]
) -> tuple[int, Callable[[], object]]:
    """Warms `call` up (warm_up) and, with `opts.cuda_graph`, captures it: the
    warm-up calls and what each trial runs (a graph replay returns the captured outputs)."""
    sync: Callable[[], None] = (
        (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    )
    warmups = warm_up(call, opts, sync)
    if not (opts.cuda_graph and device.type == "cuda"):
        return warmups, call
    captured: list[object] = [None]

    def capture() -> object:
        captured[0] = call()
        return captured[0]

    graph = capture_graph(capture, warnings)
    if graph is None:
        return warmups, call

    def replay() -> object:
        graph.replay()
        return captured[0]

    return warmups, replay
