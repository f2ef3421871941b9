"""What a CUDA context costs an unjailed process: `cuInit` with the device count, then
torch's primary context with a first allocation, then a cuBLAS handle; alone (one process
at a time) and side by side (N processes started at once, as a pool's warm-ups are). Each
process is either fresh (`python -c`: imports torch, then the steps) or forked from a parent
that imported torch and triton (`fork`), or from one that also ran kforge's zygote warm-up
(`zygote`: the modules it preloads and the kernels it compiles), as kforge's are.

The warm processes of a kforge server make the same steps in their jails (`/stats`,
`child_warmup_steps_ms`; bench/eval_latency.py --pause-s reads them made alone); this is the
baseline they are compared with.

    python bench/context_cost.py [--device cuda:0] [--runs 5] [--side-by-side 1,3,6]
        [--modes fresh,fork,zygote]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import json, sys, time
import torch
dev = torch.device(sys.argv[1])
steps = {}
t = time.perf_counter()
torch.cuda.init()
steps["cuda_init"] = (time.perf_counter() - t) * 1e3
t = time.perf_counter()
torch.cuda.set_device(dev)
torch.empty(1, device=dev)
torch.cuda.synchronize(dev)
steps["cuda_context"] = (time.perf_counter() - t) * 1e3
t = time.perf_counter()
a = torch.randn(64, 64, device=dev)
(a @ a).sum().item()
steps["torch_matmul"] = (time.perf_counter() - t) * 1e3
print(json.dumps(steps))
"""


def run_forked(device: str, n: int) -> list[dict[str, float]]:
    """N probe processes forked together from this process; each one's steps."""
    pipes = []
    for _ in range(n):
        read, write = os.pipe()
        if os.fork() == 0:
            os.close(read)
            os.dup2(write, 1)
            sys.argv = ["probe", device]
            try:
                exec(compile(PROBE, "probe", "exec"), {"__name__": "probe"})
                sys.stdout.flush()
            finally:
                os._exit(0)
        os.close(write)
        pipes.append(read)
    out = []
    for read in pipes:
        with os.fdopen(read) as f:
            out.append(json.loads(f.read().strip().splitlines()[-1]))
        os.wait()
    return out


def prepare_parent(mode: str) -> None:
    """This process as the parent `mode` forks from (it never initialises CUDA)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    from kforge_worker.__main__ import prepare_environment

    prepare_environment("cuda")
    import torch
    import triton  # noqa: F401

    if mode == "zygote":
        from kforge_worker.devinfo import parse_device
        from kforge_worker.warmup import warm_zygote

        warm_zygote(parse_device("cuda:0"), int(os.environ.get("KFORGE_ARCH", "90")))
    assert not torch.cuda.is_initialized(), "the parent must not initialise CUDA"


def run_batch(python: str, device: str, n: int) -> list[dict[str, float]]:
    """N probe processes started together; each one's steps."""
    procs = [
        subprocess.Popen([python, "-c", PROBE, device], stdout=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise SystemExit(f"probe failed with exit status {proc.returncode}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--side-by-side", default="1,3,6")
    ap.add_argument("--modes", default="fresh,fork,zygote")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    print(f"unjailed processes on {args.device}: p50 ms of each step over {args.runs} runs")
    for mode in args.modes.split(","):
        if mode != "fresh":
            prepare_parent(mode)  # fork, then zygote: the zygote's warm-up adds to the imports
        for n in [int(v) for v in args.side_by_side.split(",")]:
            samples: list[dict[str, float]] = []
            for _ in range(args.runs):
                if mode == "fresh":
                    samples.extend(run_batch(args.python, args.device, n))
                else:
                    samples.extend(run_forked(args.device, n))
            p50 = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
            shown = ", ".join(f"{k} {v:.0f}" for k, v in p50.items())
            print(f"{mode}, {n} side by side: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
