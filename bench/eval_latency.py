"""End-to-end latency of one small evaluation: kforge vs a fresh Python process per job.

The job: a Triton vector add (its compiled kernel already cached), 1 correctness trial and a
20 ms timing budget, evaluated through kforge's REST API, sequentially, ~30 times. The
baseline does the same job the old way, in the same run: a fresh `python` process per job
that imports torch and triton and runs the identical job spec (`python -m kforge_worker
run-job`), so the only difference is the process model.

    python bench/eval_latency.py [--device cuda:0|cpu] [--jobs 30] [--baseline-jobs 5]

Prints a table and writes the raw numbers as JSON (--out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from latency_parts import (  # noqa: E402
    breakdown,
    describe,
    p50_parts,
    python_workers,
    report_warmups,
)

from integration.kernels import triton_add  # noqa: E402
from integration.kforge_server import KforgeServer  # noqa: E402


def default_device() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], check=False, capture_output=True, text=True, timeout=20
        )
        if out.returncode == 0 and "GPU" in out.stdout:
            return "cuda:0"
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "cpu"


def request_body(device: str) -> dict[str, Any]:
    return {
        "kernel": triton_add(),
        "num_correct_trials": 1,
        "timing": {"budget_ms": 20, "warmup_ms": 1, "max_trials": 100},
        "device": device,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def warmup_steps(stats: Any) -> dict[str, dict[str, float]]:
    """The last warm-up of the first Python worker's judge and of its candidate (/stats)."""
    for worker in python_workers(stats):
        found = {"judge": {"total": worker["child_warmup_ms"],
                           **(worker.get("child_warmup_steps_ms") or {})}}  # fmt: skip
        if worker.get("child_candidate_warmup_ms") is not None:
            cand = worker.get("child_candidate_warmup_steps_ms") or {}
            found["candidate"] = {"total": worker["child_candidate_warmup_ms"], **cand}
        return found
    return {}


def run_kforge(
    device: str, jobs: int, warm: int, kernel_cache: str, sandbox: str = "auto",
    pause_s: float = 0.0, jobs_per_judge: int = 8,
) -> tuple[list[float], dict[str, Any]]:  # fmt: skip
    """`jobs` evaluations one after another; with `pause_s`, a pause after each in which the
    replacement processes warm up with nothing else running, whose warm-up steps (/stats) are
    collected: a process's warm-up alone, against the one under back-to-back load."""
    flag = "--warm-children-cpu" if device == "cpu" else "--warm-children"
    args = [flag, str(warm), "--kernel-cache", kernel_cache, "--sandbox", sandbox,
            "--jobs-per-judge", str(jobs_per_judge)]  # fmt: skip
    srv = KforgeServer(devices=device, extra_args=args).start()
    try:
        srv.wait_ready(device)
        body = request_body(device)
        latencies = []
        parts = []
        alone: dict[str, list[dict[str, float]]] = {}
        with srv.client() as c:
            first = c.post("/evaluate", json=body).json()  # compiles and caches the kernel
            res = first["kernel_exec_result"]
            assert res["compiled"] and res["correctness"], res
            for _ in range(jobs):
                t0 = time.perf_counter()
                r = c.post("/evaluate", json=body)
                latencies.append(time.perf_counter() - t0)
                view = r.json()
                res = view["kernel_exec_result"]
                assert res["correctness"], res
                parts.append(breakdown(latencies[-1], view))
                if pause_s > 0:
                    time.sleep(pause_s)
                    for who, steps in warmup_steps(c.get("/stats").json()).items():
                        alone.setdefault(who, []).append(steps)
            stats = c.get("/stats").json()
        report_warmups(stats)
        p50 = p50_parts(parts)
        label = f"kforge, {warm} warm, {kernel_cache} caches, sandbox {sandbox}"
        label += f", {jobs_per_judge}/judge"
        print(f"{label}: p50 of each part (ms): {describe(p50)}")
        alone_p50 = {who: p50_parts(runs) for who, runs in alone.items()}
        for who, steps in alone_p50.items():
            count = len(alone[who])
            print(f"{label}: {who} warm-up alone, p50 over {count} (ms): {describe(steps)}")
        return latencies, {"last_result": res, "stats": stats, "breakdown_p50_ms": p50,
                           "warmup_alone_p50_ms": alone_p50}  # fmt: skip
    finally:
        srv.stop()


