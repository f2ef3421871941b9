"""Timing statistics and the adaptive stop rule (CPU timer)."""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import pytest
from worker_jobs import timing_options

from kforge_worker.timing.stats import (
    EVENT_RESOLUTION_MS,
    TrialSample,
    compute_stats,
    percentile,
    relative_standard_error,
    stop_reason,
    without_window_overhead,
)
from kforge_worker.timing.timing import time_cpu


def test_stats_match_numpy():
    samples = [1.0, 2.0, 2.5, 3.0, 10.0, 4.0, 2.2]
    stats = compute_stats(samples, "cpu_wall_clock")
    assert stats.mean == pytest.approx(np.mean(samples))
    assert stats.std == pytest.approx(np.std(samples, ddof=1))
    assert stats.median == pytest.approx(np.median(samples))
    for q, value in ((5, stats.percentile_5), (95, stats.percentile_95), (99, stats.percentile_99)):
        assert value == pytest.approx(np.percentile(samples, q))
    assert (stats.min, stats.max, stats.trials) == (1.0, 10.0, 7)
    assert stats.rse == pytest.approx(np.std(samples, ddof=1) / math.sqrt(7) / np.mean(samples))
    assert stats.unit == "ms" and stats.method == "cpu_wall_clock"


def test_single_sample_and_empty():
    stats = compute_stats([2.0], "cpu_wall_clock")
    assert stats.std == 0.0 and stats.median == 2.0 and stats.percentile_99 == 2.0
    with pytest.raises(ValueError):
        compute_stats([], "cpu_wall_clock")
    assert math.isnan(percentile([], 50))
    assert relative_standard_error([1.0]) == math.inf


def test_stop_rule():
    opts = timing_options(max_trials=10, min_trials=3, budget_ms=100.0, rse_target=0.01)
    steady = [1.0, 1.0, 1.0]
    assert stop_reason(steady[:2], opts, 0.0) is None  # never fewer than min_trials
    assert stop_reason(steady, opts, 0.0) == "rse_target"
    noisy = [1.0, 5.0, 2.0]
    assert stop_reason(noisy, opts, 0.0) is None
    assert stop_reason(noisy, opts, 100.0) == "budget"
    assert stop_reason(noisy * 4, opts, 0.0) == "max_trials"
    # min_trials wins over an exhausted budget
    assert stop_reason([1.0], timing_options(min_trials=3, budget_ms=0.0), 50.0) is None


def test_time_cpu_stops_on_rse_for_steady_calls():
    opts = timing_options(
        max_trials=500,
        min_trials=5,
        warmup_calls=2,
        warmup_ms=0.0,
        budget_ms=5000.0,
        rse_target=0.05,
    )
    report = time_cpu(lambda: time.sleep(0.002), opts)
    stats = report.stats
    assert stats.trials >= 5 and stats.stop_reason == "rse_target"
    assert stats.rse < 0.05
    assert 2.0 <= stats.median < 50.0
    assert stats.warmup_calls >= 2 and not stats.l2_flush and stats.device_sync_median is None


def test_time_cpu_respects_max_trials_and_warmup():
    calls = []
    opts = timing_options(
        max_trials=7, min_trials=7, warmup_calls=4, warmup_ms=0.0, budget_ms=1e9, rse_target=0.0
    )
    report = time_cpu(lambda: calls.append(1), opts)
    assert report.stats.trials == 7 and report.stats.stop_reason == "max_trials"
    assert report.stats.warmup_calls == 4 and len(calls) == 11


def test_time_cpu_respects_budget():
    opts = timing_options(
        max_trials=10_000,
        min_trials=2,
        warmup_calls=0,
        warmup_ms=0.0,
        budget_ms=30.0,
        rse_target=0.0,
    )
    start = time.perf_counter()
    report = time_cpu(lambda: time.sleep(0.005), opts)
    assert report.stats.stop_reason == "budget"
    assert 2 <= report.stats.trials < 20
    assert time.perf_counter() - start < 1.0
    assert statistics.median([report.stats.median]) >= 5.0


def test_spin_covers_the_measured_enqueue_within_floor_and_cap():
    from kforge_worker.timing import timing as T

    assert T.spin_us_for(0.0) == max(T.SPIN_FLOOR_US, T.SPIN_MARGIN_US)
    # 20 us of host enqueue (a Triton launch) -> 1.5 x 20 + 10 = 40 us
    assert T.spin_us_for(0.020) == pytest.approx(40.0)
    assert T.spin_us_for(1e6) == T.SPIN_CAP_US
    assert T.spin_us_for(float("nan")) == T.SPIN_CAP_US
    assert T.spin_us_for(-1.0) == T.SPIN_CAP_US


