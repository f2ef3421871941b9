"""KernelBench throughput: level 1 and 2 problems (torch vs torch) through kforge, and
through one fresh Python process per problem (the way KernelBench's users run its
evaluation), on the same device in the same run; prints a table.

    python bench/kernelbench_throughput.py --problems DIR [--levels 1,2] [--limit N]
        [--device cuda:0] [--kernelbench-dir KB] [--baseline-limit N] [--out FILE]

DIR holds KernelBench's problem files (`DIR/level1/*.py`, `DIR/level2/*.py`: the
`KernelBench/` folder of a ScalingIntelligence/KernelBench checkout). They are public but
not ours: never commit them. Each problem is its own reference and, as `ModelNew = Model`,
its own candidate, so every problem must come out correct with a speedup near 1.

kforge: every problem is POSTed to /compare of a `kforge serve` this script starts (or
--server URL), --in-flight at a time (the server queues them), with --correct-trials
correctness trials and at most --perf-trials timed trials. The wall time is from the first
submission to the last result.

Baseline: one process per problem, sequentially, each `python bench/kernelbench_process.py`
(KernelBench's own eval_kernel_against_ref with --kernelbench-dir, else that file's builtin
harness of the same protocol; `--baseline none` skips it). --baseline-limit evaluates only N
problems of each level, evenly spaced, that way and extrapolates the level's time from their
mean (the table says so). A run that does not fit one sitting is split: a level per run, the
baseline alone with `--kforge none`, each with --out, then `--merge FILE...` prints the table.

Runs on cpu too (`--device cpu`, a few small problems): that is how the script is tested.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.kforge_server import KforgeServer  # noqa: E402

# Appended to a problem to make it its own candidate (KernelBench loads `ModelNew`).
AS_CANDIDATE = "\n\nModelNew = Model\n"


@dataclass
class Problem:
    level: str  # "1", "2", ... (the folder's number)
    name: str  # file stem, e.g. "19_ReLU"
    path: Path

    @property
    def source(self) -> str:
        return self.path.read_text()


@dataclass
class Outcome:
    problem: str
    level: str
    wall_s: float
    compiled: bool = False
    correct: bool = False
    speedup: float | None = None
    runtime_ms: float | None = None
    phases_ms: dict[str, float] = field(default_factory=dict)
    inputs_device: str | None = None
    error: str | None = None
    timing_steps_ms: dict[str, float] = field(default_factory=dict)
    trials: dict[str, int] = field(default_factory=dict)
    stop_reasons: dict[str, str] = field(default_factory=dict)
    # Correct but its candidate not timed (no runtime_stats): why, from runtime_error. A
    # torch-vs-torch problem must be timed too; such a problem is not a pass.
    timing_error: str | None = None


def find_problems(
    root: Path, levels: list[str], limit: int | None, only: str | None = None
) -> list[Problem]:
    problems: list[Problem] = []
    for level in levels:
        folder = root / f"level{level}"
        if not folder.is_dir():
            raise SystemExit(
                f"--problems: {folder} does not exist (expected DIR/level{level}/*.py)"
            )
        files = sorted(folder.glob("*.py"), key=lambda p: (_number(p.stem), p.stem))
        if only:
            files = [f for f in files if re.search(only, f.stem)]
        problems += [Problem(level, f.stem, f) for f in files[:limit]]
    if not problems:
        raise SystemExit(f"--problems: no problem files under {root}")
    return problems


def _number(stem: str) -> int:
    head = stem.split("_", 1)[0]
    return int(head) if head.isdigit() else 1 << 30


def compare_body(problem: Problem, args: argparse.Namespace) -> dict[str, Any]:
    source = problem.source
    return {
        "ref_kernel": {"source_code": source, "kernel_type": "torch"},
        "custom_kernel": {"source_code": source + AS_CANDIDATE, "kernel_type": "torch"},
        "num_correct_trials": args.correct_trials,
        "timing": {"max_trials": args.perf_trials, "budget_ms": args.budget_ms},
        "device": args.device,
        "timeout": args.job_timeout_s,
    }


def run_kforge_one(client: Any, problem: Problem, args: argparse.Namespace) -> Outcome:
    t0 = time.perf_counter()
    r = client.post("/compare", json=compare_body(problem, args))
    wall = time.perf_counter() - t0
    out = Outcome(problem.name, problem.level, wall)
    if r.status_code != 200:
        out.error = f"HTTP {r.status_code}: {r.text[:300]}"
        return out
    res = r.json().get("kernel_exec_result") or {}
    out.compiled = bool(res.get("compiled"))
    out.correct = bool(res.get("correctness"))
    out.speedup = res.get("speedup")
    stats = res.get("runtime_stats") or {}
    out.runtime_ms = stats.get("median")
    out.phases_ms = res.get("phases_ms") or {}
    out.inputs_device = (res.get("metadata") or {}).get("get_inputs_device")
    out.timing_steps_ms = (res.get("metadata") or {}).get("timing_steps_ms") or {}
    for side, side_stats in (("candidate", stats), ("reference", res.get("ref_runtime_stats"))):
        if isinstance(side_stats, dict) and isinstance(side_stats.get("trials"), int):
            out.trials[side] = side_stats["trials"]  # timed trials, and why they stopped
            out.stop_reasons[side] = str(side_stats.get("stop_reason") or "")
    if out.correct and not stats:
        why = str(res.get("runtime_error") or "no runtime_stats")
        # Where it failed (the first line) and the error itself (the end).
        out.timing_error = why if len(why) <= 800 else f"{why[:200]} [...] {why[-600:]}"
    if not out.correct:
        out.error = (
            res.get("compilation_error")
            or res.get("runtime_error")
            or res.get("validation_error")
            or str(r.json().get("error") or r.json().get("status"))
        )[-600:]  # a traceback's end says what failed
    return out


def run_kforge(problems: list[Problem], args: argparse.Namespace) -> tuple[list[Outcome], float]:
    srv = None
    url = args.server
    if url is None:
        extra = ["--max-queued-jobs", str(max(1000, len(problems) * 2))]
        if args.device != "cpu":  # the cpu device runs one job at a time
            extra += ["--pipeline-depth", str(args.pipeline_depth)]
        srv = KforgeServer(devices=args.device, extra_args=extra, log_level="info").start()
        srv.wait_ready(args.device)
        url = srv.url
    try:
        import httpx

        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        with httpx.Client(base_url=url, timeout=args.job_timeout_s + 600, headers=headers) as c:
            started = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(args.in_flight) as pool:
                futures = [pool.submit(run_kforge_one, c, p, args) for p in problems]
                outcomes = []
                for f in futures:
                    outcomes.append(f.result())
                    _progress("kforge", outcomes[-1], len(outcomes), len(problems))
            total = time.perf_counter() - started
        return outcomes, total
    finally:
        if srv is not None:
            srv.stop()


def run_baseline_one(problem: Problem, args: argparse.Namespace, tmp: Path) -> Outcome:
    custom = tmp / f"{problem.level}_{problem.name}_new.py"
    custom.write_text(problem.source + AS_CANDIDATE)
    cmd = [
        args.python,
        str(REPO / "bench" / "kernelbench_process.py"),
        "--ref", str(problem.path),
        "--custom", str(custom),
        "--device", args.device,
        "--correct-trials", str(args.correct_trials),
        "--perf-trials", str(args.perf_trials),
        "--build-dir", str(tmp / "build"),
    ]  # fmt: skip
    if args.kernelbench_dir:
        cmd += ["--kernelbench-dir", args.kernelbench_dir]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=args.job_timeout_s + 300
        )
    except subprocess.TimeoutExpired:
        return Outcome(problem.name, problem.level, time.perf_counter() - t0, error="timeout")
    out = Outcome(problem.name, problem.level, time.perf_counter() - t0)
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    try:
        reply = json.loads(last[0]) if last else {}
    except json.JSONDecodeError:
        reply = {}
    if not reply:
        out.error = f"exit {proc.returncode}: {proc.stderr[-300:]}"
        return out
    out.compiled = bool(reply.get("compiled"))
    out.correct = bool(reply.get("correctness"))
    out.runtime_ms = reply.get("runtime_ms")
    out.error = (reply.get("error") or None) and str(reply.get("error"))[:300]
    return out


def run_baseline(
    problems: list[Problem], args: argparse.Namespace
) -> tuple[list[Outcome], dict[str, float]]:
    """Outcomes of the problems run, and each level's time (measured, or extrapolated)."""
    by_level: dict[str, list[Problem]] = {}
    for p in problems:
        by_level.setdefault(p.level, []).append(p)
    outcomes: list[Outcome] = []
    level_s: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kb-baseline-") as tmp:
        for level, items in by_level.items():
            chosen = spread(items, args.baseline_limit) if args.baseline_limit else items
            done = []
            for i, p in enumerate(chosen):
                done.append(run_baseline_one(p, args, Path(tmp)))
                _progress("baseline", done[-1], i + 1, len(chosen))
            outcomes += done
            walls = [o.wall_s for o in done]
            level_s[level] = statistics.mean(walls) * len(items) if walls else 0.0
    return outcomes, level_s


