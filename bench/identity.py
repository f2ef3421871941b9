"""Identical kernels must read 1.00 (issue 31): the same source as reference and candidate
through the real server's POST /compare, for a float32 vector add of 2^12 ... 2^26
elements, as `torch`, `triton` and `cuda` kernels; several evaluations per size.

    python bench/identity.py [--kinds torch,triton,cuda] [--sizes 12,16,20,24,26]
        [--evals 5] [--trials N] [--device cuda:0] [--out DIR]

Prints, per kind and size, the speedups' min / median / max, the share within 1.00 +- 0.03,
how many read `indistinguishable` and had a `speedup_ci` covering 1, the reported medians (us)
of both sides and the judge's view of the candidate (its clock, judge/judged.py); a table last,
`identity: X/Y within 1.00 +- 0.03, Z/Y indistinguishable, W/Y intervals cover 1` on the last
line. On the cpu device (`--device cpu --kinds torch,triton`) the target is the verdict.
KFORGE_BIN names the server binary (default build/gpu/kforge).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

import fidelity_kernels as FK  # noqa: E402

from integration.kforge_server import KforgeServer  # noqa: E402

TOLERANCE = 0.03


def body(kind: str, n: int, trials: int | None) -> dict[str, Any]:
    kernel = FK.vector_add(kind, n)
    out: dict[str, Any] = {
        "ref_kernel": kernel,
        "custom_kernel": kernel,
        "num_correct_trials": 1,
    }
    if trials is not None:
        out["num_trials"] = trials
    return out


def _judge_window_speedup(res: dict[str, Any]) -> tuple[float | None, list[float]]:
    """The speedup of both sides' event medians less the reference's (the judge's) empty
    window, and [candidate's, reference's] windows in us; (None, []) where not reported."""
    cand, ref = res.get("runtime_stats") or {}, res.get("ref_runtime_stats") or {}
    try:
        cw, rw = float(cand["window_overhead_us"]), float(ref["window_overhead_us"])
        c_ev, r_ev = float(cand["event_median"]) * 1e3, float(ref["event_median"]) * 1e3
    except (KeyError, TypeError, ValueError):
        return None, []
    floor = 0.5  # us: the statistics' floor (stats.EVENT_RESOLUTION_MS)
    return max(floor, r_ev - rw) / max(floor, c_ev - rw), [cw, rw]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kinds", default="torch,triton,cuda")
    ap.add_argument("--sizes", default="12,16,20,24,26")
    ap.add_argument("--evals", type=int, default=5)
    ap.add_argument("--trials", type=int, default=None, help="num_trials (default: server's)")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", default="")
    ap.add_argument("--dump", action="store_true", help="every result into OUT/results.jsonl")
    args = ap.parse_args()
    dump = open(Path(args.out, "results.jsonl"), "w") if args.dump and args.out else None  # noqa: SIM115
    server = KforgeServer(devices=args.device).start()
    rows: list[dict[str, Any]] = []
    try:
        server.wait_ready(args.device)
        with server.client() as c:
            for kind in args.kinds.split(","):
                for size in (int(s) for s in args.sizes.split(",")):
                    speedups, meds, refs, views, olds, wins = [], [], [], [], [], []
                    tied = covers = 0
                    for _ in range(args.evals):
                        r = c.post("/compare", json=body(kind, 1 << size, args.trials))
                        res = r.json().get("kernel_exec_result", {}) if r.status_code == 200 else {}
                        if dump is not None:
                            line = {"kind": kind, "log2": size, "result": res}
                            dump.write(json.dumps(line) + "\n")
                        sp = res.get("speedup")
                        if sp is not None:
                            speedups.append(sp)
                            tied += res.get("speedup_verdict") == "indistinguishable"
                            ci = res.get("speedup_ci") or [float("inf"), 0.0]
                            covers += ci[0] <= 1.0 <= ci[1]
                            meds.append(res["runtime_stats"]["median"] * 1e3)
                            refs.append(res["ref_runtime_stats"]["median"] * 1e3)
                            clock = (res.get("metadata") or {}).get("judge_clock") or {}
                            if "judged_median_ms" in clock:
                                views.append(clock["judged_median_ms"] * 1e3)
                            old, windows = _judge_window_speedup(res)
                            if old is not None:
                                olds.append(old)
                                wins.append(windows)
                        else:
                            err = res.get("runtime_error") or res.get("validation_error") or r.text
                            print(f"{kind} 2^{size}: no speedup: {str(err)[:300]}", flush=True)
                    within = sum(abs(s - 1.0) <= TOLERANCE for s in speedups)
                    row = {
                        "kind": kind,
                        "log2": size,
                        "speedups": speedups,
                        "within": within,
                        "indistinguishable": tied,
                        "ci_covers_1": covers,
                        "evals": args.evals,
                        "median_us": statistics.median(meds) if meds else None,
                        "ref_median_us": statistics.median(refs) if refs else None,
                        "judge_view_us": statistics.median(views) if views else None,
                        # The speedup had the judge's empty window come off both sides (the
                        # method before each side's own window), and the windows (us).
                        "judge_window_speedups": olds,
                        "windows_us": wins,
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        server.stop()
    if args.out:
        Path(args.out, "identity.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'kind':<8}{'size':>6}{'min':>8}{'median':>8}{'max':>8}{'within':>8}{'tied':>7}"
          f"{'covers':>8}{'cand us':>10}{'ref us':>10}{'judge us':>10}{'jw med':>8}"
          f"{'win c/r us':>12}")  # fmt: skip
    total = within = tied_all = covers_all = within_old = 0
    for r in rows:
        s = r["speedups"] or [float("nan")]
        total += r["evals"]
        within += r["within"]
        tied_all += r["indistinguishable"]
        covers_all += r["ci_covers_1"]
        within_old += sum(abs(v - 1.0) <= TOLERANCE for v in r["judge_window_speedups"])

        jw = r["judge_window_speedups"]
        jw_med = statistics.median(jw) if jw else float("nan")
        cw = [w[0] for w in r["windows_us"]]
        rw = [w[1] for w in r["windows_us"]]
        wins = f"{statistics.median(cw):.2f}/{statistics.median(rw):.2f}" if cw else "-"

        def us(v: float | None) -> str:
            return f"{v:10.2f}" if v is not None else f"{'-':>10}"

        print(
            f"{r['kind']:<8}{'2^' + str(r['log2']):>6}{min(s):8.3f}{statistics.median(s):8.3f}"
            f"{max(s):8.3f}{r['within']:>5}/{r['evals']:<2}{r['indistinguishable']:>5}/"
            f"{r['evals']:<2}{r['ci_covers_1']:>5}/{r['evals']:<2}{us(r['median_us'])}"
            f"{us(r['ref_median_us'])}{us(r['judge_view_us'])}{jw_med:8.3f}{wins:>12}"
        )
    print(
        f"identity: {within}/{total} within 1.00 +- {TOLERANCE}, {tied_all}/{total} "
        f"indistinguishable, {covers_all}/{total} intervals cover 1 ({within_old} within "
        "with the judge's empty window off both sides)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