def test_spin_grows_after_an_uncovered_trial_and_stops_at_the_cap():
    from kforge_worker.timing import timing as T

    assert T.next_spin_us(40.0, 0.010) == 80.0  # at least doubled
    assert T.next_spin_us(40.0, 0.200) == pytest.approx(310.0)  # enough for what was seen
    assert T.next_spin_us(T.SPIN_CAP_US / 1.5, 0.0) == T.SPIN_CAP_US
    assert T.next_spin_us(T.SPIN_CAP_US, 10.0) == T.SPIN_CAP_US


def test_launch_not_hidden_only_beyond_the_documented_fraction():
    from kforge_worker.timing.stats import launch_not_hidden_message

    assert launch_not_hidden_message(0, 100, 0.02) == ""
    assert launch_not_hidden_message(10, 100, 0.02) == ""  # 10 % is tolerated
    message = launch_not_hidden_message(11, 100, 0.02)
    assert message.startswith("launch not hidden: in 11 of 100 trials")
    assert launch_not_hidden_message(0, 0, 0.02) == ""


def test_stream_skew_bound():
    from kforge_worker.timing.stats import stream_skew_message

    assert stream_skew_message(0.149, 0.1) == ""  # within 50 % / 0.05 ms
    assert "outside the launch stream" in stream_skew_message(0.2, 0.1)
    assert stream_skew_message(1.49, 1.0) == ""
    assert stream_skew_message(1.51, 1.0) != ""


def test_time_cpu_calls_the_hook_around_every_trial_and_stops_when_told():
    """The one hook shape of both loops: (i, None) before trial i, (i, sample) after it; a
    True after a trial stops timing there (stop_reason "judge")."""

    seen: list[tuple[int, str]] = []

    def hook(index: int, sample: TrialSample | None) -> bool:
        if sample is None:
            seen.append((index, "before"))
            return True  # ignored before a trial
        assert sample.event_ms == sample.synced_ms >= 0 and sample.launch_hidden
        seen.append((index, "after"))
        return index == 4

    opts = timing_options(max_trials=100, min_trials=50, warmup_calls=2, warmup_ms=0.0)
    report = time_cpu(lambda: None, opts, hook)
    assert report.stats.trials == 5 and report.stats.stop_reason == "judge"
    assert seen == [(i, when) for i in range(5) for when in ("before", "after")]


def test_the_loops_own_stop_rule_wins_over_a_hook_that_never_stops():
    opts = timing_options(max_trials=7, min_trials=1, warmup_calls=0, warmup_ms=0.0)
    report = time_cpu(lambda: None, opts, lambda i, s: False)
    assert report.stats.trials <= 7 and report.stats.stop_reason in ("max_trials", "rse_target")


def test_window_overhead_comes_off_every_location_statistic_down_to_the_floor():
    raw = compute_stats([0.004, 0.005, 0.006, 0.020], "cuda_event")
    s = without_window_overhead(raw, 0.0038)
    assert s.median == pytest.approx(raw.median - 0.0038)
    assert s.mean == pytest.approx(raw.mean - 0.0038)
    assert s.max == pytest.approx(raw.max - 0.0038)
    assert s.min == EVENT_RESOLUTION_MS  # 0.004 - 0.0038 is below what events resolve
    assert (s.std, s.rse, s.trials) == (raw.std, raw.rse, raw.trials)
    assert s.event_median == raw.median and s.window_overhead_us == pytest.approx(3.8)
    assert raw.window_overhead_us is None and raw.event_median is None


def test_a_cpu_time_under_the_empty_trial_is_said_not_hidden_as_zero():
    from kforge_worker.judge.timed_verdict import _unresolved

    # Brackets no longer than the echo's empty trial: the time reads 0, and a warning says so.
    said = _unresolved([0.05, 0.04, 0.06], 0.05, "the kernel")
    assert said.startswith("the kernel took no measurable time on the judge's clock")
    assert "no speedup is given" in said
    # Longer than the empty trial: nothing to say.
    assert _unresolved([0.2, 0.3, 0.25], 0.05, "the reference") == ""
    assert _unresolved([], 0.05, "the kernel") == ""


def test_touching_inputs_reads_spans_of_any_alignment_and_length():
    import torch

    from kforge_worker.candidate.regions import _read

    data = torch.arange(1000, dtype=torch.int32).view(torch.uint8)
    for offset in range(9):
        for nbytes in (1, 7, 8, 9, 17, 513, 3000):
            _read(data[offset : offset + nbytes])  # any alignment, any length


