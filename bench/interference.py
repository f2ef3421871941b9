"""Does CPU-bound compile work on the host disturb the timing of a kernel on the GPU?

Pipelining the jobs' stages (docs/architecture.md) means compiling (Triton, NVRTC,
load_inline), generating inputs and importing modules for some jobs while another job's kernel
is timed on the GPU. Correctness and timing must not change because of it. This times a fixed
memory-bound kernel (a Triton vector add of 64 Mi float32, about 0.8 GB per call, against the
torch reference) through one kforge server two ways:

- alone:  nothing else runs on the host;
- loaded: --load-procs processes run compile load the whole time: full Triton compiles for a
          CUDA target (the cache bypassed, as kforge's zygote warm-up does) and CPU input
          generation (torch.randn of 16 Mi elements), in a loop.

It alternates the modes (alone, loaded, alone, loaded), --jobs compares each, and prints the
distributions of the reported medians (candidate and reference), the ratio loaded / alone and
how many compiles the load did. Every job must be correct. A ratio within the jobs' own spread
means the compile load does not leak into the numbers.

With --pipeline-depth N (N > 1) it then measures the pipelined stages themselves: a second
server runs with --pipeline-depth N, and two fixed jobs are timed alone and while
--pipeline-jobs other jobs are kept in flight on the same GPU: a native `cuda` kernel (a
vector add of 64 Mi float32) and the Python Triton compare above (candidate and reference).
Half the load lanes send native `cuda` jobs (a tiled matmul with a fresh source, so NVRTC
compiles every one), the other half Python Triton compares (a vector add with a fresh
source, so Triton compiles every one). The load jobs compile, and the Python ones also
import and check correctness, under the shared grant while a measured job times under the
exclusive one; the measured timings must not change (pipelined / alone within the spread),
every job must be correct, and no two jobs' exclusive grants (`process.device_grants`) may
overlap.

    python bench/interference.py [--device cuda:0] [--jobs 12] [--load-procs 8] [--arch 90]
                                 [--pipeline-depth 3] [--pipeline-jobs 6]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from timing_interference import N, body  # noqa: E402  (the same fixed kernel and request)

from integration.cuda_kernels import VECTOR_ADD, tiled_matmul, vector_add  # noqa: E402
from integration.kernels import TORCH_ADD_REF, torch_kernel, triton_add  # noqa: E402
from integration.kforge_server import KforgeServer  # noqa: E402

LOAD = """
import os, sys, time, torch
from kforge_worker.process import warmup
arch, counter = int(sys.argv[1]), sys.argv[2]
done = 0
while True:
    warmup.triton_compile(arch)
    torch.randn(1 << 24).sum()
    done += 1
    with open(counter, "w") as f:
        f.write(str(done))
"""


class Load:
    """--load-procs compile-load processes, started and stopped around a mode's jobs."""

    def __init__(self, procs: int, arch: int, workdir: Path) -> None:
        self.procs, self.arch, self.workdir = procs, arch, workdir
        self.running: list[subprocess.Popen[bytes]] = []
        self.counters: list[Path] = []

    def start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO / "python"),
            "TRITON_CACHE_DIR": str(self.workdir / "triton"),
        }
        env.pop("CUDA_VISIBLE_DEVICES", None)
        for i in range(self.procs):
            counter = self.workdir / f"load-{len(self.counters)}-{i}.count"
            self.counters.append(counter)
            self.running.append(
                subprocess.Popen(
                    [sys.executable, "-c", LOAD, str(self.arch), str(counter)],
                    env={**env, "CUDA_VISIBLE_DEVICES": ""},  # CPU work only
                    stdout=subprocess.DEVNULL,
                    stderr=(self.workdir / f"load-{i}.log").open("ab"),
                )
            )
        time.sleep(5.0)  # imports done, compiling

    def stop(self) -> None:
        for p in self.running:
            p.kill()
            p.wait()
        self.running = []

    def compiles(self) -> int:
        return sum(int(c.read_text() or 0) for c in self.counters if c.exists())