def spread(items: list[Problem], n: int) -> list[Problem]:
    """`n` of `items` evenly spaced from the first (all of them if there are no more): a
    level's problems grow and change kind along its numbering, so its first few are no sample."""
    if n >= len(items):
        return items
    return [items[i * len(items) // n] for i in range(n)]


def _progress(who: str, o: Outcome, n: int, total: int) -> None:
    verdict = "ok" if o.correct else f"FAIL {o.error or ''}"
    print(f"[{who} {n}/{total}] level{o.level} {o.problem}: {o.wall_s:.2f} s {verdict}",
          file=sys.stderr, flush=True)  # fmt: skip


def table(
    kforge: list[Outcome],
    kforge_total_s: float,
    baseline: list[Outcome],
    baseline_level_s: dict[str, float],
    args: argparse.Namespace,
    level_problems: dict[str, int],
) -> str:
    lines = [
        f"KernelBench torch-vs-torch throughput, device {args.device}, "
        f"{args.correct_trials} correctness trials, <= {args.perf_trials} timed trials, "
        f"pipeline depth {args.pipeline_depth}",
        f"{'':34s} {'problems':>8s} {'correct':>8s} {'wall s':>9s} {'problems/h':>11s}",
    ]
    levels = sorted({o.level for o in kforge})
    for level in levels:
        mine = [o for o in kforge if o.level == level]
        busy = sum(o.wall_s for o in mine)
        lines.append(_row(f"kforge level {level} (job latency sum)", mine, busy))
    lines.append(_row("kforge all (first submit->last)", kforge, kforge_total_s))
    if baseline:
        for level in levels:
            mine = [o for o in baseline if o.level == level]
            total_in_level = level_problems.get(level, len(mine))
            label = f"process/problem level {level}"
            if len(mine) < total_in_level:
                label += f" ({len(mine)} run, extrapolated)"
            lines.append(_row(label, mine, baseline_level_s.get(level, 0.0), total_in_level))
        base_total = sum(baseline_level_s.get(level, 0.0) for level in levels)
        lines.append(_row("process/problem all", baseline, base_total, len(kforge)))
        if kforge_total_s > 0:
            lines.append(f"{'throughput kforge / process-per-problem':34s} "
                         f"{base_total / kforge_total_s:>40.1f}x")  # fmt: skip
    speedups = [o.speedup for o in kforge if o.correct and o.speedup]
    if speedups:
        lines.append(f"kforge speedups (should be ~1): median {statistics.median(speedups):.3f}, "
                     f"min {min(speedups):.3f}, max {max(speedups):.3f}")  # fmt: skip
    for label, parts in (
        ("kforge phases_ms summed over problems", [o.phases_ms for o in kforge]),
        ("kforge timing phase's steps summed", [o.timing_steps_ms for o in kforge]),
    ):
        summed: dict[str, float] = {}
        for part in parts:
            for k, v in part.items():
                summed[k] = summed.get(k, 0.0) + v
        if summed:
            lines.append(
                f"{label} (s): " + ", ".join(f"{k} {v / 1e3:.1f}" for k, v in summed.items())
            )
    for side in ("candidate", "reference"):
        counts = [o.trials[side] for o in kforge if side in o.trials]
        if counts:
            stops = collections.Counter(
                o.stop_reasons.get(side, "") for o in kforge if side in o.trials
            )
            lines.append(f"{side} timed trials per problem: median {statistics.median(counts):g}, "
                         f"max {max(counts)}; stopped by " + ", ".join(
                             f"{k or '?'} {v}" for k, v in stops.most_common()))  # fmt: skip
    fallbacks = [o.problem for o in kforge if o.inputs_device == "cpu" and args.device != "cpu"]
    if fallbacks:
        lines.append(f"inputs made on the cpu (device path failed): {', '.join(fallbacks)}")
    slow = sorted(kforge, key=lambda o: -o.wall_s)[:5]
    lines.append("slowest kforge jobs: " + ", ".join(f"{o.problem} {o.wall_s:.1f} s" for o in slow))
    failed = [o for o in kforge if not o.correct]
    for o in failed:
        lines.append(f"kforge FAILED level{o.level} {o.problem}: {o.error}")
    untimed = [o for o in kforge if o.correct and o.timing_error]
    if untimed:
        lines.append(f"kforge correct but NOT TIMED: {len(untimed)} of {len(kforge)}")
    for o in untimed:
        why = " | ".join(line.strip() for line in o.timing_error.splitlines()[-3:])
        lines.append(f"kforge NOT TIMED level{o.level} {o.problem}: {why}")
    for o in baseline:
        if not o.correct:
            lines.append(f"baseline FAILED level{o.level} {o.problem}: {o.error}")
    return "\n".join(lines)


def _row(label: str, outcomes: list[Outcome], wall_s: float, count: int | None = None) -> str:
    n = count if count is not None else len(outcomes)
    correct = sum(o.correct for o in outcomes)
    rate = n / wall_s * 3600 if wall_s > 0 else 0.0
    return f"{label:34s} {n:8d} {correct:8d} {wall_s:9.1f} {rate:11.0f}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--problems", type=Path, help="DIR with level1/, level2/")
    p.add_argument(
        "--kforge",
        choices=["run", "none"],
        default="run",
        help="none: run only the baseline (its --out file is --merge'd later)",
    )
    p.add_argument("--merge", nargs="+", type=Path, default=None, metavar="FILE",
                   help="print one table from earlier --out files instead of running")  # fmt: skip
    p.add_argument("--levels", default="1,2")
    p.add_argument("--limit", type=int, default=None, help="first N problems of each level")
    p.add_argument("--only", default=None, help="problems whose name matches this regex")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--correct-trials", type=int, default=5)
    p.add_argument("--perf-trials", type=int, default=100)
    p.add_argument("--budget-ms", type=float, default=2000.0, help="kforge's timing budget")
    p.add_argument("--job-timeout-s", type=float, default=600.0)
    p.add_argument("--in-flight", type=int, default=8, help="kforge requests in flight")
    p.add_argument("--pipeline-depth", type=int, default=1,
                   help="the server's --pipeline-depth: jobs of the GPU in flight at once "
                        "(a level-1 job holds tens of GB of device memory: at 2, two of 200 "
                        "ran out of memory on an H200)")  # fmt: skip
    p.add_argument("--server", default=None, help="a running kforge serve (else one is started)")
    p.add_argument("--token", default=os.environ.get("KFORGE_TOKEN"))
    p.add_argument("--baseline", choices=["process", "none"], default="process")
    p.add_argument("--baseline-limit", type=int, default=None,
                   help="run N problems of each level, evenly spaced, and extrapolate")  # fmt: skip
    p.add_argument("--kernelbench-dir", default=None, help="KernelBench checkout (its eval)")
    p.add_argument("--python", default=os.environ.get("KFORGE_PYTHON", sys.executable))
    p.add_argument("--out", type=Path, default=None, help="raw outcomes as JSON")
    args = p.parse_args(argv)
    if args.merge:
        return args
    if args.problems is None:
        p.error("--problems is required (unless --merge)")
    if not args.problems.is_dir():
        p.error(f"--problems: {args.problems} is not a directory")
    if args.kernelbench_dir and not Path(args.kernelbench_dir).is_dir():
        p.error(f"--kernelbench-dir: {args.kernelbench_dir} is not a directory")
    for name in ("correct_trials", "perf_trials", "in_flight", "pipeline_depth"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        return merge(args)
    levels = [x.strip() for x in args.levels.split(",") if x.strip()]
    problems = find_problems(args.problems, levels, args.limit, args.only)
    level_problems = {level: sum(p.level == level for p in problems) for level in levels}
    kforge: list[Outcome] = []
    kforge_total = 0.0
    if args.kforge != "none":
        kforge, kforge_total = run_kforge(problems, args)
        # Written before the baseline starts, which may run long: a cut call keeps this.
        print(table(kforge, kforge_total, [], {}, args, level_problems), flush=True)
        save(args, kforge, kforge_total, [], {}, level_problems)
    baseline: list[Outcome] = []
    baseline_level_s: dict[str, float] = {}
    if args.baseline != "none":
        baseline, baseline_level_s = run_baseline(problems, args)
        if kforge:
            print(table(kforge, kforge_total, baseline, baseline_level_s, args, level_problems))
        save(args, kforge, kforge_total, baseline, baseline_level_s, level_problems)
    return 0 if all(o.correct and not o.timing_error for o in kforge) else 1


def save(
    args: argparse.Namespace,
    kforge: list[Outcome],
    kforge_total_s: float,
    baseline: list[Outcome],
    baseline_level_s: dict[str, float],
    level_problems: dict[str, int],
) -> None:
    if args.out:
        args.out.write_text(json.dumps({
            "device": args.device,
            "kforge_total_s": kforge_total_s,
            "baseline_level_s": baseline_level_s,
            "level_problems": level_problems,
            "pipeline_depth": args.pipeline_depth,
            "harness": "kernelbench" if args.kernelbench_dir else "builtin",
            "kforge": [asdict(o) for o in kforge],
            "baseline": [asdict(o) for o in baseline],
        }, indent=2))  # fmt: skip


def _outcome(saved: dict[str, Any]) -> Outcome:
    """An Outcome from an --out file; a file from before `timing_error` was kept still
    shows a correct problem with no candidate trials as not timed."""
    out = Outcome(**saved)
    if "timing_error" not in saved and out.correct and "candidate" not in out.trials:
        out.timing_error = "no candidate timing (this file does not keep why)"
    return out


def merge(args: argparse.Namespace) -> int:
    """One table from the --out files of runs made one after another on one device (a level
    per run, the baseline in a run of its own): their kforge outcomes and wall times add up,
    each level's baseline time comes from the run that measured it."""
    kforge: list[Outcome] = []
    baseline: list[Outcome] = []
    kforge_total, baseline_level_s, level_problems = 0.0, {}, {}
    devices, harnesses, depths = set(), set(), set()
    for path in args.merge:
        try:
            run = json.loads(path.read_text())
            kforge += [_outcome(o) for o in run["kforge"]]
            baseline += [Outcome(**o) for o in run["baseline"]]
            kforge_total += float(run["kforge_total_s"])
            baseline_level_s.update(run["baseline_level_s"])
            level_problems.update(run["level_problems"])
            devices.add(run["device"])
            if run["kforge"]:
                depths.add(str(run.get("pipeline_depth", 1)))
            if run["baseline"]:
                harnesses.add(run["harness"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"--merge: {path} is not a --out file of this bench: {e}") from e
    if len(devices) > 1:
        raise SystemExit(f"--merge: the runs name different devices: {sorted(devices)}")
    args.device = devices.pop()
    args.pipeline_depth = "/".join(sorted(depths)) or "-"
    print(table(kforge, kforge_total, baseline, baseline_level_s, args, level_problems))
    print(f"baseline harness: {', '.join(sorted(harnesses)) or 'none'}; runs merged: "
          + ", ".join(str(p) for p in args.merge))  # fmt: skip
    return 0 if all(o.correct and not o.timing_error for o in kforge) else 1


if __name__ == "__main__":
    raise SystemExit(main())