def test_the_spin_kernel_is_the_native_workers_own():
    """timing.py's %globaltimer spin and src/kforge/cuda/gpu_timer.cc's are one kernel: the
    same PTX entry, instruction for instruction (both processes' empty windows must match)."""
    import re
    from pathlib import Path

    from kforge_worker.timing import timing

    def entry(text: str) -> list[str]:
        body = re.search(r"\.visible \.entry kforge_spin\(.*?\n\}", text, re.S)
        assert body is not None
        return body.group(0).split()

    native = (Path(__file__).parents[2] / "src/kforge/cuda/gpu_timer.cc").read_text()
    assert entry(timing._SPIN_PTX.decode()) == entry(native)


def test_speedup_interval_of_few_trials_is_the_range_of_trial_ratios():
    from kforge_worker.timing.stats import SPEEDUP_MIN_TRIALS, speedup_interval, speedup_verdict

    ref, cand = [0.09, 0.10, 0.12], [44.0, 45.0, 46.0]
    assert len(ref) < SPEEDUP_MIN_TRIALS
    low, high = speedup_interval(ref, cand, systematic=0.1)
    assert low == pytest.approx(0.09 / 46.0 * 0.9) and high == pytest.approx(0.12 / 44.0 * 1.1)
    # 500x slower reads slower with three trials (it read "indistinguishable" before).
    assert speedup_verdict((low, high)) == "slower"
    # Overlapping trials of identical kernels cover 1: a tie.
    tie = speedup_interval([1.0, 1.02, 0.99], [1.01, 0.98, 1.0], systematic=0.03)
    assert speedup_verdict(tie) == "indistinguishable"
    # Enough trials: the bootstrap, seeded (the same interval again).
    many = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]
    assert speedup_interval(many, many, seed=3) == speedup_interval(many, many, seed=3)
    assert speedup_verdict(None) is None


def test_speedup_interval_covers_the_gpu_paths_absolute_bias():
    from kforge_worker.timing.stats import SPEEDUP_SYSTEMATIC_MS, speedup_interval, speedup_verdict

    # An H200 read one 2^20-element Triton add as candidate and reference 5.82 us vs 5.44 us
    # (timed by different paths), each side's trials tight: 3 % alone reads "slower".
    cand = [0.00580, 0.00582, 0.00583, 0.00581, 0.00584, 0.00582]
    ref = [0.00543, 0.00544, 0.00545, 0.00544, 0.00543, 0.00545]
    narrow = speedup_interval(ref, cand, seed=1, systematic=0.03)
    assert speedup_verdict(narrow) == "slower"
    wide = speedup_interval(
        ref, cand, seed=1, systematic=0.03, systematic_ms=SPEEDUP_SYSTEMATIC_MS["cuda"]
    )
    assert speedup_verdict(wide) == "indistinguishable"
    # The same bias is nothing at 100x the time: a real 7 % difference stays "slower".
    big = speedup_interval(
        [v * 100 for v in ref],
        [v * 100 for v in cand],
        seed=1,
        systematic=0.03,
        systematic_ms=SPEEDUP_SYSTEMATIC_MS["cuda"],
    )
    assert speedup_verdict(big) == "slower"


def test_a_gpu_trial_whose_launch_was_not_hidden_runs_again_uncounted(monkeypatch):
    """The first trial of a small kernel often outlasts its spin (the host's launch in the
    window: tens of us beside a few): it is run again with a longer spin, so neither the
    median nor the mean (the old `runtime`) holds it; past MAX_SPIN_GROWTHS they count."""
    import kforge_worker.timing.timing as timing

    class FakeRunner:
        def __init__(self, device, *, l2_flush, spin_us):
            del device, l2_flush
            self.spin_us = spin_us
            self.flusher = None
            self.spinner = type("S", (), {"available": True})()
            self.last_enqueue_ms = 0.05
            self.calls = 0

        def run(self, call):
            call()
            self.calls += 1
            hidden = self.calls > unhidden_first
            ms = 0.002 if hidden else 0.060
            return TrialSample(event_ms=ms, synced_ms=ms, launch_hidden=hidden)

    monkeypatch.setattr(timing, "GpuTrialRunner", FakeRunner)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda *_: None)
    opts = timing_options(max_trials=5, min_trials=5, warmup_calls=0, warmup_ms=0.0)

    unhidden_first = 1
    report = timing.time_gpu(lambda: None, opts, timing.torch.device("cpu"))
    assert report.stats.trials == 5 and report.stats.max == pytest.approx(0.002)
    assert report.stats.mean == pytest.approx(0.002)
    assert report.stats.launch_not_hidden_trials == 0 and not report.launch_not_hidden

    # A call no spin can hide (it synchronises with the host): after the growths, counted.
    unhidden_first = 10**6
    report = timing.time_gpu(lambda: None, opts, timing.torch.device("cpu"))
    assert report.stats.trials == 5 and report.stats.launch_not_hidden_trials == 5
    assert report.launch_not_hidden.startswith("launch not hidden: in 5 of 5 trials")


