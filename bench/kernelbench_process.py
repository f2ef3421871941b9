"""One KernelBench problem evaluated in this (fresh) process: the baseline of
bench/kernelbench_throughput.py, which starts one such process per problem, as KernelBench's
users run its evaluation.

    python bench/kernelbench_process.py --ref PROBLEM.py --custom CANDIDATE.py \
        [--device cuda:0] [--correct-trials 5] [--perf-trials 100] [--kernelbench-dir DIR]

With --kernelbench-dir (a checkout of ScalingIntelligence/KernelBench), the problem goes
through KernelBench's own `eval_kernel_against_ref` (what its scripts/run_and_check.py calls
for a local evaluation). Without it, through this file's `builtin` harness, which follows the
same protocol (written here, not copied): seeded Model and ModelNew built from
get_init_inputs() on the CPU and moved to the device, per correctness trial get_inputs() on
the CPU under a trial seed and moved to the device, outputs compared with atol = rtol = 1e-2,
then `--perf-trials` timed calls of ModelNew (CUDA events on a GPU, the wall clock on cpu).

Prints one JSON line: {"compiled", "correctness", "runtime_ms", "harness", "error"}.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

TOLERANCE = 1e-2


def load_source(source: str, name: str) -> ModuleType:
    module = ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # the problem's own code
    return module


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(model: Any, inputs: list[Any], trials: int, device: torch.device) -> float:
    """Median ms of `trials` calls (one warm-up call first)."""
    times: list[float] = []
    with torch.no_grad():
        model(*inputs)
        synchronize(device)
        for _ in range(trials):
            if device.type == "cuda":
                start, end = (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize(device)
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                model(*inputs)
                times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def builtin(ref_src: str, custom_src: str, args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    try:
        ref_mod = load_source(ref_src, "reference")
        custom_mod = load_source(custom_src, "custom")
    except Exception:
        return {"compiled": False, "correctness": False, "error": traceback.format_exc()}
    init = ref_mod.get_init_inputs()
    torch.manual_seed(args.seed)
    ref = ref_mod.Model(*init).to(device)
    torch.manual_seed(args.seed)
    custom = custom_mod.ModelNew(*init).to(device)
    with torch.no_grad():
        for trial in range(args.correct_trials):
            torch.manual_seed(args.seed + 1 + trial)
            inputs = [
                x.to(device) if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()
            ]
            want = ref(*inputs)
            got = custom(*inputs)
            synchronize(device)
            if got.shape != want.shape or not torch.allclose(got, want, TOLERANCE, TOLERANCE):
                return {"compiled": True, "correctness": False, "error": f"trial {trial} differs"}
    return {
        "compiled": True,
        "correctness": True,
        "runtime_ms": time_calls(custom, inputs, args.perf_trials, device),
    }


# Importing KernelBench's eval imports its LLM clients too (kernelbench/utils.py); a GPU host
# for evaluation need not have them, and eval_kernel_against_ref never calls them.
LLM_CLIENTS = ("openai", "litellm")


def _allow_kernelbench_imports(root: Path) -> None:
    """Lets `kernelbench.eval` import on a host without all of KernelBench's dependencies:
    ROOT/pydeps (pure-Python packages installed there with `pip install --target`), if any,
    comes last on the path, after what the host has; an LLM client that is missing is a module
    whose every attribute raises when used, which the evaluation never does."""
    if (root / "pydeps").is_dir():
        sys.path.append(str(root / "pydeps"))
    for name in LLM_CLIENTS:
        if importlib.util.find_spec(name) is None:
            sys.modules[name] = _Absent(name)


class _Absent(ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)

        def absent(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError(f"{self.__name__}.{attr}: {self.__name__} is not installed")

        return absent


def kernelbench_eval(ref_src: str, custom_src: str, args: argparse.Namespace) -> dict[str, Any]:
    """KernelBench's eval_kernel_against_ref, imported from the checkout (either layout:
    src/kernelbench/eval.py, or the older src/eval.py)."""
    root = Path(args.kernelbench_dir).resolve()
    sys.path[:0] = [str(root / "src"), str(root)]
    _allow_kernelbench_imports(root)
    try:
        from kernelbench import eval as kb_eval  # type: ignore[import-not-found]
    except ImportError:
        from src import eval as kb_eval  # type: ignore[import-not-found,no-redef]
    fn = kb_eval.eval_kernel_against_ref
    wanted = {
        "original_model_src": ref_src,
        "custom_model_src": custom_src,
        "seed_num": args.seed,
        "num_correct_trials": args.correct_trials,
        "num_perf_trials": args.perf_trials,
        "measure_performance": True,
        "verbose": False,
        "build_dir": args.build_dir,
        "device": torch.device(args.device),
    }
    accepted = inspect.signature(fn).parameters
    result = fn(**{k: v for k, v in wanted.items() if k in accepted})
    if result is None:  # KernelBench returns None when a lock file says another build runs
        return {"compiled": False, "correctness": False, "error": "eval returned None"}
    return {
        "compiled": bool(result.compiled),
        "correctness": bool(result.correctness),
        "runtime_ms": float(result.runtime) if result.runtime is not None else None,
        "error": json.dumps(result.metadata, default=str) if not result.correctness else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--custom", required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--correct-trials", type=int, default=5)
    parser.add_argument("--perf-trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--kernelbench-dir", default=None)
    parser.add_argument("--build-dir", default=None)
    args = parser.parse_args()
    ref_src = Path(args.ref).read_text()
    custom_src = Path(args.custom).read_text()
    harness = "kernelbench" if args.kernelbench_dir else "builtin"
    try:
        if args.kernelbench_dir:
            out = kernelbench_eval(ref_src, custom_src, args)
        else:
            out = builtin(ref_src, custom_src, args)
    except Exception:
        out = {"compiled": False, "correctness": False, "error": traceback.format_exc()}
    print(json.dumps({"harness": harness, **out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
