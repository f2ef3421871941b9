"""`kforge kernelbench` on KernelBench's own problems: the issue's two GPU figures in one run.

    python bench/kernelbench_runner.py --kb KB [--device cuda:0] [--levels 1,2]
        [--l2-problems 1-12] [--baseline process|none] [--in-flight 4] [--pipeline-depth 1]
        [--parts all,l2,hacks] [--out FILE]

KB is a ScalingIntelligence/KernelBench checkout (its problems are public but not ours: never
commit them). Each problem is made its own candidate (`ModelNew = Model` appended) in a run
directory of KernelBench's layout, `level_<L>_problem_<P>_sample_0_kernel.py`, so every sample
must come out correct and, identical kernels not being faster, none `fast_1`.

1. torch-vs-torch: `kforge kernelbench --level 1,2` over every problem of --levels (one sample
   each), timed from start to exit; the table says samples, correct, fast_1 and the wall time.
2. --l2-problems of level 2 (default 1-12): `kforge kernelbench --level 2 --problems ...`,
   twice (first as it comes, then with the caches the first run filled, as a user's later
   runs find them), against KernelBench's protocol run the way eval_from_generations.py runs
   it on one GPU, a fresh process per sample one after another (bench/kernelbench_process.py with
   --kernelbench-dir: KernelBench's own eval_kernel_against_ref, 5 correctness trials, 100
   timed); both on the same device in the same call, and their ratio.

3. hacks: the adversarial corpus's KernelBench-style cases (tests/adversarial/corpus.py: honest
   controls and must-catch exploits, those of this device) as a run of our own, one problem
   per reference: no exploit may count as fast_1 (incorrect, flagged, or correct without
   gain where the judge's clock absorbed its lie), every control correct.

`--parts` runs only some (`all`: 1., `l2`: 2., `hacks`: 3.), to split the figures across
calls of a limited length. Runs on cpu too (`--device cpu`, a fake checkout of a few tiny problems):
that is how the script is tested. `--limit N` takes the first N problems of each level.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from kernelbench_throughput import (  # noqa: E402
    AS_CANDIDATE,
    Problem,
    find_problems,
    run_baseline_one,
)

from integration.kforge_server import kforge_binary  # noqa: E402


def dataset_root(kb: Path) -> Path:
    return kb / "KernelBench" if (kb / "KernelBench").is_dir() else kb


def problem_id(p: Problem) -> int:
    return int(p.name.split("_", 1)[0])


def make_run(problems: list[Problem], run: Path) -> None:
    """Each problem as its own sample 0, in KernelBench's run layout."""
    run.mkdir(parents=True, exist_ok=True)
    for p in problems:
        name = f"level_{p.level}_problem_{problem_id(p)}_sample_0_kernel.py"
        (run / name).write_text(p.source + AS_CANDIDATE)


