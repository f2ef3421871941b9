"""A batch of candidates for one problem vs the same candidates as separate compares.

RL and agent loops judge many candidates of one problem at once (8-64 samples per prompt).
This times, on one server, N Triton candidates (the same vector add with different block
sizes and warp counts, so each compiles a kernel of its own) against one torch reference, or
with --problem a KernelBench problem file judged against itself N times:

- separate: N POST /compare sent at once (each job runs the reference again);
- batch:    one POST /batch with the N candidates (the reference's outputs and timing computed
            once: docs/worker-protocol.md "Reference reuse");
- sequential (with --sequential): the N compares sent one after another, each after the
            previous answer (how a loop without batches judges its samples).

Both modes run --rounds times, alternating, and every answer must be correct. It prints the
wall time of each round, the ratio separate / batch (the target on a GPU is >= 4x for 16
candidates) and how much of each batch reused the reference.

    python bench/batch_throughput.py [--device cuda:0] [--candidates 16] [--rounds 2]
        [--elements 16777216] [--pipeline-depth N] [--sequential] [--problem FILE.py]
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from latency_parts import report_warmups  # noqa: E402

from integration.kernels import (  # noqa: E402
    TORCH_ADD_REF,
    torch_kernel,
    triton_add,
    vector_add_io,
)
from integration.kforge_server import KforgeServer  # noqa: E402

VARIANTS = [(block, warps) for block in (128, 256, 512, 1024) for warps in (1, 2, 4, 8)]


def candidate(n: int, block: int, warps: int) -> dict[str, Any]:
    kernel = triton_add()
    kernel["io"] = vector_add_io(n, block)
    kernel["io"]["launch"]["num_warps"] = warps
    return kernel


def reference(n: int) -> dict[str, Any]:
    return torch_kernel(
        TORCH_ADD_REF.replace(
            "torch.randn(4096), torch.randn(4096)", f"torch.randn({n}), torch.randn({n})"
        )
    )


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The compare options every job of a run gets (KernelBench's protocol for a problem)."""
    if args.problem is None:
        return {"device": args.device, "num_correct_trials": 3}
    return {
        "device": args.device,
        "num_correct_trials": 5,
        "timing": {"max_trials": 100, "budget_ms": 2000},
        "timeout": 600,
    }


