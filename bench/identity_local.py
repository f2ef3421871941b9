"""bench/identity.py without the server: the same identical float32 adds as reference and
candidate, each evaluation one `python -m kforge_worker run-job` (this process's worker as the
judge, the candidate an unjailed fresh interpreter, no zygote), so that a difference from the
server's figures is the jail's or the zygote's, and a bias seen here too is the harness's.

    python bench/identity_local.py [--kinds torch,triton] [--sizes 12,16,20] [--evals 4]
        [--device cuda:0]

Prints per kind and size the speedups' min / median / max, how many within 1.00 +- 0.03, and
both sides' medians (us); `identity-local: X/Y within 1.00 +- 0.03` last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "python"))

import fidelity_kernels as FK  # noqa: E402
import worker_kernels as K  # noqa: E402
from worker_jobs import SERVER_DEFAULTS, make_job  # noqa: E402

TOLERANCE = 0.03


def kernel(kind: str, n: int) -> dict[str, Any]:
    if kind == "triton":
        io = K.vadd_io(n, block=1024)
        return {"source_code": K.VADD, "kernel_type": "triton", "io": io, "metadata": {}}
    io = {"args": [K.tensor_arg("x", [n]), K.tensor_arg("y", [n])]}
    return {"source_code": FK.TORCH_ADD, "kernel_type": "torch", "io": io, "metadata": {}}


def run_one(kind: str, n: int, device: str, scratch: Path) -> dict[str, Any]:
    job = make_job(
        kernel(kind, n),
        kernel(kind, n),
        tmp_path=scratch,
        measure_performance=True,
        timing=dict(SERVER_DEFAULTS["timing"]),
        num_correct_trials=1,
        device=device,
    )
    spec = scratch / "job.json"
    spec.write_text(json.dumps(job))
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "kforge_worker", "run-job", str(spec), "--device", device],
        capture_output=True, env=env, timeout=300, check=False, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        return {"error": proc.stderr[-600:]}
    return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kinds", default="torch,triton")
    ap.add_argument("--sizes", default="12,16,20")
    ap.add_argument("--evals", type=int, default=4)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    total = within_all = 0
    print(f"{'kind':<8}{'size':>6}{'min':>8}{'median':>8}{'max':>8}{'within':>8}"
          f"{'cand us':>10}{'ref us':>10}")  # fmt: skip
    for kind in args.kinds.split(","):
        for log2 in (int(s) for s in args.sizes.split(",")):
            speedups, cands, refs = [], [], []
            for _ in range(args.evals):
                with tempfile.TemporaryDirectory() as tmp:
                    res = run_one(kind, 1 << log2, args.device, Path(tmp))
                if res.get("speedup") is None:
                    err = res.get("error") or res.get("runtime_error") or res
                    print(f"{kind} 2^{log2}: no speedup: {str(err)[:300]}", flush=True)
                    continue
                speedups.append(res["speedup"])
                cands.append(res["runtime_stats"]["median"] * 1e3)
                refs.append(res["ref_runtime_stats"]["median"] * 1e3)
            within = sum(abs(s - 1.0) <= TOLERANCE for s in speedups)
            total += args.evals
            within_all += within
            s = speedups or [float("nan")]
            cand = statistics.median(cands) if cands else float("nan")
            ref = statistics.median(refs) if refs else float("nan")
            print(
                f"{kind:<8}{'2^' + str(log2):>6}{min(s):8.3f}{statistics.median(s):8.3f}"
                f"{max(s):8.3f}{within:>5}/{args.evals:<2}{cand:10.2f}{ref:10.2f}",
                flush=True,
            )
    print(f"identity-local: {within_all}/{total} within 1.00 +- {TOLERANCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
