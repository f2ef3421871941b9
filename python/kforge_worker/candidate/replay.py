"""The replay that Nsight Compute profiles (device_metrics.py): `python -m kforge_worker replay
BUNDLE` builds the bundle's kernel as the job built it and calls it once outside REPLAY_RANGE
(JIT compilation, autotuning) and `repeat` times inside it; and a bundle made outside any job
(io_bundle, for bench/timing_fidelity.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kforge_worker.core.spec import parse_kernel
from kforge_worker.timing.device_metrics import BUNDLE_VERSION, REPLAY_RANGE, ReplayBundle


def io_bundle(
    kernel_json: dict[str, Any], *, seed: int, trial: int, device: Any, cache_dir: str
) -> ReplayBundle:
    """The bundle of one call of a kernel on inputs from its own IOContract, made as a job
    makes its trial inputs (for bench/timing_fidelity.py, outside any job)."""
    from kforge_worker.candidate import binding
    from kforge_worker.candidate.binding import plan_invocation
    from kforge_worker.candidate.build import TORCH_TYPES
    from kforge_worker.core.inputs import derive_seed, make_io_inputs

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


def load_bundle(bundle_path: str) -> tuple[Any, Any, Any]:
    """(runnable, invocation, device) of a saved bundle: its kernel built as the job built
    it. Raises ValueError for a file that is not a bundle, LoadError or SetupError."""
    import torch

    from kforge_worker.candidate.binding import invocation_from_plan
    from kforge_worker.candidate.build import build_runnable
    from kforge_worker.candidate.loaders import load_module

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