def problem_kernels(path: Path, count: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A KernelBench problem as the reference and `count` candidates that are the problem
    itself (`ModelNew = Model`, each with a comment of its own so no two sources are equal),
    as torch-vs-torch runs judge it."""
    source = path.read_text()
    ref = {"source_code": source, "kernel_type": "torch"}
    cands = [
        {"source_code": f"{source}\n\nModelNew = Model  # candidate {i}\n", "kernel_type": "torch"}
        for i in range(count)
    ]
    return ref, cands


def report_phases(mode: str, results: list[dict[str, Any]]) -> None:
    """Median per-phase times of one round's results, and the first two results' reuse records."""
    phases: dict[str, list[float]] = {}
    for r in results:
        for name, ms in (r.get("phases_ms") or {}).items():
            phases.setdefault(name, []).append(ms)
    medians = {k: round(statistics.median(v), 1) for k, v in phases.items()}
    print(f"{mode} phases_ms median {json.dumps(medians)}", flush=True)
    for r in results[:2]:
        if r.get("reference_reuse") is not None:
            print(f"{mode} reference_reuse {json.dumps(r['reference_reuse'])}", flush=True)


def run_sequential(srv: KforgeServer, ref: dict, cands: list[dict], opts: dict) -> float:
    """The candidates as separate compares sent one after another (a loop that waits for
    each answer before it sends the next)."""
    start = time.perf_counter()
    results = []
    with srv.client() as c:
        for kernel in cands:
            r = c.post("/compare", json={"ref_kernel": ref, "custom_kernel": kernel, **opts})
            assert r.status_code == 200, r.text
            results.append(r.json()["kernel_exec_result"])
    wall = time.perf_counter() - start
    assert all(r["correctness"] for r in results), [r.get("validation_error") for r in results]
    report_phases("sequential", results)
    return wall


def run_separate(srv: KforgeServer, ref: dict, cands: list[dict], opts: dict) -> float:
    def one(kernel: dict[str, Any]) -> dict[str, Any]:
        with srv.client() as c:
            r = c.post("/compare", json={"ref_kernel": ref, "custom_kernel": kernel, **opts})
        assert r.status_code == 200, r.text
        return r.json()["kernel_exec_result"]

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(cands)) as pool:
        results = list(pool.map(one, cands))
    wall = time.perf_counter() - start
    assert all(r["correctness"] for r in results), [r.get("validation_error") for r in results]
    report_phases("separate", results)
    return wall


def run_batch(srv: KforgeServer, ref: dict, cands: list[dict], opts: dict) -> tuple[float, int]:
    start = time.perf_counter()
    with srv.client() as c:
        r = c.post("/batch", json={"ref_kernel": ref, "candidates": cands, **opts})
    wall = time.perf_counter() - start
    assert r.status_code == 200, r.text
    results = [v["kernel_exec_result"] for v in r.json()["results"]]
    assert all(x["correctness"] for x in results), [x.get("validation_error") for x in results]
    report_phases("batch", results)
    reused = sum(1 for x in results if x["reference_reuse"]["reused"].get("reference_timing"))
    return wall, reused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--elements", type=int, default=1 << 24)
    parser.add_argument(
        "--pipeline-depth",
        type=int,
        default=1,
        help="the server's --pipeline-depth (> 1: candidates compile and check side by side, "
        "only their timed regions hold the GPU alone)",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="also time the candidates as compares sent one after another",
    )
    parser.add_argument(
        "--problem",
        type=Path,
        default=None,
        help="a KernelBench problem file: it is the reference and every candidate is the "
        "problem itself (torch vs torch), judged with 5 correctness trials and 100 timed ones",
    )
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.problem is not None and not args.problem.is_file():
        parser.error(f"--problem: {args.problem} is not a file")
    if not 1 <= args.pipeline_depth <= 8:
        parser.error("--pipeline-depth must be 1 to 8")
    n = args.elements
    if args.problem is None:
        ref = reference(n)
        cands = [candidate(n, *VARIANTS[i % len(VARIANTS)]) for i in range(args.candidates)]
        what = f"{args.candidates} Triton candidates, vector add of {n}"
    else:
        ref, cands = problem_kernels(args.problem, args.candidates)
        what = f"{args.candidates} candidates of {args.problem.name} (torch vs torch)"
    opts = options(args)
    extra = ["--pipeline-depth", str(args.pipeline_depth)] if args.pipeline_depth > 1 else []
    srv = KforgeServer(devices=args.device, log_level="info", extra_args=extra)
    srv.start()
    walls: dict[str, list[float]] = {"separate": [], "batch": []}
    reused: list[int] = []
    try:
        srv.wait_ready(args.device)
        run_separate(srv, ref, cands[:1], opts)  # warm-up: first-job costs out of the way
        for _ in range(args.rounds):
            walls["separate"].append(run_separate(srv, ref, cands, opts))
            wall, count = run_batch(srv, ref, cands, opts)
            walls["batch"].append(wall)
            reused.append(count)
            if args.sequential:
                walls.setdefault("sequential", []).append(run_sequential(srv, ref, cands, opts))
            print(f"round: separate {walls['separate'][-1]:.2f} s, batch {wall:.2f} s", flush=True)
        with srv.client() as c:
            report_warmups(c.get("/stats").json())
    finally:
        srv.stop()
    sep, bat = statistics.median(walls["separate"]), statistics.median(walls["batch"])
    print(f"\nbatch throughput, {args.device}, {what}")
    for mode, v in walls.items():
        per = [w / args.candidates for w in v]
        med, med_per = statistics.median(v), statistics.median(per)
        print(f"{mode:9s} rounds {v}  median {med:.2f} s  per candidate {med_per:.3f} s")
    print(f"reference timing reused by {reused} of {args.candidates} candidates per batch")
    print(f"separate / batch = {sep / bat:.2f}x")
    if "sequential" in walls:
        print(f"sequential / batch = {statistics.median(walls['sequential']) / bat:.2f}x")
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "device": args.device,
                    "candidates": args.candidates,
                    "elements": n,
                    "problem": str(args.problem) if args.problem else None,
                    "walls": walls,
                    "reused": reused,
                    "ratio": sep / bat,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
