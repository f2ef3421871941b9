"""Timing fidelity (issues #16 and #9): kforge's median against Nsight Compute's
gpu__time_duration.sum, triton.testing.do_bench and do_bench_cudagraph, for kernels from
about 2 us to 10 ms, on the GPU host.

Kernels (bench/fidelity_kernels.py), each as a `triton`, `cuda`, `torch` and `torch_cuda`
kernel: a float32 vector add of 2^16 ... 2^26 elements, a sum of 2^24 floats and a
2048^3 float32 GEMM. Per kernel:
- kforge: --evals evaluations through the real server (POST /evaluate on cuda:0, default
  timing); the median of their medians, the run-to-run coefficient of variation of the
  median, the kernel activity (kernel_time, idle gap, flags); with --graph-evals, as many
  with timing.cuda_graph;
- ncu: `ncu --metrics gpu__time_duration.sum --cache-control all --clock-control none` over
  --ncu-calls calls of the same kernel on the same inputs (kforge's own replay mode:
  `python -m kforge_worker replay BUNDLE` / `kforge worker cuda --replay`); a call's time is the
  sum of its kernels' durations; the median over the calls;
- triton.testing.do_bench and do_bench_cudagraph (median) of the same call, in a process of
  their own.
Targets: within 3 % of ncu at >= 10 us, within 1 us below 10 us, CV <= 1 % at >= 10 us.
Prints a table (last) and writes JSON.

    python bench/timing_fidelity.py [--kinds triton,cuda,torch,torch_cuda]
        [--sizes 16,18,20,22,24,26] [--extra reduction,gemm] [--evals 10] [--graph-evals 3]
        [--ncu ncu] [--out DIR]

KFORGE_BIN names the server binary (default build/gpu/kforge); KFORGE_PYTHON the Python
with torch and triton (default python3).
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
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "python"))

import fidelity_kernels as FK  # noqa: E402

SEED = 20261126
ACCURACY_RATIO = 0.03  # >= 10 us
ACCURACY_US = 1.0  # < 10 us
CV_TARGET = 0.01


def cases(kinds: list[str], sizes: list[int], extra: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for kind in kinds:
        out += [(f"{kind} add 2^{p}", FK.vector_add(kind, 1 << p)) for p in sizes]
        if "reduction" in extra:
            out.append((f"{kind} sum 2^24", FK.reduction(kind)))
        if "gemm" in extra:
            out.append((f"{kind} gemm {FK.GEMM_N}^3", FK.gemm(kind)))
    return out


def evaluate(client: Any, kernel: dict[str, Any], graph: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kernel": kernel,
        "device": "cuda:0",
        "num_correct_trials": 1,
        "seed": SEED,
    }
    if graph:
        body["timing"] = {"cuda_graph": True}
    r = client.post("/evaluate", json=body, timeout=600)
    r.raise_for_status()
    job = r.json()
    result = job.get("kernel_exec_result") or {}
    if not result.get("correctness"):
        raise RuntimeError(f"the kernel failed: {json.dumps(result)[:3000]}")
    if not isinstance(result.get("runtime_stats"), dict):
        raise RuntimeError(f"the kernel was not timed: {json.dumps(result)[:3000]}")
    return result


SERVER_TIMING: dict[str, Any] = json.loads(
    (REPO / "tests" / "protocol" / "defaults.json").read_text()
)["timing"]


def replay_spec(kernel: dict[str, Any], cache_dir: Path) -> dict[str, Any]:
    # A canonical job spec (docs/worker-protocol.md "Job spec"): every field resolved.
    return {
        "job_id": "fidelity",
        "kind": "evaluate",
        "kernel": kernel,
        "reference": None,
        "num_correct_trials": 1,
        "measure_performance": True,
        # The server's defaults (tests/protocol/defaults.json, checked against src/kforge/model).
        "timing": dict(SERVER_TIMING),
        "atol": None,
        "rtol": None,
        "seed": SEED,
        "device": "cuda:0",
        "timeout_s": 600.0,
        "cache_dir": str(cache_dir),
        "scratch_dir": str(cache_dir / "scratch"),
    }


def nvrtc_dir() -> str | None:
    """The CUDA wheels' library directory of this Python (NVRTC for `cuda` kernels)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in spec.submodule_search_locations or [] if spec else []:
        lib = Path(base) / "cu13" / "lib"
        if (lib / "libnvrtc.so.13").exists():
            return str(lib)
    return None


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    if (lib := nvrtc_dir()) is not None:
        env.setdefault("KFORGE_NVRTC_LIB", lib)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), env.get("PYTHONPATH", "")])
    env.pop("TRITON_INTERPRET", None)
    abi = Path(os.environ.get("KFORGE_BIN", REPO / "build/gpu/kforge")).parent / "libkforge_cuda.so"
    if abi.exists():
        env.setdefault("KFORGE_CUDA_ABI", str(abi))
    return env


