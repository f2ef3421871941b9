"""Per-phase times (phases.py): exclusive nesting, credits, absent phases omitted. A manual
clock makes every expected value exact."""

from __future__ import annotations

import pytest

from kforge_worker.core.phases import PHASES, PhaseClock

MS = 1_000_000  # ns


class ManualClock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def advance(self, ms: float) -> None:
        self.ns += int(ms * MS)


def test_nested_phases_are_charged_exclusively():
    clock = ManualClock()
    phases = PhaseClock(clock)
    with phases.phase("timing"):
        clock.advance(20)
        with phases.phase("inputs"):
            clock.advance(30)
        clock.advance(10)
    clock.advance(100)  # outside every phase: charged to none
    assert phases.to_dict() == {"inputs": 30.0, "timing": 30.0}
    assert list(phases.to_dict()) == ["inputs", "timing"]  # PHASES order, only those that ran


def test_a_phase_entered_twice_accumulates_and_rounds_to_microseconds():
    clock = ManualClock()
    phases = PhaseClock(clock)
    for _ in range(2):
        with phases.phase("candidate"):
            clock.advance(1.2345678)
    assert phases.to_dict() == {"candidate": 2.469}


def test_an_open_phase_counts_up_to_now():
    clock = ManualClock()
    phases = PhaseClock(clock)
    with phases.phase("import"):
        clock.advance(7)
        assert phases.to_dict() == {"import": 7.0}
        clock.advance(1)
    assert phases.to_dict() == {"import": 8.0}


def test_credit_moves_time_from_the_running_phase_and_is_bounded():
    clock = ManualClock()
    phases = PhaseClock(clock)
    with phases.phase("import"):
        clock.advance(20)
        phases.credit("compile", 5.0)
        assert phases.to_dict() == {"import": 15.0, "compile": 5.0}
        phases.credit("compile", 1e9)  # a claim beyond the time spent moves no more than it
        phases.credit("compile", -3.0)
        phases.credit("compile", float("nan"))
    assert phases.to_dict() == {"import": 0.0, "compile": 20.0}


def test_credit_outside_a_phase_changes_nothing():
    phases = PhaseClock(ManualClock())
    phases.credit("compile", 5.0)
    assert phases.to_dict() == {}


def test_the_real_clock_is_the_default():
    phases = PhaseClock()
    with phases.phase("compare"):
        pass
    assert list(phases.to_dict()) == ["compare"] and phases.to_dict()["compare"] >= 0


def test_unknown_phase_is_refused():
    with pytest.raises(AssertionError), PhaseClock().phase("launch"):
        pass


def test_the_phase_list_is_the_documented_one():
    assert PHASES == ("import", "compile", "inputs", "reference", "candidate", "compare", "timing")
