"""Sustained throughput of small compares: N clients submitting back to back on one device.

An RL loop or an agent submits candidates one after another, and several such loops share a
GPU. For each N in --clients (default 1,4,16) this runs N client threads for --seconds, each
sending a small compare (a Triton vector add of --elements elements against torch's x + y,
1 correctness trial, a 20 ms timing budget; the kernel compiled once beforehand) and the next
as soon as the answer comes. It prints the completed evaluations per second and the latency
percentiles, beside the old way in the same run: the same job in a fresh `python` process
per evaluation (`python -m kforge_worker run-job`), N of them at a time.

    python bench/client_throughput.py [--device cuda:0|cpu] [--clients 1,4,16] [--seconds 60]
        [--elements 1048576] [--warm-children 3] [--baseline-seconds 60] [--out FILE.json]

Every answer must be correct; an incorrect or failed one stops the run. Figures belong to the
machine they came from: say which GPU (H100 / H200) when quoting them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from eval_latency import baseline_spec, default_device, percentile  # noqa: E402

from integration.kernels import TORCH_ADD_REF, torch_kernel, triton_add, vector_add_io  # noqa: E402
from integration.kforge_server import KforgeServer  # noqa: E402

TIMING = {"budget_ms": 20, "warmup_ms": 1, "max_trials": 100}


def reference_source(elements: int) -> str:
    return TORCH_ADD_REF.replace("torch.randn(4096)", f"torch.randn({elements})")


def candidate(elements: int) -> dict[str, Any]:
    kernel = triton_add()
    kernel["io"] = vector_add_io(elements)
    return kernel


def compare_body(device: str, elements: int) -> dict[str, Any]:
    return {
        "ref_kernel": torch_kernel(reference_source(elements)),
        "custom_kernel": candidate(elements),
        "num_correct_trials": 1,
        "timing": TIMING,
        "device": device,
    }


@dataclass
class Window:
    """What the clients of one run completed: (start, latency) per answer, seconds."""

    seconds: float
    answers: list[tuple[float, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, started: float, latency: float) -> None:
        with self.lock:
            self.answers.append((started, latency))

    def summary(self, clients: int) -> dict[str, Any]:
        latencies = [lat for _, lat in self.answers]
        row: dict[str, Any] = {
            "clients": clients,
            "answers": len(latencies),
            "per_s": len(latencies) / self.seconds,
        }
        if latencies:
            for name, q in (("p50_s", 0.5), ("p95_s", 0.95), ("p99_s", 0.99)):
                row[name] = percentile(latencies, q)
        return row


def run_clients(clients: int, seconds: float, one: Any) -> Window:
    """`clients` threads, each calling `one()` back to back until `seconds` have passed; only
    answers to calls started inside the window count (a call in flight at its end finishes
    first, and the rate is over the time until the last one ended)."""
    start = time.perf_counter()
    deadline = start + seconds
    window = Window(seconds)

    def client() -> None:
        while (t0 := time.perf_counter()) < deadline:
            one()
            window.add(t0 - start, time.perf_counter() - t0)

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(client) for _ in range(clients)]:
            f.result()  # an incorrect answer raises here and ends the run
    window.seconds = time.perf_counter() - start
    return window


def kforge_rows(args: argparse.Namespace, device: str) -> list[dict[str, Any]]:
    flag = "--warm-children-cpu" if device == "cpu" else "--warm-children"
    extra = [flag, str(args.warm_children), "--jobs-per-judge", str(args.jobs_per_judge)]
    srv = KforgeServer(devices=device, extra_args=extra).start()
    rows = []
    try:
        srv.wait_ready(device)
        body = compare_body(device, args.elements)
        local = threading.local()

        def one() -> None:
            if not hasattr(local, "client"):
                local.client = srv.client()
            r = local.client.post("/compare", json=body)
            assert r.status_code == 200, r.text
            res = r.json()["kernel_exec_result"]
            assert res["correctness"], res

        one()  # compiles and caches the kernel, as a loop's first submission does
        for n in args.clients:
            rows.append(run_clients(n, args.seconds, one).summary(n))
            print(f"kforge      {describe(rows[-1])}", flush=True)
    finally:
        srv.stop()
    return rows


def baseline_rows(args: argparse.Namespace, device: str) -> list[dict[str, Any]]:
    """The same compare, one fresh Python process per evaluation."""
    spec = baseline_spec(
        device, candidate(args.elements), torch_kernel(reference_source(args.elements))
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))

        def one() -> None:
            out = subprocess.run(
                [args.python, "-m", "kforge_worker", "run-job", str(spec_path)],
                check=False, capture_output=True, text=True, env=env, timeout=900,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr[-3000:]
            assert json.loads(out.stdout)["correctness"], out.stdout[-3000:]

        one()  # fills Triton's cache, like kforge's first job
        for n in args.clients:
            rows.append(run_clients(n, args.baseline_seconds, one).summary(n))
            print(f"fresh proc  {describe(rows[-1])}", flush=True)
    return rows


def describe(row: dict[str, Any]) -> str:
    text = f"{row['clients']:3d} clients: {row['answers']:5d} answers, {row['per_s']:7.2f}/s"
    if "p50_s" in row:
        text += f", p50 {row['p50_s']:.3f} s, p95 {row['p95_s']:.3f} s, p99 {row['p99_s']:.3f} s"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default=None)
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--baseline-seconds", type=float, default=60.0,
                        help="per client count; 0 skips the fresh-process baseline")  # fmt: skip
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--warm-children", type=int, default=3)
    parser.add_argument("--jobs-per-judge", type=int, default=8,
                        help="the server's --jobs-per-judge (1: a judge per job)")  # fmt: skip
    parser.add_argument("--python", default=os.environ.get("KFORGE_PYTHON", sys.executable))
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    try:
        args.clients = [int(n) for n in args.clients.split(",")]
        assert all(n >= 1 for n in args.clients)
    except (ValueError, AssertionError):
        parser.error(f"--clients: a comma list of positive counts, not {args.clients!r}")
    device = args.device or default_device()

    kforge = kforge_rows(args, device)
    baseline = baseline_rows(args, device) if args.baseline_seconds > 0 else []
    print(
        f"\nsmall compares, device {device}: Triton add of {args.elements} elements vs torch, "
        f"1 correctness trial, 20 ms budget, {args.warm_children} warm children"
    )
    print(f"{'':12s} {'clients':>7s} {'evals/s':>8s} {'p50 s':>7s} {'p95 s':>7s} {'p99 s':>7s}")
    for name, rows in (("kforge", kforge), ("fresh proc", baseline)):
        for row in rows:
            print(f"{name:12s} {row['clients']:7d} {row['per_s']:8.2f} "
                  f"{row.get('p50_s', float('nan')):7.3f} {row.get('p95_s', float('nan')):7.3f} "
                  f"{row.get('p99_s', float('nan')):7.3f}")  # fmt: skip
    for k, b in zip(kforge, baseline, strict=False):
        if b["per_s"] > 0:
            print(f"throughput ratio kforge / fresh process, {k['clients']} clients: "
                  f"{k['per_s'] / b['per_s']:.1f}x")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"device": device, "elements": args.elements, "warm_children": args.warm_children,
             "kforge": kforge, "baseline": baseline}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
