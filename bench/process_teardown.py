"""What a job process's end costs: SIGKILL to reaped, for a process holding a CUDA context.

kforge kills every process of a job when the job ends and waits until its cgroup is empty
before it answers (`ChildChannel::kill_all`), so the end of a process holding a CUDA context
(the driver tears the context down as the process exits) lies on every answer's path. This
measures it outside kforge, on the GPU host:

- reap: a `python` child creates a CUDA context (and, in the second row, cuBLAS), says ready,
  is killed with SIGKILL; the time until waitpid returns (median of --runs);
- stall: meanwhile this process (its own context) times a loop of tiny kernels with a
  synchronisation each; the loop's slowest iteration while a child is torn down, against the
  loop's median with no child dying, says whether a teardown stalls another process's
  driver calls.

    python bench/process_teardown.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time

import torch

CHILD = r"""
import sys, torch
x = torch.ones(1 << 20, device="cuda")
if len(sys.argv) > 1:
    y = x.view(1024, 1024) @ x.view(1024, 1024)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


def spawn(cublas: bool) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", CHILD] + (["cublas"] if cublas else [])
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise SystemExit("the child did not start (no GPU?)")
    return child


def tiny_loop(stop: threading.Event, samples: list[float]) -> None:
    x = torch.ones(1024, device="cuda")
    while not stop.is_set():
        start = time.perf_counter()
        x.add_(1.0)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e3)


def one(cublas: bool) -> tuple[float, float, float]:
    """(reap ms, the loop's slowest iteration during the teardown, its median with nothing
    dying), in ms."""
    child = spawn(cublas)
    quiet: list[float] = []
    stop = threading.Event()
    loop = threading.Thread(target=tiny_loop, args=(stop, quiet))
    loop.start()
    time.sleep(0.2)
    stop.set()
    loop.join()
    during: list[float] = []
    stop = threading.Event()
    loop = threading.Thread(target=tiny_loop, args=(stop, during))
    loop.start()
    time.sleep(0.02)
    start = time.perf_counter()
    child.kill()
    child.wait()
    reap_ms = (time.perf_counter() - start) * 1e3
    stop.set()
    loop.join()
    return reap_ms, max(during), statistics.median(quiet)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a GPU")
    torch.ones(1, device="cuda")
    print(f"process teardown on {torch.cuda.get_device_name()} ({args.runs} runs each)")
    for cublas in (False, True):
        rows = [one(cublas) for _ in range(args.runs)]
        reap = statistics.median(r[0] for r in rows)
        worst = statistics.median(r[1] for r in rows)
        quiet = statistics.median(r[2] for r in rows)
        what = "context + cuBLAS" if cublas else "context"
        low, high = min(r[0] for r in rows), max(r[0] for r in rows)
        print(
            f"{what:18s} SIGKILL -> reaped median {reap:7.1f} ms (min {low:.1f}, max {high:.1f});"
            f" another process's tiny kernel + sync: {quiet:.3f} ms quiet, slowest {worst:.1f} ms"
            " during the teardown"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
