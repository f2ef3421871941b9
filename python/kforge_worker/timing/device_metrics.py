"""Device metrics: the timed kernel once more, under Nsight Compute.

With `job.device_metrics` (the server's `enable_device_metrics`), after timing, each kernel
is profiled by the process that runs it, as that process's own child, so inside its jail:
the candidate by the candidate process (the judge's `device_metrics` request, candidate/server.py),
the reference of a compare by the judge. That process saves a `ReplayBundle` (how to build
the kernel again and the call's inputs, torch.save) in its own scratch directory and runs

    <ncu> --csv --page raw --print-units base --section <each of the spec's sections>
          --cache-control all --clock-control none --target-processes all
          --nvtx --nvtx-include kforge_replay/
          <python> -m kforge_worker replay <bundle>

`replay` (replay.py) builds the kernel as the job did, calls it once outside the NVTX range (JIT
compilation, autotuning) and once inside REPLAY_RANGE, so ncu profiles exactly the kernels of
one call. What ncu printed comes back as it is, in the result's `device_metrics_raw`
({role: {command, exit_code, stdout, stderr}}); the server parses it
(src/kforge/jobs/ncu_report.cc, the one parser of ncu's CSV) into metadata.device_metrics and
drops the raw text. The candidate's run is its process's claim (the judge bounds its sizes
with `checked_run`); no verdict depends on it. The ncu path and the sections come from the
job spec (the server resolves both), so this module holds no list of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kforge_worker.core.spec import DeviceMetricsSpec

# torch is imported by save_bundle alone, and the modules that build a kernel by the replay
# (replay.py), not here: what the judge and the candidate call (ncu_command, run_ncu, collect,
# checked_run) needs none of them.

REPLAY_RANGE = "kforge_replay"
OUTPUT_CAP = 8 << 20  # bytes of ncu stdout kept per run
STDERR_CAP = 16 << 10
COMMAND_CAP = 64  # arguments of the command reported per run
BUNDLE_VERSION = 1


@dataclass
class ReplayBundle:
    """What a replay needs to build the kernel again and call it once."""

    role: str  # candidate | reference
    kernel: Any  # the kernel spec (kernels.kernel_spec_json)
    cache_dir: str
    model_seed: int
    init_seed: int
    prefer_new: bool
    init_inputs: list[Any] | None  # None: the module's own get_init_inputs()
    plan: dict[str, Any]  # binding.plan_invocation's plan of the call...
    slots: list[Any]  # ...and its slot values
    device: str = "cuda"  # cuda (this process's current GPU) or cpu (tests)
    model_on_device: bool = False  # a torch model built on the device, as the job built it


def ncu_command(request: DeviceMetricsSpec, bundle_path: str, device: str = "cuda") -> list[str]:
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
        sys.executable, "-m", "kforge_worker", "replay", bundle_path, "--device", device,
    ]  # fmt: skip


def _tail(text: str, cap: int) -> str:
    return (
        text if len(text) <= cap else f"[... {len(text) - cap} bytes omitted ...]\n" + text[-cap:]
    )


def run_ncu(request: DeviceMetricsSpec, bundle_path: str, device: str = "cuda") -> dict[str, Any]:
    """One ncu run; never raises (a failure is in exit_code/stderr for the server to report)."""
    cmd = ncu_command(request, bundle_path, device)
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env.pop("TRITON_INTERPRET", None)
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            timeout=request.timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except OSError as e:
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


def collect(request: DeviceMetricsSpec, bundle: ReplayBundle, scratch: str) -> dict[str, Any]:
    """Saves `bundle` in `scratch` and runs ncu on its replay (never raises)."""
    directory = Path(scratch or ".") / "device-metrics"
    path = directory / f"{bundle.role}.pt"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        save_bundle(bundle, path)
    except Exception as e:
        return {
            "command": [],
            "exit_code": None,
            "stdout": "",
            "stderr": f"cannot save the replay's inputs in {directory}: {e}",
        }
    return run_ncu(request, str(path), bundle.device)


def checked_run(value: Any) -> dict[str, Any]:
    """A run as the candidate process reported it, with its types checked and its sizes
    capped (the judge's view of a claim); a malformed one says so in stderr."""
    if not isinstance(value, dict):
        return {"command": [], "exit_code": None, "stdout": "", "stderr": "malformed ncu run"}
    code = value.get("exit_code")
    command = value.get("command")
    return {
        "command": [str(c)[:4096] for c in command[:COMMAND_CAP]]
        if isinstance(command, list)
        else [],
        "exit_code": code if isinstance(code, int) and not isinstance(code, bool) else None,
        "stdout": str(value.get("stdout") or "")[:OUTPUT_CAP],
        "stderr": _tail(str(value.get("stderr") or ""), STDERR_CAP),
    }


def save_bundle(bundle: ReplayBundle, path: Path) -> None:
    import torch

    torch.save({"version": BUNDLE_VERSION, **asdict(bundle)}, path)
