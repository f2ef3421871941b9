"""Per-phase times (phases.py): exclusive nesting, credits, absent phases omitted."""

from __future__ import annotations

import time

import pytest

from kforge_worker.phases import PHASES, PhaseClock


def test_nested_phases_are_charged_exclusively():
    clock = PhaseClock()
    started = time.perf_counter()
    with clock.phase("timing"):
        time.sleep(0.02)
        with clock.phase("inputs"):
            time.sleep(0.03)
        time.sleep(0.01)
    wall_ms = (time.perf_counter() - started) * 1e3
    ms = clock.to_dict()
    assert list(ms) == ["inputs", "timing"]  # PHASES order, only those that ran
    assert ms["inputs"] >= 30 and ms["timing"] >= 30
    assert ms["timing"] < 30 + 25  # the inner 30 ms are not charged to the outer phase
    assert sum(ms.values()) <= wall_ms + 0.01


def test_a_phase_entered_twice_accumulates():
    clock = PhaseClock()
    for _ in range(2):
        with clock.phase("candidate"):
            time.sleep(0.01)
    assert clock.to_dict()["candidate"] >= 20


def test_credit_moves_time_from_the_running_phase_and_is_bounded():
    clock = PhaseClock()
    with clock.phase("import"):
        time.sleep(0.02)
        clock.credit("compile", 5.0)
        clock.credit("compile", 1e9)  # a claim larger than the time spent moves no more
        clock.credit("compile", -3.0)
    ms = clock.to_dict()
    assert ms["compile"] >= 20 - 0.01 and ms["import"] < 1.0
    assert sum(ms.values()) >= 20


def test_credit_outside_a_phase_changes_nothing():
    clock = PhaseClock()
    clock.credit("compile", 5.0)
    assert clock.to_dict() == {}


def test_unknown_phase_is_refused():
    with pytest.raises(AssertionError), PhaseClock().phase("launch"):
        pass


def test_the_phase_list_is_the_documented_one():
    assert PHASES == ("import", "compile", "inputs", "reference", "candidate", "compare", "timing")