def ncu_call_times(
    ncu: str,
    kforge: str,
    python: str,
    kernel: dict[str, Any],
    spec_path: Path,
    bundle_path: Path,
    calls: int,
) -> list[float]:
    """Per-call device time (ms): the sum of the call's kernels' gpu__time_duration."""
    cmd = [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        "gpu__time_duration.sum",
        "--cache-control",
        "all",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
    ]
    if kernel["kernel_type"] == "cuda":
        cmd += [
            kforge,
            "worker",
            "cuda",
            "--device",
            "cuda:0",
            "--replay",
            str(spec_path),
            "--role",
            "candidate",
            "--repeat",
            str(calls),
        ]
    else:
        cmd += [
            "--nvtx",
            "--nvtx-include",
            "kforge_replay/",
            python,
            "-m",
            "kforge_worker",
            "replay",
            str(bundle_path),
            "--repeat",
            str(calls),
        ]
    out = subprocess.run(
        cmd, capture_output=True, text=True, env=worker_env(), timeout=900, check=False
    )
    text = out.stdout[out.stdout.find('"ID"') :] if '"ID"' in out.stdout else ""
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 3:
        raise RuntimeError(
            f"ncu gave no table ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        )
    header, units, data = rows[0], rows[1], [r for r in rows[2:] if r and r[0]]
    col = header.index("gpu__time_duration.sum")
    scale = {"second": 1e3, "msecond": 1.0, "usecond": 1e-3, "nsecond": 1e-6}.get(units[col], 1e-6)
    durations = [float(r[col].replace(",", "")) * scale for r in data]
    per_call = len(durations) // calls
    if per_call == 0 or len(durations) % calls:
        raise RuntimeError(f"{len(durations)} kernels for {calls} calls: cannot split them")
    return [sum(durations[i * per_call : (i + 1) * per_call]) for i in range(calls)]


def reference_timers(python: str, spec_path: Path, bundle_path: Path) -> dict[str, float]:
    """do_bench and do_bench_cudagraph in a child process, which also writes the replay
    bundle of the same call (replay.io_bundle) for ncu."""
    out = subprocess.run(
        [
            python,
            str(Path(__file__).resolve()),
            "--timers-child",
            str(spec_path),
            "--bundle",
            str(bundle_path),
        ],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"timers child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def timers_child(spec_path: str, bundle_path: str) -> int:
    """do_bench and do_bench_cudagraph of the job's call on its timing inputs, the kernel
    built as the worker builds it (through the replay bundle this writes for ncu)."""
    import torch
    import triton.testing

    from kforge_worker.candidate.replay import io_bundle, load_bundle
    from kforge_worker.core.devinfo import parse_device
    from kforge_worker.core.spec import parse_job
    from kforge_worker.timing.device_metrics import save_bundle

    job = parse_job(json.loads(Path(spec_path).read_text()))
    device = parse_device(job.device).torch_device()
    torch.cuda.set_device(device)
    bundle = io_bundle(
        json.loads(Path(spec_path).read_text())["kernel"],
        seed=job.seed,
        trial=job.num_correct_trials,
        device=device,
        cache_dir=job.cache_dir,
    )
    save_bundle(bundle, Path(bundle_path))
    runnable, inv, _ = load_bundle(bundle_path)

    def call() -> object:
        return runnable(inv.args, inv.kwargs)

    with torch.no_grad():
        call()
        torch.cuda.synchronize()
        eager = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
        try:
            graph = triton.testing.do_bench_cudagraph(call, rep=100, return_mode="median")
        except Exception:  # not capturable
            graph = float("nan")
    print(json.dumps({"do_bench_ms": eager, "do_bench_cudagraph_ms": graph}))
    return 0


def within_target(kforge_us: float, ncu_us: float) -> bool:
    if ncu_us >= 10.0:
        return abs(kforge_us / ncu_us - 1.0) <= ACCURACY_RATIO
    return abs(kforge_us - ncu_us) <= ACCURACY_US


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def measure_case(
    name: str, kernel: dict[str, Any], args: argparse.Namespace, client: Any, work: Path
) -> dict[str, Any]:
    row: dict[str, Any] = {"case": name, "kernel_type": kernel["kernel_type"]}
    medians, event_medians, kernel_times, idle, flags = [], [], [], [], set()
    phase = time.perf_counter()
    for _ in range(args.evals):
        result = evaluate(client, kernel, graph=False)
        medians.append(result["runtime_stats"]["median"])
        if result["runtime_stats"].get("event_median") is not None:
            event_medians.append(result["runtime_stats"]["event_median"])
        row["window_overhead_us"] = result["runtime_stats"].get("window_overhead_us")
        if result.get("kernel_time") is not None:
            kernel_times.append(result["kernel_time"])
        if result.get("idle_gap_ms") is not None:
            idle.append(result["idle_gap_ms"])
        flags |= {f["code"] for f in result.get("timing_flags", [])}
        row["spin_us"] = result["runtime_stats"].get("spin_us")
        row["enqueue_ms"] = result["runtime_stats"].get("enqueue_ms")
    row["kforge_medians_ms"] = medians
    row["kforge_ms"] = statistics.median(medians)
    row["event_ms"] = statistics.median(event_medians) if event_medians else None
    row["cv"] = cv(medians)
    row["kernel_time_ms"] = statistics.median(kernel_times) if kernel_times else None
    row["idle_gap_ms"] = statistics.median(idle) if idle else None
    row["flags"] = sorted(flags)
    graph = [
        evaluate(client, kernel, graph=True)["runtime_stats"]["median"]
        for _ in range(args.graph_evals)
    ]
    row["kforge_graph_ms"] = statistics.median(graph) if graph else None
    row["seconds"] = {"kforge": round(time.perf_counter() - phase, 1)}
    phase = time.perf_counter()
    stem = name.replace(" ", "_").replace("^", "")
    spec_path = work / f"{stem}.json"
    bundle_path = work / f"{stem}.pt"
    spec_path.write_text(json.dumps(replay_spec(kernel, work / "cache")))
    try:
        row.update(reference_timers(args.python, spec_path, bundle_path))
    except Exception as e:
        row["timers_error"] = str(e)[-2000:]
    row["seconds"]["do_bench"] = round(time.perf_counter() - phase, 1)
    phase = time.perf_counter()
    try:
        ncu = ncu_call_times(
            args.ncu, args.kforge, args.python, kernel, spec_path, bundle_path, args.ncu_calls
        )
        row["ncu_ms"] = statistics.median(ncu)
        row["ncu_calls_ms"] = ncu
    except Exception as e:
        row["ncu_ms"] = None
        row["ncu_error"] = str(e)[-2000:]
    row["seconds"]["ncu"] = round(time.perf_counter() - phase, 1)
    return row


def fmt_us(ms: float | None) -> str:
    return "-" if ms is None or ms != ms else f"{ms * 1e3:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| case | ncu (us) | kforge (us) | kforge/ncu | target | CV % | event (us) | "
        "kernel_time (us) | idle (us) | kforge graph (us) | do_bench (us) | "
        "do_bench_cudagraph (us) | flags |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        ncu, kf = r.get("ncu_ms"), r["kforge_ms"]
        ratio = f"{kf / ncu:.3f}" if ncu else "-"
        target = "-" if not ncu else ("yes" if within_target(kf * 1e3, ncu * 1e3) else "NO")
        cv_ok = r["cv"] <= CV_TARGET or (ncu or kf) < 0.010
        lines.append(
            f"| {r['case']} | {fmt_us(ncu)} | {fmt_us(kf)} | {ratio} | {target} | "
            f"{r['cv'] * 100:.2f}{'' if cv_ok else ' (!)'} | {fmt_us(r.get('event_ms'))} | "
            f"{fmt_us(r['kernel_time_ms'])} | "
            f"{fmt_us(r['idle_gap_ms'])} | {fmt_us(r.get('kforge_graph_ms'))} | "
            f"{fmt_us(r.get('do_bench_ms'))} | {fmt_us(r.get('do_bench_cudagraph_ms'))} | "
            f"{','.join(r['flags']) or '-'} |"
        )
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    timed = [r for r in rows if r.get("ncu_ms")]
    met = sum(within_target(r["kforge_ms"] * 1e3, r["ncu_ms"] * 1e3) for r in timed)
    big = [r for r in timed if r["ncu_ms"] >= 0.010]
    cv_met = sum(r["cv"] <= CV_TARGET for r in big)
    return (
        f"fidelity: {met}/{len(timed)} within target (3 % >= 10 us, 1 us below); "
        f"CV <= 1 %: {cv_met}/{len(big)} at >= 10 us"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--timers-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--bundle", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--kinds", default=",".join(FK.KINDS))
    parser.add_argument("--sizes", default="16,18,20,22,24,26", help="log2 of the add's sizes")
    parser.add_argument("--extra", default="reduction,gemm")
    parser.add_argument("--evals", type=int, default=10)
    parser.add_argument("--graph-evals", type=int, default=3)
    parser.add_argument("--ncu-calls", type=int, default=20)
    parser.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    parser.add_argument(
        "--kforge", default=os.environ.get("KFORGE_BIN", str(REPO / "build/gpu/kforge"))
    )
    parser.add_argument("--python", default=os.environ.get("KFORGE_PYTHON", sys.executable))
    parser.add_argument("--out", default=None, help="directory for timing_fidelity.json")
    args = parser.parse_args()
    if args.timers_child:
        return timers_child(args.timers_child, args.bundle)

    import httpx

    from integration.kforge_server import KforgeServer

    os.environ.setdefault("KFORGE_BIN", args.kforge)
    todo = cases(
        [k for k in args.kinds.split(",") if k],
        [int(s) for s in args.sizes.split(",") if s],
        [e for e in args.extra.split(",") if e],
    )
    rows = []
    work = Path(tempfile.mkdtemp(prefix="kforge-fidelity-"))
    server = KforgeServer(devices="cuda:0", log_level="info").start()
    try:
        server.wait_ready()
        with httpx.Client(base_url=server.url) as client:
            for name, kernel in todo:
                start = time.perf_counter()
                try:
                    row = measure_case(name, kernel, args, client, work)
                except Exception as e:
                    print(f"{name}: FAILED: {e}", flush=True)
                    rows.append({"case": name, "error": str(e)[-3000:]})
                    continue
                rows.append(row)
                print(
                    f"{table([row]).splitlines()[-1]} ({time.perf_counter() - start:.0f} s: "
                    f"{row['seconds']})",
                    flush=True,
                )
                if args.out:  # what a cut-short run measured stays
                    Path(args.out).mkdir(parents=True, exist_ok=True)
                    (Path(args.out) / "timing_fidelity.json").write_text(json.dumps(rows, indent=2))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "timing_fidelity.json").write_text(json.dumps(rows, indent=2))
    good = [r for r in rows if "error" not in r]
    for r in rows:
        if "error" in r:
            print(f"error: {r['case']}: {r['error'][:500]}")
        for key in ("ncu_error", "timers_error"):
            if key in r:
                print(f"{key}: {r['case']}: {r[key][:500]}")
    print()
    print(table(good))
    print(summary(good))
    return 0 if len(good) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
