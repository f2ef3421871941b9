"""Device metrics on the worker side: the spec field, the ncu command, the replay spec."""

from __future__ import annotations

import dataclasses
import json

import pytest
import worker_kernels as K
from worker_jobs import make_job

from kforge_worker.device_metrics import REPLAY_RANGE, ncu_command, run_ncu
from kforge_worker.spec import DeviceMetricsSpec, SpecError, parse_job

SECTIONS = ["SpeedOfLight", "Occupancy"]


def spec_with(tmp_path, device_metrics):
    job = make_job(K.triton_vadd(), K.torch_add_reference(), tmp_path=tmp_path)
    job["device_metrics"] = device_metrics
    return job


def test_device_metrics_field_is_parsed(tmp_path):
    job = parse_job(spec_with(tmp_path, {"ncu": "/usr/local/cuda/bin/ncu", "sections": SECTIONS}))
    assert job.device_metrics == DeviceMetricsSpec("/usr/local/cuda/bin/ncu", tuple(SECTIONS))
    assert parse_job(spec_with(tmp_path, None)).device_metrics is None


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ([], "job.device_metrics: must be an object"),
        ({"sections": SECTIONS}, "job.device_metrics.ncu: is required"),
        ({"ncu": "ncu", "sections": []}, "job.device_metrics.sections: must be a non-empty"),
        ({"ncu": "ncu", "sections": ["a,b"]}, "job.device_metrics.sections[0]"),
        ({"ncu": "ncu", "sections": SECTIONS, "timeout_s": 0}, "job.device_metrics.timeout_s"),
    ],
)
def test_bad_device_metrics_name_the_field(tmp_path, value, field):
    with pytest.raises(SpecError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_job(spec_with(tmp_path, value))


def test_the_replay_spec_round_trips(tmp_path):
    """The job's own spec, written back as JSON, is what `replay` parses."""
    raw = spec_with(tmp_path, {"ncu": "ncu", "sections": SECTIONS})
    raw["kernel"]["io"]["launch"] = {"grid": [4, 1, 1], "num_warps": 4}
    job = parse_job(raw)
    assert parse_job(json.loads(json.dumps(dataclasses.asdict(job)))) == job


def test_ncu_command_profiles_only_the_replay_range():
    spec = DeviceMetricsSpec("/opt/ncu", tuple(SECTIONS))
    cmd = ncu_command(spec, "job.json", "inputs.pt", "candidate")
    assert cmd[0] == "/opt/ncu"
    assert cmd[cmd.index("--page") + 1] == "raw"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"] == SECTIONS
    assert cmd[cmd.index("--nvtx-include") + 1] == f"{REPLAY_RANGE}/"
    assert cmd[cmd.index("--cache-control") + 1] == "all"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[-6:] == ["replay", "job.json", "--inputs", "inputs.pt", "--role", "candidate"]


def test_a_missing_ncu_is_reported_not_raised(tmp_path):
    spec = DeviceMetricsSpec(str(tmp_path / "no-such-ncu"), tuple(SECTIONS))
    run = run_ncu(spec, "job.json", "inputs.pt", "candidate")
    assert run["exit_code"] is None and "cannot run ncu" in run["stderr"]
