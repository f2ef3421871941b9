"""Does warming the next job processes disturb the timing of the running job?

kforge forks and warms replacement job processes (CUDA context, first launches) while a job
runs on the same GPU. This measures a memory-bound kernel (a 64 Mi-element vector add, about
0.8 GB moved per call) two ways on one server:

- quiet:  each job is submitted after the warm children have finished warming (--pause-s);
- busy:   jobs back to back, so a replacement child warms during every job.

and prints the distribution of the reported medians, the candidate's (timed late in a job)
and the torch reference's (timed first, when a replacement is earliest in its warm-up: that
is where a KernelBench run caught a 24-32 % slowdown the candidate's numbers did not show).
Equal distributions mean the warm-up does not leak into the numbers.

    python bench/timing_interference.py [--device cuda:0] [--jobs 12] [--pause-s 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.kernels import TORCH_ADD_REF, torch_kernel, triton_add  # noqa: E402
from integration.kforge_server import KforgeServer  # noqa: E402

N = 64 * 1024 * 1024


def body(device: str) -> dict[str, Any]:
    custom = triton_add()
    for arg in custom["io"]["args"]:
        if arg["type"] == "tensor":
            arg["tensor_spec"]["shape"] = [N]
        elif arg["name"] == "n":
            arg["value"] = N
    custom["io"]["launch"]["grid"]["x"] = N // 1024
    return {
        "ref_kernel": torch_kernel(TORCH_ADD_REF),
        "custom_kernel": custom,
        "num_correct_trials": 1,
        "timing": {"budget_ms": 300, "max_trials": 200, "rse_target": 0.001},
        "device": device,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--warm-children", type=int, default=3)
    # A child's warm-up takes ~1.8 s on an H100 (docs/benchmarks.md); quiet jobs wait longer.
    parser.add_argument("--pause-s", type=float, default=4.0)
    args = parser.parse_args()
    srv = KforgeServer(devices=args.device, extra_args=["--warm-children", str(args.warm_children)])
    srv.start()
    try:
        srv.wait_ready(args.device)
        medians: dict[str, list[float]] = {"quiet": [], "busy": []}
        ref_medians: dict[str, list[float]] = {"quiet": [], "busy": []}
        with srv.client() as c:
            c.post("/compare", json=body(args.device))  # compile and cache
            for mode in ("quiet", "busy", "quiet", "busy"):
                for _ in range(args.jobs // 2):
                    if mode == "quiet":
                        time.sleep(args.pause_s)
                    res = c.post("/compare", json=body(args.device)).json()["kernel_exec_result"]
                    assert res["correctness"], res
                    medians[mode].append(res["runtime_median"])  # runtime is the mean
                    ref_medians[mode].append(res["ref_runtime_stats"]["median"])
        print(
            f"\ntiming interference, {args.device}, vector add of {N} float32 (median per job, ms)"
        )
        for who, by_mode in (("", medians), ("ref ", ref_medians)):
            for mode, v in by_mode.items():
                print(
                    f"{who + mode:10s} jobs {len(v):3d}  median of medians "
                    f"{statistics.median(v):.4f}  min {min(v):.4f}  max {max(v):.4f}  "
                    f"spread {(max(v) - min(v)) / min(v):.2%}"
                )
        q, b = statistics.median(medians["quiet"]), statistics.median(medians["busy"])
        print(f"busy / quiet = {b / q:.4f}")
        rq, rb = statistics.median(ref_medians["quiet"]), statistics.median(ref_medians["busy"])
        print(f"reference busy / quiet = {rb / rq:.4f}")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
