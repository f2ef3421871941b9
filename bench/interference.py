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

    python bench/interference.py [--device cuda:0] [--jobs 12] [--load-procs 8] [--arch 90]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from timing_interference import N, body  # noqa: E402  (the same fixed kernel and request)

from integration.kforge_server import KforgeServer  # noqa: E402

LOAD = """
import os, sys, time, torch
from kforge_worker import warmup
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--load-procs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--arch", type=int, default=90)
    args = parser.parse_args()
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
            for mode in ("alone", "loaded", "alone", "loaded"):
                began = time.perf_counter()
                if mode == "loaded":
                    load.start()
                try:
                    for _ in range(args.jobs // 2):
                        res = c.post("/compare", json=body(args.device)).json()
                        res = res["kernel_exec_result"]
                        assert res["correctness"], res
                        cand[mode].append(res["runtime_median"])
                        ref[mode].append(res["ref_runtime_stats"]["median"])
                finally:
                    load.stop()
                print(
                    f"{mode}: {args.jobs // 2} jobs in {time.perf_counter() - began:.1f} s, "
                    f"candidate medians {cand[mode][-(args.jobs // 2) :]}",
                    flush=True,
                )
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
            print(
                f"{name:9s} {mode:6s} jobs {len(v):3d}  median {statistics.median(v):.4f} ms  "
                f"min {min(v):.4f}  max {max(v):.4f}  spread {(max(v) - min(v)) / min(v):.2%}"
            )
    ratio = statistics.median(cand["loaded"]) / statistics.median(cand["alone"])
    ref_ratio = statistics.median(ref["loaded"]) / statistics.median(ref["alone"])
    print(
        f"loaded / alone = {ratio:.4f} (reference {ref_ratio:.4f}); "
        f"all {len(cand['alone']) + len(cand['loaded'])} jobs correct"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