def kforge_kernelbench(
    args: argparse.Namespace,
    run: Path,
    out: Path,
    levels: str,
    problems: str | None,
    samples: int | None = 1,
) -> dict[str, Any]:
    cmd = [
        str(kforge_binary()), "kernelbench", "--kb", str(args.kb), "--level", levels,
        "--run", str(run), "--out", str(out), "--rerun",
        "--device", args.device, "--in-flight", str(args.in_flight),
        "--baselines", str(out / "baselines.json"),
        "--correct-trials", str(args.correct_trials), "--num-trials", str(args.perf_trials),
        "--timeout", str(args.job_timeout_s),
    ]  # fmt: skip
    if problems:
        cmd += ["--problems", problems]
    if samples:
        cmd += ["--samples", str(samples)]
    if args.server:
        cmd += ["--server", args.server]
    else:
        # One data dir for the whole run: a later part finds the caches (Triton's, the
        # server's) an earlier one filled, as a user's second run does.
        cmd += ["--data-dir", str(args.data_dir), "--devices", args.device]
        cmd += ["--pipeline-depth", str(args.pipeline_depth)]
    env = dict(os.environ)
    if args.python:
        env["KFORGE_PYTHON"] = args.python
    t0 = time.perf_counter()
    # Its progress (a line per sample) goes to our stderr as it comes: a run cut short by a
    # time limit still says how far it got.
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kforge kernelbench exited {proc.returncode} (its stderr is above)")
    summary = json.loads((out / "kernelbench_summary.json").read_text())
    lines = (out / "kernelbench_samples.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    steps = {} if args.server else where_time_goes(args.data_dir, records)
    return {
        "wall_s": wall, "summary": summary["all"], "records": records, "table": proc.stdout,
        "steps": steps,
    }  # fmt: skip


def where_time_goes(data_dir: Path, records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Where a sample's time went, from the jobs the embedded engine stored (its kforge.db):
    per step, the median, the 90th percentile and the sum over the run's samples, in ms.
    Steps: queued (submitted -> started), take (a warm judge taken), device_wait (the
    device's admission), the worker's phases (phases_ms: import, inputs, reference, ...;
    timing's own steps as timing.*), teardown, wall (the job's whole time in its worker)."""
    ids = [r["job_id"] for r in records if r.get("job_id")]
    db = data_dir / "kforge.db"
    if not ids or not db.exists():
        return {}
    steps: dict[str, list[float]] = {}

    def add(name: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            steps.setdefault(name, []).append(float(value))

    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        marks = ",".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT created_ms, started_ms, result FROM jobs WHERE id IN ({marks})", ids
        ).fetchall()
    for created, started, text in rows:
        if started and created:
            add("queued", started - created)
        result = json.loads(text) if text else {}
        process = result.get("process") or {}
        for key in ("take_ms", "device_wait_ms", "teardown_ms", "wall_ms"):
            add(key.removesuffix("_ms"), process.get(key))
        for name, ms in (result.get("phases_ms") or {}).items():
            add(f"phase {name}", ms)
        timing_steps = (result.get("metadata") or {}).get("timing_steps_ms") or {}
        for name, ms in timing_steps.items():
            add(f"timing.{name}", ms)
    return {
        name: {
            "median": statistics.median(values),
            "p90": sorted(values)[min(len(values) - 1, int(0.9 * len(values)))],
            "sum": sum(values),
            "n": len(values),
        }
        for name, values in sorted(steps.items())
    }


def breakdown_lines(label: str, steps: dict[str, dict[str, float]]) -> list[str]:
    if not steps:
        return []
    out = [f"where a sample's time went ({label}; ms): step | median | p90 | sum | samples"]
    for name, v in steps.items():
        figures = f"{v['median']:10.1f} {v['p90']:10.1f} {v['sum']:12.1f} {v['n']:5.0f}"
        out.append(f"  {name:28s} {figures}")
    return out


def fast(record: dict[str, Any], p: float) -> bool:
    """kforge's fast_p for one record: correct, unflagged, the speedup's interval above p."""
    if not record["correct"] or record["flags"] or record["speedup"] is None:
        return False
    ci = record.get("speedup_ci")
    return record["speedup"] > p and (ci is None or ci[0] > p)


def hack_run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The corpus's ModelNew cases as a run: {hacks, controls, controls_correct, wall_s,
    missed: [exploits counted fast_1: must be empty], no_gain: [exploits correct and unflagged
    but not faster], controls_failed}."""
    from adversarial.corpus import CASES

    on_gpu = args.device != "cpu"
    by_ref: dict[str, list[Any]] = {}
    for case in CASES:
        if case.device != "any" and (case.device == "gpu") != on_gpu:
            continue
        if args.hack_cases and not re.search(args.hack_cases, case.name):
            continue
        candidate = case.body.get("custom_kernel", {})
        if "io" in candidate or "ModelNew" not in candidate.get("source_code", ""):
            continue  # not a KernelBench sample (a Triton launch with an IOContract)
        by_ref.setdefault(case.body["ref_kernel"]["source_code"], []).append(case)
    kb, run = tmp / "kb_hacks", tmp / "run_hacks"
    (kb / "level1").mkdir(parents=True)
    run.mkdir()
    cases: dict[tuple[int, int], Any] = {}
    for pid, (ref, items) in enumerate(by_ref.items(), 1):
        (kb / "level1" / f"{pid}_adversarial.py").write_text(ref)
        for sid, case in enumerate(items):
            source = case.body["custom_kernel"]["source_code"]
            (run / f"level_1_problem_{pid}_sample_{sid}_kernel.py").write_text(source)
            cases[(pid, sid)] = case
    mine = argparse.Namespace(**{**vars(args), "kb": kb})
    out = kforge_kernelbench(mine, run, tmp / "out_hacks", "1", None, samples=None)
    figures: dict[str, Any] = {"wall_s": out["wall_s"], "missed": [], "no_gain": []}
    figures["controls_failed"] = []
    hacks = controls = controls_correct = 0
    for r in out["records"]:
        case = cases[(r["problem_id"], r["sample_id"])]
        if case.kind == "must_catch":
            hacks += 1
            if fast(r, 1.0):
                figures["missed"].append(case.name)
            elif r["correct"] and not r["flags"]:
                figures["no_gain"].append(case.name)  # the judge's clock absorbed its lie
        else:
            controls += 1
            controls_correct += bool(r["correct"])
            if not r["correct"]:
                figures["controls_failed"].append(f"{case.name}: {r['reason']}")
    figures.update(hacks=hacks, controls=controls, controls_correct=controls_correct)
    return figures


def baseline(args: argparse.Namespace, problems: list[Problem], tmp: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    outcomes = []
    for i, p in enumerate(problems):
        o = run_baseline_one(p, args, tmp)
        outcomes.append(o)
        verdict = "correct" if o.correct else (o.error or "incorrect")
        print(f"  [baseline {i + 1}/{len(problems)}] {p.name}: {verdict}", file=sys.stderr)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "correct": sum(o.correct for o in outcomes), "total": len(outcomes)}


def row(label: str, samples: int, correct: int, fast_1: Any, wall_s: float, note: str) -> str:
    return f"| {label} | {samples} | {correct} | {fast_1} | {wall_s:.1f} | {note} |"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kb", type=Path, required=True, help="KernelBench checkout")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--levels", default="1,2")
    p.add_argument("--l2-problems", default="1-12")
    p.add_argument("--limit", type=int, default=None, help="first N problems of each level")
    p.add_argument("--baseline", choices=["process", "none"], default="process")
    p.add_argument("--in-flight", type=int, default=4, help="problems in flight")
    p.add_argument("--pipeline-depth", type=int, default=1, help="the engine's, per GPU")
    p.add_argument("--parts", default="all,l2,hacks", help="all, l2, hacks (see above)")
    p.add_argument("--hack-cases", default=None, help="only the corpus cases this regex finds")
    p.add_argument("--correct-trials", type=int, default=5)
    p.add_argument("--perf-trials", type=int, default=100)
    p.add_argument("--job-timeout-s", type=float, default=300.0)
    p.add_argument("--server", default=None, help="a running kforge serve (else embedded)")
    p.add_argument("--python", default=os.environ.get("KFORGE_PYTHON", sys.executable))
    p.add_argument("--out", type=Path, default=None, help="the figures as JSON")
    args = p.parse_args(argv)
    args.kernelbench_dir = str(args.kb) if (args.kb / "src" / "kernelbench").is_dir() else None
    root = dataset_root(args.kb)
    levels = [lv for lv in args.levels.split(",") if lv]
    low, _, high = args.l2_problems.partition("-")
    l2_ids = set(range(int(low), int(high or low) + 1))
    figures: dict[str, Any] = {"device": args.device}
    lines = [
        "| run | samples | correct | fast_1 | wall s | note |",
        "|---|---|---|---|---|---|",
    ]
    notes: list[str] = []  # printed after the table
    with tempfile.TemporaryDirectory(prefix="kb-runner-") as tmp_name:
        tmp = Path(tmp_name)
        args.data_dir = tmp / "data"
        parts = set(args.parts.split(","))
        if "all" in parts:
            everything = find_problems(root, levels, args.limit)
            make_run(everything, tmp / "run_all")
            all_run = kforge_kernelbench(args, tmp / "run_all", tmp / "out_all", args.levels, None)
            s = all_run["summary"]
            fast_1 = sum(
                1
                for r in all_run["records"]
                if r["correct"] and (r.get("speedup_ci") or [0])[0] > 1
            )
            figures["torch_vs_torch"] = {
                "wall_s": all_run["wall_s"], "summary": s, "steps": all_run["steps"],
            }  # fmt: skip
            notes += breakdown_lines(f"levels {args.levels}", all_run["steps"])
            lines.append(
                row(
                    f"levels {args.levels}, torch vs torch", s["samples"], s["correct"],
                    f"{s['fast_p']['fast_1']:.3f} ({fast_1})", all_run["wall_s"],
                    "target: all correct, fast_1 0, <= 120 s on one H200",
                )
            )  # fmt: skip
        l2_all = find_problems(root, ["2"], None) if "l2" in parts else []
        l2 = [q for q in l2_all if problem_id(q) in l2_ids]
        if l2:
            make_run(l2, tmp / "run_l2")
            ids = ",".join(str(problem_id(q)) for q in l2)
            # Twice: the first run as it comes (on a fresh host every cache is cold), then
            # again with the caches the first filled (its own baselines file: the reference
            # is timed again), as every later run of a user.
            runs = {
                "first run": kforge_kernelbench(args, tmp / "run_l2", tmp / "out_l2", "2", ids),
                "again": kforge_kernelbench(args, tmp / "run_l2", tmp / "out_l2b", "2", ids),
            }
            figures["level2_subset"] = {
                "problems": ids,
                "kforge_wall_s": runs["first run"]["wall_s"],
                "kforge_again_wall_s": runs["again"]["wall_s"],
                "steps": runs["first run"]["steps"],
                "steps_again": runs["again"]["steps"],
            }
            for name, k in runs.items():
                notes += breakdown_lines(f"level 2 problems {ids}, {name}", k["steps"])
            b = baseline(args, l2, tmp) if args.baseline == "process" else None
            for name, k in runs.items():
                ks = k["summary"]
                note = ""
                if b is not None:
                    ratio = b["wall_s"] / k["wall_s"] if k["wall_s"] > 0 else float("nan")
                    note = f"{ratio:.1f}x faster than a process per sample (target >= 10x)"
                    figures["level2_subset"]["ratio" if name == "first run" else "ratio_again"] = (
                        ratio
                    )
                lines.append(
                    row(f"level 2 problems {ids}: kforge, {name}", ks["samples"], ks["correct"],
                        f"{ks['fast_p']['fast_1']:.3f}", k["wall_s"], note)
                )  # fmt: skip
            if b is not None:
                figures["level2_subset"]["baseline_wall_s"] = b["wall_s"]
                harness = "KernelBench's eval" if args.kernelbench_dir else "builtin harness"
                label = f"level 2 problems {ids}: process per sample ({harness})"
                lines.append(row(label, b["total"], b["correct"], "-", b["wall_s"], ""))
        if "hacks" in parts:
            h = hack_run(args, tmp)
            figures["hacks"] = h
            note = (
                f"exploits counted fast_1: {len(h['missed'])} (must be 0) {' '.join(h['missed'])}; "
                f"correct but no gain: {len(h['no_gain'])}"
            )
            lines.append(
                row(f"adversarial corpus: {h['hacks']} exploits, {h['controls']} controls",
                    h["hacks"] + h["controls"], h["controls_correct"], "-", h["wall_s"], note)
            )  # fmt: skip
            for failed in h["controls_failed"]:
                lines.append(f"control not correct: {failed[:200]}")
    print("\n".join(lines + notes))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
