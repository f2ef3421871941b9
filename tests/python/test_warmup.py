"""A warm child's warm-up (warmup.warm_child) on the cpu device."""

from __future__ import annotations

from kforge_worker.devinfo import parse_device
from kforge_worker.warmup import warm_child


def test_a_warm_child_runs_the_judges_checks_once_without_errors() -> None:
    report, described = warm_child(parse_device("cpu"))
    assert report.errors == {}
    assert {"triton_launch", "torch_ops", "harness_checks"} <= set(report.steps_ms)
    assert described["kind"] == "cpu"
