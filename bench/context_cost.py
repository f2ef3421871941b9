"""What a CUDA context costs an unjailed process: `cuInit` with the device count, then
torch's primary context with a first allocation, then a cuBLAS handle; alone (one process
at a time) and side by side (N processes started at once, as a pool's warm-ups are). Each
process is either fresh (`python -c`: imports torch, then the steps) or forked from a parent
that imported torch and triton (`fork`), or from one that also ran kforge's zygote warm-up
(`zygote`: the modules it preloads and the kernels it compiles), as kforge's are; `judge`
and `candidate` fork from that zygote and run a job process's whole warm-up in that role,
so N side by side give the supply rate of warm processes on the device (processes/s).

The warm processes of a kforge server make the same steps in their jails (`/stats`,
`child_warmup_steps_ms`; bench/eval_latency.py --pause-s reads them made alone); this is the
baseline they are compared with.

    python bench/context_cost.py [--device cuda:0] [--runs 5] [--side-by-side 1,3,6]
        [--modes fresh,fork,zygote,candidate,judge]
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


# A whole warm-up of a job process (warmup.warm_child) in the given role.
WARM = r"""
import json, sys
from kforge_worker.core.devinfo import parse_device
from kforge_worker.process.warmup import warm_child
report, _ = warm_child(parse_device(sys.argv[1]), role=sys.argv[2])
print(json.dumps({"total": report.total_ms, **report.steps_ms}))
"""


def run_forked(device: str, n: int, role: str = "") -> list[dict[str, float]]:
    """N processes forked together from this process, each running the probe (or, with a
    `role`, a job process's whole warm-up); each one's steps, and `batch_wall` (ms from the
    first fork to the last answer) in the first."""
    pipes = []
    started = time.perf_counter()
    for _ in range(n):
        read, write = os.pipe()
        if os.fork() == 0:
            os.close(read)
            os.dup2(write, 1)
            sys.argv = ["probe", device, role]
            try:
                code = WARM if role else PROBE
                exec(compile(code, "probe", "exec"), {"__name__": "probe"})
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
    out[0]["batch_wall"] = (time.perf_counter() - started) * 1e3
    return out


_PREPARED: set[str] = set()


def prepare_parent(mode: str) -> None:
    """This process as the parent `mode` forks from (it never initialises CUDA)."""
    if mode in _PREPARED:
        return
    _PREPARED.add(mode)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="kforge-context-cost-"))
    from kforge_worker.__main__ import prepare_environment

    prepare_environment("cuda")
    import torch
    import triton  # noqa: F401

    if mode == "zygote":
        from kforge_worker.core.devinfo import parse_device
        from kforge_worker.process.warmup import warm_zygote

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
            # fork, then zygote (its warm-up adds to the imports); judge and candidate fork
            # from the zygote and run a whole warm-up in that role.
            prepare_parent("fork" if mode == "fork" else "zygote")
        role = mode if mode in ("judge", "candidate") else ""
        for n in [int(v) for v in args.side_by_side.split(",")]:
            samples: list[dict[str, float]] = []
            for _ in range(args.runs):
                if mode == "fresh":
                    samples.extend(run_batch(args.python, args.device, n))
                else:
                    samples.extend(run_forked(args.device, n, role))
            keys = dict.fromkeys(k for s in samples for k in s)
            p50 = {k: statistics.median(s[k] for s in samples if k in s) for k in keys}
            shown = ", ".join(f"{k} {v:.0f}" for k, v in p50.items())
            rate = ""
            if "batch_wall" in p50:
                rate = f" -> {n / (p50['batch_wall'] / 1e3):.1f} processes/s"
            print(f"{mode}, {n} side by side: {shown}{rate}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
