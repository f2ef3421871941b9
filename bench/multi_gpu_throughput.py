"""Two GPUs vs one on a mixed batch of jobs (issue 13's target: >= 1.8x).

The same mixed set of jobs — Triton vector adds (each a source of its own, so each compiles),
torch models and native CUDA tiled matmuls, all with `"device": "gpu"` (any GPU) — runs first
on a server that serves one GPU (`--devices cuda:0`), then on one that serves every GPU
(`--devices gpus`), each freshly started and warmed with one job per device. It prints each
wall time, the jobs per device of the second run (they must use every GPU) and the ratio
one / all. Every job must be correct.

    python bench/multi_gpu_throughput.py [--jobs 24] [--size small|large] [--rounds 1]
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.cuda_kernels import tiled_matmul  # noqa: E402
from integration.kernels import (  # noqa: E402
    TORCH_ADD_REF,
    torch_kernel,
    triton_add,
    vector_add_io,
)
from integration.kforge_server import KforgeServer  # noqa: E402

# Per size: vector elements (Triton and torch adds) and the matmul's edge. "small" jobs are
# bound by per-job CPU work (compile, processes, checks); "large" ones keep the GPU busy in
# their correctness and timing phases.
SIZES = {"small": (4096, 512), "large": (1 << 25, 2048)}


def mixed_jobs(count: int, size: str = "small") -> list[dict[str, Any]]:
    """`count` evaluate bodies, one kind after another, every source distinct."""
    elements, edge = SIZES[size]
    bodies = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            kernel = triton_add(extra=f" + 0.0 * {i}")
            kernel["io"] = vector_add_io(elements)
        elif kind == 1:
            source = TORCH_ADD_REF.replace("return", f"# job {i}\n        return", 1)
            kernel = torch_kernel(source.replace("randn(4096)", f"randn({elements})"))
        else:
            kernel = tiled_matmul(m=edge, n=edge, k=edge)
            kernel["source_code"] += f"\n// job {i}\n"
        bodies.append({"kernel": kernel, "device": "gpu", "num_correct_trials": 3})
    return bodies


def run(devices: str, bodies: list[dict[str, Any]]) -> tuple[float, dict[str, int]]:
    srv = KforgeServer(devices=devices, log_level="info")
    srv.start()
    try:
        with srv.client() as c:
            names = [d["name"] for d in c.get("/stats").json()["devices"] if d["name"] != "cpu"]
        for name in names:
            srv.wait_ready(name)
        with srv.client() as c:  # one job per device: first-job costs out of the way
            for name in names:
                warm = {**bodies[1], "device": name}
                assert c.post("/evaluate", json=warm).json()["kernel_exec_result"]["correctness"]
        start = time.perf_counter()
        ids = []
        with srv.client() as c:
            for body in bodies:
                r = c.post("/evaluate", params={"wait": "false"}, json=body)
                assert r.status_code == 202, r.text
                ids.append(r.json()["job_id"])
            used: collections.Counter[str] = collections.Counter()
            for job_id in ids:
                while (job := c.get(f"/job/{job_id}").json())["state"] in ("queued", "running"):
                    time.sleep(0.02)
                res = job["kernel_exec_result"]
                assert job["state"] == "success" and res["correctness"], job
                used[job["device"]] += 1
        return time.perf_counter() - start, dict(sorted(used.items()))
    finally:
        srv.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.jobs < 2 or args.rounds < 1:
        parser.error("--jobs must be at least 2 and --rounds at least 1")
    bodies = mixed_jobs(args.jobs, args.size)
    walls: dict[str, list[float]] = {"one GPU": [], "all GPUs": []}
    spread: dict[str, int] = {}
    for _ in range(args.rounds):
        one, _used = run("cuda:0", bodies)
        walls["one GPU"].append(one)
        every, spread = run("gpus", bodies)
        walls["all GPUs"].append(every)
        print(f"round: one GPU {one:.2f} s, all GPUs {every:.2f} s, jobs per device {spread}")
    one, every = statistics.median(walls["one GPU"]), statistics.median(walls["all GPUs"])
    print(f"\nmixed batch of {args.jobs} {args.size} jobs (Triton, torch, CUDA), any GPU")
    for mode, v in walls.items():
        print(f"{mode:9s} rounds {[round(x, 2) for x in v]}  median {statistics.median(v):.2f} s")
    print(f"jobs per device (all GPUs) {spread}")
    print(f"one / all = {one / every:.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({"walls": walls, "spread": spread}, indent=2))
    return 0 if len(spread) >= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
