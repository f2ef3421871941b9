"""kforge's timing of a memory-bound `cuda` kernel vs Nsight Compute's gpu__time_duration.

Runs one job spec (a float32 vector add, 2^26 elements: 768 MB moved per launch) through the
native worker without a server (`kforge worker cuda --job`), twice:
1. plainly: kforge's median (CUDA events around each launch, L2 flushed before each);
2. under `ncu --metrics gpu__time_duration.sum` (caches flushed, clocks left alone), for a
   window of the same launches: ncu's median duration of the kernel.
Prints both, the ratio and the bandwidth each implies; the issue asks for a few percent.

    python bench/cuda_ncu_check.py [--kforge build/gpu/kforge] [--ncu ncu] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.cuda_kernels import vector_add  # noqa: E402

N = 1 << 26
BYTES_MOVED = 3 * 4 * N  # x and y read, out written


def job_spec(cache_dir: str) -> dict[str, Any]:
    # A canonical job spec (docs/worker-protocol.md "Job spec"): every field resolved.
    return {
        "job_id": "ncu-check",
        "kind": "evaluate",
        "device": "cuda:0",
        "kernel": vector_add(n=N),
        "reference": None,
        "num_correct_trials": 1,
        "measure_performance": True,
        "seed": 1234,
        "timing": {
            "max_trials": 200,
            "min_trials": 20,
            "warmup_calls": 3,
            "warmup_ms": 5.0,
            "budget_ms": 300.0,
            "rse_target": 0.005,
            "cuda_graph": False,
            "l2_flush": True,
        },
        "atol": None,
        "rtol": None,
        "timeout_s": 600.0,
        "cache_dir": cache_dir,
    }


def run_kforge(kforge: str, spec_path: Path, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [kforge, "worker", "cuda", "--device", "cuda:0", "--job", str(spec_path)],
        check=False, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"kforge worker cuda failed ({out.returncode}):\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    if not result.get("correctness"):
        raise SystemExit(f"the kernel did not pass: {json.dumps(result)[:3000]}")
    return result


def run_ncu(ncu: str, kforge: str, spec_path: Path, env: dict[str, str]) -> list[float]:
    # Skip the correctness launches and the first timed ones; profile 20 timed launches.
    cmd = [
        ncu, "--csv", "--metrics", "gpu__time_duration.sum", "--clock-control", "none",
        "--cache-control", "all", "-k", "regex:vector_add", "--launch-skip", "10",
        "--launch-count", "20",
        kforge, "worker", "cuda", "--device", "cuda:0", "--job", str(spec_path),
    ]  # fmt: skip
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise SystemExit(
            f"ncu failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        )
    # The CSV starts at the header line; kforge's JSON and ncu's ==PROF== lines come before.
    text = out.stdout[out.stdout.find('"ID"') :]
    durations = []
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0}
        durations.append(value * scale.get(unit, 1e-6))
    if not durations:
        raise SystemExit(f"no gpu__time_duration rows in ncu's output:\n{out.stdout[-3000:]}")
    return durations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kforge", default=os.environ.get("KFORGE_BIN", "build/gpu/kforge"))
    parser.add_argument("--ncu", default=shutil.which("ncu") or "ncu")
    parser.add_argument("--out", default=None, help="directory for the raw numbers")
    args = parser.parse_args()

    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(job_spec(str(Path(tmp) / "cache"))))
        result = run_kforge(args.kforge, spec_path, env)
        ncu_ms = run_ncu(args.ncu, args.kforge, spec_path, env)

    stats = result["runtime_stats"]
    kforge_ms = stats["median"]
    ncu_median = statistics.median(ncu_ms)
    ratio = kforge_ms / ncu_median
    print(f"gpu: {result['metadata'].get('gpu_type')}  kernel: vector_add, n={N} (768 MB/launch)")
    print(f"kforge median {kforge_ms * 1000:.1f} us over {stats['trials']} trials "
          f"({stats.get('method', '?')}), {BYTES_MOVED / kforge_ms / 1e6:.0f} GB/s")  # fmt: skip
    print(f"ncu gpu__time_duration median {ncu_median * 1000:.1f} us over {len(ncu_ms)} launches, "
          f"{BYTES_MOVED / ncu_median / 1e6:.0f} GB/s")  # fmt: skip
    print(
        f"kforge vs ncu (us): {kforge_ms * 1000:.1f} / {ncu_median * 1000:.1f}, ratio {ratio:.3f}"
    )
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "ncu_check.json").write_text(
            json.dumps({"kforge": stats, "ncu_ms": ncu_ms, "ratio": ratio}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