class Starter(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


def alternate(
    c: httpx.Client, load: Starter, loaded: str, jobs: int, route: str, request: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """`jobs` requests in all per mode, alternating alone / `loaded` twice; the load runs during
    `loaded`. Every result must be correct."""
    out: dict[str, list[dict[str, Any]]] = {"alone": [], loaded: []}
    for mode in ("alone", loaded, "alone", loaded):
        began = time.perf_counter()
        if mode != "alone":
            load.start()
        try:
            for _ in range(jobs // 2):
                res = c.post(route, json=request).json()["kernel_exec_result"]
                assert res["correctness"], res
                out[mode].append(res)
        finally:
            load.stop()
        print(f"{mode}: {jobs // 2} jobs in {time.perf_counter() - began:.1f} s", flush=True)
    return out


def describe(name: str, mode: str, v: list[float]) -> str:
    return (
        f"{name:9s} {mode:9s} jobs {len(v):3d}  median {statistics.median(v):.4f} ms  "
        f"min {min(v):.4f}  max {max(v):.4f}  spread {(max(v) - min(v)) / min(v):.2%}"
    )


def cuda_body(device: str) -> dict[str, Any]:
    """The measured native job: a vector add of N float32, timed (no reference)."""
    return {
        "kernel": vector_add(n=N, source=VECTOR_ADD),
        "num_correct_trials": 1,
        "timing": {"budget_ms": 300, "max_trials": 200, "rse_target": 0.001},
        "device": device,
    }


def load_body(device: str, i: int) -> dict[str, Any]:
    """A native load job: a tiled matmul whose source differs each time (NVRTC compiles it)."""
    kernel = tiled_matmul(m=512, n=512, k=512)
    kernel["source_code"] += f"\n// pipelined load job {i}\n"
    return {
        "kernel": kernel,
        "num_correct_trials": 1,
        "timing": {"budget_ms": 100},
        "device": device,
    }


def python_load_body(device: str, i: int) -> dict[str, Any]:
    """A Python load job: a Triton vector add compare whose source differs each time (Triton
    compiles it), checked and timed against the torch reference."""
    return {
        "custom_kernel": triton_add(f" + 0.0 * {i}"),
        "ref_kernel": torch_kernel(TORCH_ADD_REF),
        "num_correct_trials": 2,
        "timing": {"budget_ms": 100},
        "device": device,
    }


def overlaps(windows: list[tuple[float, float]]) -> int:
    """How many pairs of consecutive exclusive grants (sorted by start) overlap."""
    w = sorted(windows)
    return sum(1 for (_, end), (start, _) in itertools.pairwise(w) if start < end)


class PipelinedLoad:
    """Keeps `jobs` jobs in flight on the server (submitted with wait=false): even lanes
    native `cuda` jobs, odd lanes Python Triton compares."""

    def __init__(self, srv: KforgeServer, device: str, jobs: int) -> None:
        self.srv, self.device, self.jobs = srv, device, jobs
        self.stop_flag = threading.Event()
        self.threads: list[threading.Thread] = []
        self.done = 0
        self.failed: list[str] = []
        self.waits: list[float] = []
        self.python_done = 0
        self.windows: list[tuple[float, float]] = []  # exclusive grants of every job
        self.lock = threading.Lock()

    def _run(self, lane: int) -> None:
        i = 0
        with self.srv.client() as c:
            while not self.stop_flag.is_set():
                i += 1
                python = lane % 2 == 1
                job_id = c.post(
                    "/compare" if python else "/evaluate",
                    params={"wait": "false"},
                    json=(python_load_body if python else load_body)(
                        self.device, lane * 100000 + i
                    ),
                ).json()["job_id"]
                while (job := c.get(f"/job/{job_id}").json())["state"] in ("queued", "running"):
                    time.sleep(0.05)
                res = job.get("kernel_exec_result") or {}
                with self.lock:
                    self.done += 1
                    if not res.get("correctness"):
                        self.failed.append(f"{job_id}: {job.get('error') or res.get('error')}")
                    self.python_done += 1 if python else 0
                    self.note(res)

    def note(self, res: dict[str, Any]) -> None:
        """The device wait and exclusive grants of a result. Requires lock."""
        process = res.get("process") or {}
        if "device_wait_ms" in process:
            self.waits.append(process["device_wait_ms"])
        for g in process.get("device_grants") or []:
            if "released_at_ms" in g:
                self.windows.append((g["granted_at_ms"], g["released_at_ms"]))

    def start(self) -> None:
        self.stop_flag.clear()
        self.threads = [
            threading.Thread(target=self._run, args=(lane,), daemon=True)
            for lane in range(self.jobs)
        ]
        for t in self.threads:
            t.start()
        time.sleep(2.0)  # the first ones compiling

    def stop(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=120)
        self.threads = []


def pipelined(args: argparse.Namespace) -> int:
    srv = KforgeServer(
        devices=args.device, extra_args=["--pipeline-depth", str(args.pipeline_depth)]
    )
    srv.start()
    medians: dict[str, dict[str, list[float]]] = {}
    load = PipelinedLoad(srv, args.device, args.pipeline_jobs)
    try:
        srv.wait_ready(args.device)
        with srv.client() as c:
            depth = [d for d in c.get("/stats").json()["devices"] if d["name"] == args.device]
            print(f"pipeline depth reported by /stats: {depth[0].get('depth') if depth else None}")
            c.post("/evaluate", json=cuda_body(args.device))  # compile and cache
            c.post("/compare", json=body(args.device))
            runs = alternate(c, load, "pipelined", args.jobs, "/evaluate", cuda_body(args.device))
            medians["cuda"] = {mode: [r["runtime_median"] for r in rs] for mode, rs in runs.items()}
            runs = alternate(c, load, "pipelined", args.jobs, "/compare", body(args.device))
            medians["triton"] = {
                mode: [r["runtime_median"] for r in rs] for mode, rs in runs.items()
            }
            medians["torch ref"] = {
                mode: [r["ref_runtime_stats"]["median"] for r in rs] for mode, rs in runs.items()
            }
            with load.lock:
                for rs in runs.values():
                    for r in rs:
                        load.note(r)
    finally:
        load.stop()
        srv.stop()
    print(
        f"\npipelined stages, {args.device}, --pipeline-depth {args.pipeline_depth}, "
        f"{args.pipeline_jobs} jobs in flight (half native cuda, half Python Triton); "
        f"measured: cuda vector add and Triton vector add (vs torch) of {N} float32"
    )
    for name, data in medians.items():
        for mode, v in data.items():
            print(describe(name, mode, v))
    waits = sorted(load.waits)
    if waits:
        print(
            f"load jobs {load.done} ({load.python_done} Python), device_wait_ms median "
            f"{statistics.median(waits):.1f} max {waits[-1]:.1f}"
        )
    for f in load.failed[:5]:
        print(f"load job not correct: {f}")
    bad = overlaps(load.windows)
    print(f"exclusive grants seen {len(load.windows)}, overlapping {bad}")
    for name, data in medians.items():
        ratio = statistics.median(data["pipelined"]) / statistics.median(data["alone"])
        print(f"{name}: pipelined / alone = {ratio:.4f}")
    print(f"load jobs {load.done}, {len(load.failed)} not correct")
    return 1 if load.failed or bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--load-procs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--pipeline-depth", type=int, default=0)
    parser.add_argument("--pipeline-jobs", type=int, default=6)
    parser.add_argument("--only-pipelined", action="store_true")
    args = parser.parse_args()
    if args.only_pipelined:
        return pipelined(args)
    workdir = Path(tempfile.mkdtemp(prefix="kforge-interference-"))
    load = Load(args.load_procs, args.arch, workdir)
    srv = KforgeServer(devices=args.device)
    srv.start()
    cand: dict[str, list[float]] = {"alone": [], "loaded": []}
    ref: dict[str, list[float]] = {"alone": [], "loaded": []}
    try:
        srv.wait_ready(args.device)
        with srv.client() as c:
            c.post("/compare", json=body(args.device))  # compile and cache
            runs = alternate(c, load, "loaded", args.jobs, "/compare", body(args.device))
        for mode, rs in runs.items():
            cand[mode] = [r["runtime_median"] for r in rs]
            ref[mode] = [r["ref_runtime_stats"]["median"] for r in rs]
    finally:
        load.stop()
        srv.stop()
    print(
        f"\ninterference, {args.device}, vector add of {N} float32, "
        f"{args.load_procs} load processes"
    )
    print(f"compiles done by the load: {load.compiles()}")
    for name, data in (("candidate", cand), ("reference", ref)):
        for mode, v in data.items():
            print(describe(name, mode, v))
    ratio = statistics.median(cand["loaded"]) / statistics.median(cand["alone"])
    ref_ratio = statistics.median(ref["loaded"]) / statistics.median(ref["alone"])
    print(
        f"loaded / alone = {ratio:.4f} (reference {ref_ratio:.4f}); "
        f"all {len(cand['alone']) + len(cand['loaded'])} jobs correct"
    )
    return pipelined(args) if args.pipeline_depth > 1 else 0


if __name__ == "__main__":
    raise SystemExit(main())
