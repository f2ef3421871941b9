"""Device metrics: the timed kernel(s) once more, under Nsight Compute.

With `job.device_metrics` (the server's `enable_device_metrics`), after timing the job's
process saves the timing inputs (torch.save, in its scratch directory) and, for the
candidate and then (in a compare) the reference, runs as its own child, so with its
sandbox:

    <ncu> --csv --page raw --print-units base --section <each of the spec's sections>
          --cache-control all --clock-control none --target-processes all
          --nvtx --nvtx-include kforge_replay/
          <python> -m kforge_worker replay <spec> --inputs <inputs.pt> --role <role>

`replay` loads the job's kernels as a job does, calls the kernel once outside the NVTX
range (JIT compilation, autotuning) and once inside REPLAY_RANGE, so ncu profiles exactly
the kernels of one call. What ncu printed comes back as it is, in the result's
`device_metrics_raw` ({role: {command, exit_code, stdout, stderr}}); the server parses it
(src/kforge/jobs/ncu_report.cc, the one parser of ncu's CSV) into metadata.device_metrics
and drops the raw text. The ncu path and the sections come from the job spec (the
server resolves both), so this module holds no list of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kforge_worker.spec import DeviceMetricsSpec

REPLAY_RANGE = "kforge_replay"
OUTPUT_CAP = 8 << 20  # bytes of ncu stdout kept per run
STDERR_CAP = 16 << 10


def ncu_command(
    request: DeviceMetricsSpec, spec_path: str, inputs_path: str, role: str
) -> list[str]:
    sections = [arg for name in request.sections for arg in ("--section", name)]
    return [
        request.ncu,
        "--csv",
        "--page", "raw",
        "--print-units", "base",
        *sections,
        "--cache-control", "all",
        "--clock-control", "none",
        "--target-processes", "all",
        "--nvtx",
        "--nvtx-include", f"{REPLAY_RANGE}/",
        sys.executable, "-m", "kforge_worker", "replay", spec_path,
        "--inputs", inputs_path,
        "--role", role,
    ]  # fmt: skip


def _tail(text: str, cap: int) -> str:
    return (
        text if len(text) <= cap else f"[... {len(text) - cap} bytes omitted ...]\n" + text[-cap:]
    )


def run_ncu(
    request: DeviceMetricsSpec, spec_path: str, inputs_path: str, role: str
) -> dict[str, Any]:
    """One ncu run; never raises (a failure is in exit_code/stderr for the server to report)."""
    cmd = ncu_command(request, spec_path, inputs_path, role)
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env.pop("TRITON_INTERPRET", None)
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=request.timeout_s, check=False
        )
    except FileNotFoundError as e:
        return {"command": cmd, "exit_code": None, "stdout": "", "stderr": f"cannot run ncu: {e}"}
    except subprocess.TimeoutExpired:
        return {
            "command": cmd,
            "exit_code": None,
            "stdout": "",
            "stderr": f"ncu did not finish within {request.timeout_s:.0f} s",
        }
    return {
        "command": cmd,
        "exit_code": proc.returncode,
        "stdout": proc.stdout[:OUTPUT_CAP],
        "stderr": _tail(proc.stderr, STDERR_CAP),
    }


def collect(
    request: DeviceMetricsSpec,
    job_spec: dict[str, Any],
    inputs: Any,
    roles: list[str],
    scratch: str,
) -> dict[str, Any]:
    """Saves the inputs and the spec in `scratch` and runs ncu for each role."""
    import torch

    directory = Path(scratch or ".") / "device-metrics"
    directory.mkdir(parents=True, exist_ok=True)
    spec_path = directory / "job.json"
    inputs_path = directory / "inputs.pt"
    spec_path.write_text(json.dumps(job_spec))
    torch.save(inputs, inputs_path)
    return {role: run_ncu(request, str(spec_path), str(inputs_path), role) for role in roles}


def replay_main(spec_path: str, inputs_path: str | None, role: str, repeat: int = 1) -> int:
    """`python -m kforge_worker replay`: `repeat` calls of `role` inside REPLAY_RANGE, on the
    saved inputs, or without them on the job's timing inputs regenerated from its seed."""
    import torch

    from kforge_worker.devinfo import parse_device
    from kforge_worker.kernels import load_kernels
    from kforge_worker.spec import parse_job

    job = parse_job(json.loads(Path(spec_path).read_text()))
    device = parse_device(job.device).torch_device()
    torch.cuda.set_device(device)
    kernels = load_kernels(job, device)
    if inputs_path:
        inputs = torch.load(inputs_path, weights_only=False)
    else:
        inputs = kernels.make_inputs(job.num_correct_trials)
    if role == "reference":
        if kernels.reference is None:
            print("replay: the job has no reference", file=sys.stderr)
            return 2
        runnable, inv = kernels.reference, kernels.bind_reference(inputs.clone())
    else:
        runnable, inv = kernels.candidate, kernels.bind_candidate(inputs.clone())
    with torch.no_grad():
        runnable(inv.args, inv.kwargs)  # compiles and autotunes outside the profiled range
        torch.cuda.synchronize(device)
        torch.cuda.nvtx.range_push(REPLAY_RANGE)
        for _ in range(repeat):
            runnable(inv.args, inv.kwargs)
        torch.cuda.synchronize(device)
        torch.cuda.nvtx.range_pop()
    return 0