def test_the_references_gpu_trials_split_around_the_candidates():
    """The reference's trials on a GPU: half before the candidate's, half after (drift
    during the job weighs on both sides), the odd one first; none after at one trial."""
    from kforge_worker.judge.reference_timing import halves

    opts = timing_options(max_trials=100, min_trials=3, budget_ms=2000.0, warmup_ms=25.0)
    first, second = halves(opts)
    assert second is not None
    assert (first.max_trials, first.min_trials, first.budget_ms) == (50, 2, 1000.0)
    assert (second.max_trials, second.min_trials, second.budget_ms) == (50, 1, 1000.0)
    assert first.warmup_ms == 25.0 and second.warmup_ms == 5.0 and second.warmup_calls >= 1
    first, second = halves(timing_options(max_trials=5, min_trials=5))
    assert second is not None and (first.max_trials, second.max_trials) == (3, 2)
    assert first.min_trials + second.min_trials == 5
    first, second = halves(timing_options(max_trials=1, min_trials=1))
    assert second is None and first.max_trials == 1


def test_a_judged_trial_whose_launch_was_not_hidden_is_replaced_not_counted(tmp_path):
    """A candidate's GPU trial enqueued too late for its spin has host time in the judge's
    bracket (35 ms beside a 45 us kernel on an H200, which made the mean of 7 trials 5 ms):
    another trial replaces it, and the statistics never see it."""
    from types import SimpleNamespace

    import torch
    from worker_jobs import make_job

    from kforge_worker.core.spec import parse_job
    from kforge_worker.judge.judged import JudgedRun, JudgedTrial
    from kforge_worker.judge.results import JobResult
    from kforge_worker.judge.timed_verdict import judge_run

    null = 0.29
    trials = [JudgedTrial(0, 35.0 + null, claim_ms=0.045, hidden=False, counted=False)]
    trials += [JudgedTrial(i, 0.046 + null, claim_ms=0.045) for i in range(1, 7)]
    run = JudgedRun(trials=trials)
    assert run.unhidden == 0 and len(run.counted_trials()) == 6
    job = parse_job(make_job({"source_code": "", "kernel_type": "torch"}, tmp_path=tmp_path))
    link = SimpleNamespace(clock=SimpleNamespace(null_ms=null, null_claim_ms=0.0013))
    result = JobResult(compiled=True)
    timing = judge_run(
        run, job=job, device=torch.device("cuda"), result=result, returned=[], link=link
    )
    assert timing.stats.trials == 6 and timing.stats.mean == pytest.approx(0.045)
    assert [c["passed"] for c in result.to_dict()["checks"]] == [True]


def test_poisoned_outputs_are_counted_in_chunks(monkeypatch):
    """_Outputs.count compares through its scratch, a chunk at a time (nothing as large as
    an output is allocated behind the judge's wait: timed.py), and counts exactly what the
    whole-tensor comparison counts, across chunk ends, for every counted output; `warm`
    leaves every trial's count at zero."""
    import torch

    from kforge_worker.judge import timed

    monkeypatch.setattr(timed, "COUNT_CHUNK", 1000)
    a = torch.randn(2500)
    b = torch.randn(7, 300)
    small = torch.zeros(10, dtype=torch.int8)  # 1-byte: never counted
    outputs = timed._Outputs([("a", a), ("b", b), ("s", small)], [True, True, True], 3, a.device)
    assert outputs.scratch.numel() == 1000
    outputs.poison_all()
    outputs.warm()
    assert outputs.unwritten() == []
    a[:999] = 1.0  # leaves 1501 poisoned, across the second and third chunk
    b[2:, :] = 0.0  # leaves 600
    outputs.count(1)
    outputs.count(5)  # past the trials counted: ignored
    assert outputs.unwritten() == [(1, 1501 + 600)]
    whole = int((a == outputs.poison[0]).sum() + (b == outputs.poison[1]).sum())
    assert whole == 1501 + 600


def test_a_gos_seeds_are_one_63_bit_integer_per_set():
    """The candidate seeds each timed call with the seed its `go` names for that set; a `go`
    with seeds of another count or kind is a protocol error, not a call run unseeded."""
    from kforge_worker.candidate.trials import _seeds
    from kforge_worker.core.protocol import ProtocolError

    assert _seeds(None, 2) is None
    assert _seeds([0, (1 << 63) - 1], 2) == [0, (1 << 63) - 1]
    for bad in ([1], [1, 2, 3], [1, -2], [1, 1 << 63], [1, True], [1, 2.0], "12", {"0": 1}):
        with pytest.raises(ProtocolError, match="seed"):
            _seeds(bad, 2)
