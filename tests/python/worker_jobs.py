"""Job specs for the worker tests, and running them in this process as a child would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kforge_worker.core.devinfo import parse_device
from kforge_worker.core.protocol import encode_json
from kforge_worker.core.spec import TimingOptions, parse_job
from kforge_worker.judge.evaluate import run_job

# The server's defaults (tests/protocol/defaults.json, checked against src/kforge/model by a
# gtest): the worker holds none, so tests that need timing options take them from here.
SERVER_DEFAULTS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "protocol" / "defaults.json").read_text()
)


def timing_options(**changes: Any) -> TimingOptions:
    """The server's default timing options with `changes`."""
    return TimingOptions(**{**SERVER_DEFAULTS["timing"], **changes})


FAST_TIMING = {
    "max_trials": 10,
    "min_trials": 3,
    "warmup_calls": 1,
    "warmup_ms": 0.0,
    "budget_ms": 100.0,
    "rse_target": 0.01,
    "cuda_graph": False,
    "l2_flush": True,
}


def make_job(
    kernel: dict[str, Any],
    reference: dict[str, Any] | None = None,
    *,
    tmp_path: Any,
    **overrides: Any,
) -> dict[str, Any]:
    """A job spec in the supervisor's canonical form."""
    job: dict[str, Any] = {
        "job_id": "test-job",
        "kind": "compare" if reference is not None else "evaluate",
        "kernel": kernel,
        "reference": reference,
        "num_correct_trials": 3,
        "measure_performance": False,
        "timing": dict(FAST_TIMING),
        "atol": None,
        "rtol": None,
        "seed": 1234567890123,
        "device": "cpu",
        "timeout_s": 60.0,
        "scratch_dir": str(tmp_path / "scratch"),
        "cache_dir": str(tmp_path / "cache"),
    }
    job.update(overrides)
    return job


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Runs a job in this process, as a child would, and returns the wire-form result."""
    result = run_job(parse_job(job), parse_device(job["device"])).to_dict()
    return json.loads(encode_json(result))


def run_python_compiled(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter that imports the worker with Triton compiling: this test
    process has TRITON_INTERPRET=1 set, which a GPU job (or a compile for one) must not."""
    full_env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "python")}
    full_env.update(env)
    full_env.pop("TRITON_INTERPRET", None)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        check=False,
    )


def assert_speedup_consistent(result: dict[str, Any]) -> None:
    """speedup is ref_runtime / runtime when both sides took measurable time; on the cpu a
    side of a few microseconds can take no longer than the judge's empty trial on a busy
    machine, and then it reads 0 and gets no speedup, with the judge's warning."""
    import pytest

    if result["ref_runtime"] > 0 and result["runtime"] > 0:
        assert result["speedup"] == pytest.approx(result["ref_runtime"] / result["runtime"])
    else:
        assert result["speedup"] is None, result
        assert any("no measurable time" in w for w in result["warnings"]), result
