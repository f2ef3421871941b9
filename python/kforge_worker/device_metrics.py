"""Device metrics: the timed kernel once more, under Nsight Compute.

With `job.device_metrics` (the server's `enable_device_metrics`), after timing, each kernel
is profiled by the process that runs it, as that process's own child, so inside its jail:
the candidate by the candidate process (the judge's `device_metrics` request, candidate.py),
the reference of a compare by the judge. That process saves a `ReplayBundle` (how to build
the kernel again and the call's inputs, torch.save) in its own scratch directory and runs

    <ncu> --csv --page raw --print-units base --section <each of the spec's sections>
          --cache-control all --clock-control none --target-processes all
          --nvtx --nvtx-include kforge_replay/
          <python> -m kforge_worker replay <bundle>

`replay` builds the kernel as the job did, calls it once outside the NVTX range (JIT
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

from kforge_worker.spec import DeviceMetricsSpec, parse_kernel

# torch and the modules that build a kernel are imported by the replay's functions below
# (io_bundle, save_bundle, load_bundle, replay_main), not here: what the judge and the candidate
# call (ncu_command, run_ncu, collect, checked_run) needs none of them.

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
    package_parent = str(Path(__file__).resolve().parent.parent)
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


def io_bundle(
    kernel_json: dict[str, Any], *, seed: int, trial: int, device: Any, cache_dir: str
) -> ReplayBundle:
    """The bundle of one call of a kernel on inputs from its own IOContract, made as a job
    makes its trial inputs (for bench/timing_fidelity.py, outside any job)."""
    from kforge_worker import binding
    from kforge_worker.binding import plan_invocation
    from kforge_worker.inputs import derive_seed, make_io_inputs
    from kforge_worker.kernels import TORCH_TYPES

    kernel = parse_kernel(kernel_json, "kernel")
    if kernel.io is None:
        raise ValueError("io_bundle: the kernel has no IOContract")
    inputs = make_io_inputs(kernel.io, seed, trial, device)
    passes_outputs = kernel.kernel_type not in TORCH_TYPES
    inv = binding.bind_own(inputs) if passes_outputs else binding.bind_values(inputs)
    plan, slots = plan_invocation(inv)
    return ReplayBundle(
        role="candidate",
        kernel=kernel_json,
        cache_dir=cache_dir,
        model_seed=derive_seed(seed, "model"),
        init_seed=derive_seed(seed, "get_init_inputs"),
        prefer_new=True,
        init_inputs=None,
        plan=plan,
        slots=slots,
    )


def save_bundle(bundle: ReplayBundle, path: Path) -> None:
    import torch

    torch.save({"version": BUNDLE_VERSION, **asdict(bundle)}, path)


def load_bundle(bundle_path: str) -> tuple[Any, Any, Any]:
    """(runnable, invocation, device) of a saved bundle: its kernel built as the job built
    it. Raises ValueError for a file that is not a bundle, LoadError or SetupError."""
    import torch

    from kforge_worker.binding import invocation_from_plan
    from kforge_worker.kernels import build_runnable
    from kforge_worker.loaders import load_module

    bundle = torch.load(bundle_path, weights_only=False)
    if not isinstance(bundle, dict) or bundle.get("version") != BUNDLE_VERSION:
        raise ValueError(f"{bundle_path} is not a replay bundle")
    role = str(bundle["role"])
    on_gpu = bundle.get("device", "cuda") == "cuda"
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    kernel = parse_kernel(bundle["kernel"], role)
    module = load_module(kernel, role, str(Path(bundle_path).parent), str(bundle["cache_dir"]))
    runnable = build_runnable(
        kernel,
        module,
        bundle["init_inputs"],
        int(bundle["model_seed"]),
        prefer_new=bool(bundle["prefer_new"]),
        device=device,
        cache_dir=str(bundle["cache_dir"]),
        init_seed=int(bundle["init_seed"]),
        model_on_device=bool(bundle.get("model_on_device", False)),
    )
    return runnable, invocation_from_plan(bundle["plan"], bundle["slots"]), device


def replay_main(bundle_path: str, repeat: int = 1) -> int:
    """`python -m kforge_worker replay`: builds the bundle's kernel and calls it `repeat`
    times inside REPLAY_RANGE (after one call outside it)."""
    import torch

    try:
        runnable, inv, device = load_bundle(bundle_path)
    except ValueError as e:
        print(f"replay: {e}", file=sys.stderr)
        return 2
    on_gpu = device.type == "cuda"
    with torch.no_grad():
        runnable(inv.args, inv.kwargs)  # compiles and autotunes outside the profiled range
        if on_gpu:
            torch.cuda.synchronize(device)
            torch.cuda.nvtx.range_push(REPLAY_RANGE)
        for _ in range(repeat):
            runnable(inv.args, inv.kwargs)
        if on_gpu:
            torch.cuda.synchronize(device)
            torch.cuda.nvtx.range_pop()
    print(f"replay: {repeat} call(s) done on {device}", file=sys.stderr)
    return 0