def baseline_spec(
    device: str, kernel: dict[str, Any], reference: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The job spec a fresh `python -m kforge_worker run-job` process runs: the benches' small
    job (1 correctness trial, a 20 ms timing budget); a compare with `reference`."""
    return {
        "job_id": "baseline",
        "kind": "compare" if reference is not None else "evaluate",
        "kernel": kernel,
        "reference": reference,
        "num_correct_trials": 1,
        "measure_performance": True,
        "timing": {
            "max_trials": 100,
            "min_trials": 3,
            "warmup_calls": 3,
            "warmup_ms": 1.0,
            "budget_ms": 20.0,
            "rse_target": 0.005,
            "cuda_graph": False,
            "l2_flush": True,
        },
        "atol": None,
        "rtol": None,
        "seed": 1234,
        "device": device,
        "timeout_s": 600,
    }


def run_baseline(device: str, jobs: int, python: str) -> list[float]:
    if jobs <= 0:
        return []
    spec = baseline_spec(device, triton_add())
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    latencies = []
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        for i in range(jobs + 1):
            t0 = time.perf_counter()
            out = subprocess.run(
                [python, "-m", "kforge_worker", "run-job", str(spec_path)],
                check=False, capture_output=True, text=True, env=env, timeout=900,
            )  # fmt: skip
            elapsed = time.perf_counter() - t0
            assert out.returncode == 0, out.stderr[-3000:]
            result = json.loads(out.stdout)
            assert result["correctness"], result
            if i > 0:  # the first run fills Triton's cache, like kforge's first job
                latencies.append(elapsed)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default=None)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--baseline-jobs", type=int, default=5)
    parser.add_argument(
        "--warm-children",
        default="3",
        help="comma list: run kforge once per value of --warm-children (e.g. 1,2,3)",
    )
    parser.add_argument(
        "--kernel-cache",
        default="isolated",
        help="comma list: run kforge once per --kernel-cache value (isolated,shared)",
    )
    parser.add_argument(
        "--sandbox", default="auto",
        help="comma list: run kforge once per --sandbox value (required,off: jailed vs not)",
    )  # fmt: skip
    parser.add_argument(
        "--jobs-per-judge", default="8",
        help="comma list: run kforge once per --jobs-per-judge value (1: a judge per job)",
    )  # fmt: skip
    parser.add_argument(
        "--pause-s", type=float, default=0.0,
        help="pause after each job and read the replacement processes' warm-up, made alone",
    )  # fmt: skip
    parser.add_argument("--python", default=os.environ.get("KFORGE_PYTHON", sys.executable))
    parser.add_argument("--out", default=None, help="write raw numbers as JSON here")
    args = parser.parse_args()
    device = args.device or default_device()

    runs = {}
    info: dict[str, Any] = {}
    for per_judge in [int(j) for j in args.jobs_per_judge.split(",")]:
        for sandbox in args.sandbox.split(","):
            for warm in [int(w) for w in args.warm_children.split(",")]:
                for cache in args.kernel_cache.split(","):
                    key = f"{warm} warm, {cache} caches, {per_judge}/judge"
                    if sandbox != "auto":
                        key += f", sandbox {sandbox}"
                    runs[key], info[key] = run_kforge(
                        device, args.jobs, warm, cache, sandbox, args.pause_s, per_judge
                    )
    baseline = run_baseline(device, args.baseline_jobs, args.python)
    rows = {f"kforge, {k}": v for k, v in runs.items()}
    if baseline:  # --baseline-jobs 0 measures kforge alone
        rows["baseline (fresh python per job)"] = baseline
    print(f"\neval latency, device {device}: Triton vector add, 1 correctness trial, 20 ms budget")
    print(f"{'':46s} {'jobs':>5s} {'p50 s':>8s} {'p95 s':>8s} {'mean s':>8s}")
    for name, v in rows.items():
        print(f"{name:46s} {len(v):5d} {percentile(v, 0.5):8.3f} {percentile(v, 0.95):8.3f} "
              f"{statistics.mean(v):8.3f}")  # fmt: skip
    for key, v in runs.items():
        if not baseline:
            break
        ratio = percentile(baseline, 0.5) / percentile(v, 0.5)
        print(f"{f'p50 ratio baseline / kforge ({key})':46s} {'':5s} {ratio:8.1f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "device": device, "kforge_s": runs,
            "baseline_s": baseline, "runs": info,
        }, indent=2, default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
