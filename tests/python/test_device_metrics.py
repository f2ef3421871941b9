"""Device metrics on the worker side: the spec field, the ncu command, the replay bundle, and
a job's runs under a stand-in for ncu (each kernel replayed by the process that ran it)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
import worker_kernels as K
from worker_jobs import make_job, run

from kforge_worker.candidate.replay import io_bundle, load_bundle, replay_main
from kforge_worker.core.spec import DeviceMetricsSpec, SpecError, parse_job
from kforge_worker.timing.device_metrics import (
    OUTPUT_CAP,
    REPLAY_RANGE,
    STDERR_CAP,
    checked_run,
    ncu_command,
    run_ncu,
    save_bundle,
)

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
    cmd = ncu_command(spec, "candidate.pt")
    assert cmd[0] == "/opt/ncu"
    assert cmd[cmd.index("--page") + 1] == "raw"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"] == SECTIONS
    assert cmd[cmd.index("--nvtx-include") + 1] == f"{REPLAY_RANGE}/"
    assert cmd[cmd.index("--cache-control") + 1] == "all"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    replay = [sys.executable, "-m", "kforge_worker", "replay", "candidate.pt", "--device"]
    assert cmd[-7:] == [*replay, "cuda"]


def test_a_missing_ncu_is_reported_not_raised(tmp_path):
    spec = DeviceMetricsSpec(str(tmp_path / "no-such-ncu"), tuple(SECTIONS))
    result = run_ncu(spec, "candidate.pt")
    assert result["exit_code"] is None and "cannot run ncu" in result["stderr"]


def test_a_run_reported_by_the_candidate_is_checked_and_capped():
    assert checked_run("forged")["stderr"] == "malformed ncu run"
    claimed = {
        "command": ["ncu"] * 500,
        "exit_code": True,
        "stdout": "x" * (OUTPUT_CAP + 10),
        "stderr": "e" * (STDERR_CAP * 2),
    }
    checked = checked_run(claimed)
    assert len(checked["command"]) == 64 and checked["exit_code"] is None
    assert len(checked["stdout"]) == OUTPUT_CAP
    assert len(checked["stderr"]) < STDERR_CAP + 100 and "omitted" in checked["stderr"]
    assert checked_run({"exit_code": 0})["exit_code"] == 0


def test_a_replay_bundle_builds_the_kernel_and_its_call_again(tmp_path):
    import torch

    kernel = K.triton_vadd(n=64)
    bundle = io_bundle(kernel, seed=7, trial=3, device=torch.device("cpu"), cache_dir="")
    bundle.device = "cpu"
    path = tmp_path / "candidate.pt"
    save_bundle(bundle, path)
    runnable, inv, device = load_bundle(str(path))
    assert device.type == "cpu" and runnable.name == "add_kernel"
    x, y, out = inv.args[0], inv.args[1], inv.args[2]
    runnable(inv.args, inv.kwargs)
    assert torch.equal(out, x + y)
    assert replay_main(str(path), repeat=2) == 0
    path.write_bytes(b"not a bundle")
    with pytest.raises(Exception):  # noqa: B017 - torch's unpickling error type varies
        load_bundle(str(path))
    save_bundle(bundle, path)
    torch.save({"version": 0}, path)
    assert replay_main(str(path)) == 2


# A stand-in for Nsight Compute (not installed here): it runs the profiled command as ncu
# would (as its child) and reports who its parent is, so the test sees which process
# started it and which bundle it replayed.
STAND_IN_NCU = """#!{python}
import os, subprocess, sys
argv = sys.argv[1:]
target = argv[argv.index("-m") - 1:]
proc = subprocess.run(target, capture_output=True, text=True)
print(f"stand-in-ncu ppid={{os.getppid()}} bundle={{target[4]}} replay_exit={{proc.returncode}}")
sys.stderr.write(proc.stderr[-4000:])
sys.exit(proc.returncode)
"""


def stand_in_ncu(tmp_path: Path) -> str:
    path = tmp_path / "ncu"
    path.write_text(STAND_IN_NCU.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def test_each_kernel_is_replayed_by_the_process_that_ran_it(tmp_path):
    job = make_job(
        K.triton_vadd(n=256),
        K.torch_add_reference(),
        tmp_path=tmp_path,
        measure_performance=True,
        num_correct_trials=1,
    )
    job["device_metrics"] = {"ncu": stand_in_ncu(tmp_path), "sections": SECTIONS, "timeout_s": 120}
    result = run(job)
    assert result["correctness"], result
    raw = result["device_metrics_raw"]
    assert set(raw) == {"candidate", "reference"}
    for role, r in raw.items():
        assert r["exit_code"] == 0, (role, r)
        assert "replay: 1 call(s) done on cpu" in r["stderr"], r["stderr"]
        assert r["command"][0].endswith("ncu") and "--nvtx-include" in r["command"]
    scratch = Path(job["scratch_dir"])
    # The candidate's replay: written and started by the candidate process (not this one,
    # the judge), in its own scratch directory; the reference's by the judge.
    cand = raw["candidate"]["stdout"]
    assert f"bundle={scratch / 'candidate' / 'device-metrics' / 'candidate.pt'}" in cand, cand
    assert f"ppid={os.getpid()} " not in cand
    ref = raw["reference"]["stdout"]
    assert f"bundle={scratch / 'device-metrics' / 'reference.pt'}" in ref, ref
    assert f"ppid={os.getpid()} " in ref


def test_device_metrics_wait_for_a_correct_timed_kernel(tmp_path):
    job = make_job(K.triton_vadd(K.VADD_WRONG, n=256), K.torch_add_reference(), tmp_path=tmp_path)
    job["measure_performance"] = True
    job["device_metrics"] = {"ncu": stand_in_ncu(tmp_path), "sections": SECTIONS}
    result = run(job)
    assert result["correctness"] is False and "device_metrics_raw" not in result
