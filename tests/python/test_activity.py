"""Kernel activity: attribution of a (synthetic) Kineto trace to timed windows, and flags."""

from __future__ import annotations

import pytest

from kforge_worker.timing.activity import (
    DISAGREE_FLOOR_MS,
    KernelActivity,
    KernelRecord,
    WindowActivity,
    not_measured,
    summarize,
    timing_flags,
    union_length,
    windows_from_trace,
)
from kforge_worker.timing.stats import compute_stats
from kforge_worker.timing.timing import (
    FLUSH_RANGE,
    PREPARE_RANGE,
    SPIN_RANGE,
    WINDOW_RANGE,
    TimingReport,
)

LAUNCH = 7  # the launch stream's id in the trace
SIDE = 13


class Trace:
    """Builds a Kineto-style Chrome trace: host ranges, launches and device operations."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.corr = 100

    def range(self, name: str, ts: float, dur: float) -> None:
        self.events.append(
            {"ph": "X", "cat": "user_annotation", "name": name, "ts": ts, "dur": dur}
        )

    def launch(self, ts: float, *, driver: bool = False) -> int:
        self.corr += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_driver" if driver else "cuda_runtime",
                "name": "cuLaunchKernelEx" if driver else "cudaLaunchKernel",
                "ts": ts,
                "dur": 1.0,
                "args": {"correlation": self.corr},
            }
        )
        return self.corr

    def device(self, name, ts, dur, corr, *, stream=LAUNCH, cat="kernel", grid=(4, 1, 1)):
        args = {"stream": stream, "device": 0}
        if corr is not None:
            args["correlation"] = corr
        if cat == "kernel":
            args.update(grid=list(grid), block=[128, 1, 1])
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}
        )

    def trial(self, t0: float, kernels: list[tuple[str, float, float]], **kw) -> None:
        """flush at t0, spin at t0+100 (ends at device time t0+150), then the window."""
        self.range(FLUSH_RANGE, t0, 5)
        self.device("reduce_kernel", t0 + 10, 30, self.launch(t0 + 1))
        self.range(SPIN_RANGE, t0 + 100, 5)
        self.device("spin_kernel", t0 + 105, 45, self.launch(t0 + 101))
        self.range(WINDOW_RANGE, t0 + 110, 20)
        for i, (name, start, dur) in enumerate(kernels):
            corr = self.launch(t0 + 111 + i, driver=kw.get("driver", False))
            self.device(name, t0 + 150 + start, dur, corr, stream=kw.get("stream", LAUNCH))

    def json(self) -> dict:
        return {"schemaVersion": 1, "traceEvents": self.events}


def test_union_length_merges_overlaps():
    assert union_length([]) == 0
    assert union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert union_length([(0, 10), (2, 3)]) == 10


def test_windows_hold_only_the_calls_kernels():
    tr = Trace()
    tr.trial(0, [("add_kernel", 1, 6)])
    tr.trial(1000, [("add_kernel", 1, 7)], driver=True)  # Triton launches via the driver API
    windows = windows_from_trace(tr.json())
    assert [w.trial for w in windows] == [0, 1]
    for w, dur in zip(windows, (6, 7), strict=True):
        assert [op.name for op in w.ops] == ["add_kernel"]  # no flush, no spin
        assert w.launch_stream == LAUNCH and w.ops[0].duration_us == dur
        assert w.ops[0].grid == (4, 1, 1) and w.ops[0].block == (128, 1, 1)


def test_unrecorded_launches_are_attributed_by_time():
    tr = Trace()
    tr.trial(0, [("add_kernel", 1, 6)])
    # A kernel whose launch is not in the trace (another thread), during trial 0's window...
    tr.device("thread_kernel", 170, 5, None, stream=SIDE)
    tr.trial(1000, [("add_kernel", 1, 6)])
    # ...and one before trial 0's spin ended, which overlaps nothing of the window.
    tr.device("early", 0, 2, None, stream=SIDE)
    windows = windows_from_trace(tr.json())
    assert [op.name for op in windows[0].ops] == ["add_kernel", "thread_kernel"]
    assert [op.name for op in windows[1].ops] == ["add_kernel"]
    assert windows[0].other_streams() == [SIDE]


def test_memcpy_and_memset_count_as_device_work():
    tr = Trace()
    tr.trial(0, [("add_kernel", 1, 6)])
    corr = tr.launch(115)
    tr.device("Memcpy DtoD", 160, 4, corr, cat="gpu_memcpy")
    w = windows_from_trace(tr.json())[0]
    assert [(op.name, op.kind) for op in w.ops] == [
        ("add_kernel", "kernel"),
        ("Memcpy DtoD", "memcpy"),
    ]
    assert w.kernel_time_us == 10 and w.ops[1].to_dict()["grid"] is None


def test_the_between_trial_step_is_the_protocols_own():
    """The candidate process restores inputs and re-poisons outputs between profiled trials
    (prepare, in its own range): a copy and a fill launched there, which run after trial 0's
    window and before trial 1's flush, are neither trial's work (an H200 run counted them)."""
    tr = Trace()
    tr.trial(0, [("add_kernel", 1, 6)])
    tr.range(PREPARE_RANGE, 900, 20)
    tr.device("Memcpy DtoD", 905, 3, tr.launch(901), cat="gpu_memcpy")
    tr.device("FillFunctor", 910, 2, tr.launch(902))
    tr.trial(1000, [("add_kernel", 1, 6)])
    windows = windows_from_trace(tr.json())
    assert [[op.name for op in w.ops] for w in windows] == [["add_kernel"], ["add_kernel"]]


def test_no_window_ranges_means_not_measured():
    assert windows_from_trace({"traceEvents": []}) == []
    activity = summarize([], [0.01], 0.01, source="test")
    assert not activity.measured and "no timed window" in activity.reason


def window(trial, ops, stream=LAUNCH):
    return WindowActivity(trial=trial, ops=ops, launch_stream=stream)


def k(name, start, dur, stream=LAUNCH, kind="kernel"):
    return KernelRecord(name, kind, (1, 1, 1), (32, 1, 1), stream, start, dur)


def codes(activity: KernelActivity) -> list[str]:
    return [f.code for f in activity.flags]


def test_single_kernel_agreeing_with_events_has_no_flags():
    windows = [window(i, [k("add", 0, 10.0 + i)]) for i in range(5)]
    activity = summarize(windows, [0.0115, 0.0121, 0.0130, 0.0140, 0.0150], 0.013, source="t")
    assert activity.measured and activity.trials == 5
    assert activity.kernel_time_ms == pytest.approx(0.012)
    assert activity.kernels[0].duration_us == 12.0  # the median trial's list
    assert activity.idle_gap_ms == pytest.approx(0.001)
    assert codes(activity) == []
    d = activity.to_dict()
    assert d["kernels"] == [
        {"name": "add", "kind": "kernel", "grid": [1, 1, 1], "block": [32, 1, 1],
         "duration_ms": 0.012, "stream": LAUNCH}
    ]  # fmt: skip


def test_launch_bound_multi_kernel_candidate_is_flagged_idle():
    # Three 5 us kernels with 20 us gaps: 15 us busy in a 60 us window.
    ops = [k("a", 0, 5), k("b", 25, 5), k("c", 50, 5)]
    activity = summarize([window(0, ops)], [0.060], 0.060, source="t")
    assert activity.kernel_time_ms == pytest.approx(0.015)
    assert activity.idle_gap_ms == pytest.approx(0.045)
    assert codes(activity) == ["idle_gap"]


def test_idle_gap_below_the_floor_is_not_flagged():
    # 3 us of event overhead around a 2 us kernel: within the 5 us floor.
    activity = summarize([window(0, [k("a", 0, 2)])], [0.005], 0.005, source="t")
    assert activity.idle_gap_ms == pytest.approx(0.003)
    assert activity.idle_gap_ms < DISAGREE_FLOOR_MS
    assert codes(activity) == []


def test_no_kernel_is_flagged():
    activity = summarize(
        [window(0, []), window(1, [k("a", 0, 5)])], [0.004, 0.006], 0.005, source="t"
    )
    assert codes(activity)[0] == "no_kernel"
    assert "1 of 2 profiled trials" in activity.flags[0].message


def test_side_stream_work_is_flagged_and_overlap_exceeds_event():
    ops = [k("a", 0, 100), k("b", 0, 100, stream=SIDE), k("c", 0, 100, stream=SIDE + 1)]
    activity = summarize([window(0, ops)], [0.101], 0.101, source="t")
    assert codes(activity) == ["other_streams", "kernel_time_exceeds_event"]
    assert str([SIDE, SIDE + 1]) in activity.flags[0].message


def test_profiler_overhead_is_flagged():
    activity = summarize([window(0, [k("a", 0, 100)])], [0.2], 0.1, source="t")
    assert "profiler_overhead" in codes(activity)


def test_timing_flags_put_the_loops_own_first():
    stats = compute_stats([0.1], "cuda_event")
    report = TimingReport(stats, launch_not_hidden="launch not hidden: ...", stream_skew="skew")
    activity = summarize([window(0, [])], [0.1], 0.1, source="t")
    assert [f.code for f in timing_flags(report, activity)] == [
        "launch_not_hidden",
        "work_outside_launch_stream",
        "no_kernel",
        "idle_gap",  # the whole window was idle
    ]
    assert timing_flags(None, not_measured("x")) == []
