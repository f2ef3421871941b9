"""The candidate's kernel activity as the judge sees it: the wire form of a profiled pass
(what a candidate process sends in its `timed` reply), its validation, the judge's
cross-checks, and what a forged pass can and cannot do to a result."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from kforge_worker.judge.evaluate import _candidate_activity, _withhold_speedup
from kforge_worker.judge.judged import JudgedRun
from kforge_worker.judge.results import JobResult
from kforge_worker.judge.timed_verdict import CandidateTiming
from kforge_worker.timing.activity import (
    SOURCE_CANDIDATE,
    KernelRecord,
    ProfiledPass,
    WindowActivity,
    loop_flags,
)
from kforge_worker.timing.activity_wire import (
    MAX_WIRE_OPS,
    MAX_WIRE_TRIALS,
    WireError,
    cross_check,
    pass_from_wire,
    pass_to_wire,
)
from kforge_worker.timing.stats import compute_stats

LAUNCH = 7
SIDE = 13


def op(name="add_kernel", start=0.0, dur=10.0, stream=LAUNCH, kind="kernel"):
    return KernelRecord(name, kind, (4, 1, 1), (128, 1, 1), stream, start, dur)


def honest_pass(trials=5, dur=10.0, event_ms=0.011):
    windows = [
        WindowActivity(trial=i, ops=[op(start=1000.0 * i, dur=dur)], launch_stream=LAUNCH)
        for i in range(trials)
    ]
    return ProfiledPass(windows, [event_ms] * trials)


def stats(median=0.011, spin_us=40.0):
    base = compute_stats([median] * 5, "cuda_event", device_sync_median=median)
    return dataclasses.replace(base, spin_us=spin_us, enqueue_ms=0.02)


def judged(wire, *, median=0.011, triton_launches=1, launch_not_hidden=""):
    result = JobResult()
    timed = CandidateTiming(
        stats(median), JudgedRun(activity=wire), median, launch_not_hidden=launch_not_hidden
    )
    _candidate_activity(result, timed, stats(median), triton_launches)
    return result


def failed(result):
    return {c.name: c.message for c in result.checks if not c.passed}


# -- the wire form ------------------------------------------------------------------------


def test_a_pass_round_trips_through_the_wire_form():
    profiled = honest_pass()
    profiled.windows[0].ops.append(op("Memcpy DtoD", 20.0, 3.0, kind="memcpy"))
    back = pass_from_wire(pass_to_wire(profiled))
    assert back.event_ms == profiled.event_ms
    assert [w.ops for w in back.windows] == [w.ops for w in profiled.windows]
    assert [w.launch_stream for w in back.windows] == [LAUNCH] * 5
    assert back.source == SOURCE_CANDIDATE  # whatever the sender says it is


def test_a_pass_the_trace_lost_trials_of_is_still_well_formed():
    profiled = honest_pass(trials=5)
    profiled.windows = profiled.windows[:3]  # two window ranges missing from the trace
    assert len(pass_from_wire(pass_to_wire(profiled)).windows) == 3
    profiled.windows = []
    wire = pass_to_wire(profiled)
    assert wire == {"error": "the profiler recorded no timed window (no trace ranges found)"}
    result = judged(wire)
    assert result.kernel_activity["measured"] is False and failed(result) == {}


def _wire():
    return pass_to_wire(honest_pass())


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda w: w.pop("windows"), "activity"),
        (lambda w: w.update(event_ms=[0.01]), "one event time per window"),
        (lambda w: w.update(windows=[], event_ms=[]), "1 to 64 windows"),
        (lambda w: w["event_ms"].__setitem__(1, float("nan")), "event_ms[1]"),
        (lambda w: w["event_ms"].__setitem__(1, -0.5), "event_ms[1]"),
        (lambda w: w["event_ms"].__setitem__(1, True), "event_ms[1]"),
        (lambda w: w["windows"].__setitem__(2, []), "windows[2]"),
        (lambda w: w["windows"][2].update(ops={}), "windows[2].ops"),
        (lambda w: w["windows"][2].update(launch_stream="7"), "windows[2].launch_stream"),
        (lambda w: w["windows"][0]["ops"][0].update(duration_us=-1), "ops[0].duration_us"),
        (lambda w: w["windows"][0]["ops"][0].update(duration_us=1e400), "ops[0].duration_us"),
        (lambda w: w["windows"][0]["ops"][0].update(start_us="0"), "ops[0].start_us"),
        (lambda w: w["windows"][0]["ops"][0].update(kind="graph"), "ops[0].kind"),
        (lambda w: w["windows"][0]["ops"][0].update(name=7), "ops[0].name"),
        (lambda w: w["windows"][0]["ops"][0].update(name="k" * 2000), "ops[0].name"),
        (lambda w: w["windows"][0]["ops"][0].update(grid=[1, 2]), "ops[0].grid"),
        (lambda w: w["windows"][0]["ops"][0].update(block=[1, -2, 1]), "ops[0].block"),
        (lambda w: w["windows"][0]["ops"][0].update(stream=1 << 70), "ops[0].stream"),
    ],
)
def test_a_malformed_pass_is_refused_naming_the_field(mutate, field):
    wire = _wire()
    mutate(wire)
    with pytest.raises(WireError, match=field.replace("[", r"\[").replace("]", r"\]")):
        pass_from_wire(wire)


def test_the_pass_is_bounded_in_size():
    wire = _wire()
    wire["windows"] = [copy.deepcopy(wire["windows"][0]) for _ in range(MAX_WIRE_TRIALS + 1)]
    wire["event_ms"] = [0.01] * (MAX_WIRE_TRIALS + 1)
    with pytest.raises(WireError, match="1 to 64 windows"):
        pass_from_wire(wire)
    wire = _wire()
    wire["windows"][0]["ops"] = wire["windows"][0]["ops"] * (MAX_WIRE_OPS + 1)
    with pytest.raises(WireError, match=r"windows\[0\].ops"):
        pass_from_wire(wire)


# -- the judge's cross-checks --------------------------------------------------------------


def test_an_honest_pass_passes_the_cross_checks():
    assert cross_check(honest_pass(), triton_launches=1) == []
    # Work on a side stream may outlast the events (other_streams says so); the launch
    # stream's own work may not.
    side = honest_pass()
    side.windows[0].ops.append(op(stream=SIDE, dur=500.0))
    assert cross_check(side) == []


def test_launch_stream_records_longer_than_the_events_are_impossible():
    forged = honest_pass(dur=10.0, event_ms=0.004)  # 10 us of kernels inside 4 us of events
    flags = cross_check(forged)
    assert [f.code for f in flags] == ["activity_exceeds_event"]
    assert "cannot both be true" in flags[0].message
    # Within max(10 %, 5 us) of the events is clock noise, not a contradiction.
    assert cross_check(honest_pass(dur=10.0, event_ms=0.0099)) == []


def test_no_kernel_while_correctness_calls_launched_triton_is_a_disagreement():
    empty = ProfiledPass(
        [WindowActivity(trial=i, launch_stream=LAUNCH) for i in range(3)], [0.01] * 3
    )
    assert [f.code for f in cross_check(empty, triton_launches=2)] == [
        "activity_disagrees_with_launches"
    ]
    assert cross_check(empty, triton_launches=0) == []  # a torch kernel counted none
    assert cross_check(empty, triton_launches=-1) == []  # not counted


def test_loop_flags_come_from_the_reports_messages():
    assert loop_flags("", "") == []
    assert [f.code for f in loop_flags("launch not hidden: ...", "skew")] == [
        "launch_not_hidden",
        "work_outside_launch_stream",
    ]


# -- what the judge records ----------------------------------------------------------------


def test_an_honest_candidate_pass_is_recorded_with_its_source():
    result = judged(pass_to_wire(honest_pass()))
    assert result.kernel_activity["measured"], result.kernel_activity
    assert result.kernel_activity["source"] == SOURCE_CANDIDATE
    assert result.kernel_time == pytest.approx(0.010)
    assert [k["name"] for k in result.kernels] == ["add_kernel"]
    assert failed(result) == {}
    assert any(c.name == "kernel_activity_consistent" and c.passed for c in result.checks)


def test_the_judge_recomputes_flags_and_ignores_the_senders_summary():
    # A candidate cannot remove a flag or set kernel_time by sending its own summary: the
    # judge reads only the windows and event times.
    side = honest_pass()
    for w in side.windows:
        w.ops.append(op(stream=SIDE, dur=5.0))
    wire = pass_to_wire(side) | {"flags": [], "kernel_time_ms": 0.0001}
    result = judged(wire)
    assert "other_streams" in [f["code"] for f in result.timing_flags]
    assert result.kernel_time == pytest.approx(0.015)


def test_a_forged_pass_becomes_a_failed_honesty_check_never_a_better_number():
    forged = pass_to_wire(honest_pass(dur=50.0, event_ms=0.011))
    result = judged(forged)
    assert "kernel_activity_consistent" in failed(result)
    codes = [f["code"] for f in result.timing_flags]
    assert "activity_exceeds_event" in codes
    assert result.runtime_stats is None and result.speedup is None  # untouched here
    assert any(w.startswith("kernel activity: [activity_exceeds_event]") for w in result.warnings)


def test_a_malformed_pass_is_not_measured_and_fails_the_check():
    wire = _wire()
    wire["windows"][0]["ops"][0]["duration_us"] = "fast"
    result = judged(wire)
    assert result.kernel_activity["measured"] is False
    assert "malformed kernel activity" in result.kernel_activity["reason"]
    assert "windows[0].ops[0].duration_us" in result.kernel_activity["reason"]
    assert "kernel_activity_consistent" in failed(result)
    assert [f["code"] for f in result.timing_flags] == ["activity_malformed"]


def test_a_pass_without_kernels_fails_launched_own_kernel():
    empty = ProfiledPass(
        [WindowActivity(trial=i, ops=[op(kind="memcpy")], launch_stream=LAUNCH) for i in range(3)],
        [0.011] * 3,
    )
    result = judged(pass_to_wire(empty), triton_launches=0)
    assert "launched_own_kernel" in failed(result)
    assert "no_kernel" in [f["code"] for f in result.timing_flags]
    assert "kernel_activity_consistent" not in failed(result)
    # No reward from windows without a kernel of the candidate's own (an empty CUDA graph:
    # a torch_cuda extension launching on another stream captured nothing on an H200).
    result.speedup = 3.0
    _withhold_speedup(result)
    assert result.speedup is None
    honest = judged(pass_to_wire(honest_pass()))
    honest.speedup = 3.0
    _withhold_speedup(honest)
    assert honest.speedup == 3.0


def test_a_profiler_that_could_not_run_leaves_the_timing_alone():
    result = judged(
        {
            "error": "the profiler failed: RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"
            + "x" * 2000
        }
    )
    assert result.kernel_activity["measured"] is False
    assert result.kernel_activity["reason"].startswith("the candidate process could not profile")
    assert len(result.kernel_activity["reason"]) < 600
    assert failed(result) == {}
    result = judged(None)
    assert result.kernel_activity["reason"] == "the candidate process sent no kernel activity"


def test_the_loops_flags_lead_the_candidates_timing_flags():
    result = judged(pass_to_wire(honest_pass()), launch_not_hidden="launch not hidden: x")
    assert [f["code"] for f in result.timing_flags] == ["launch_not_hidden"]
