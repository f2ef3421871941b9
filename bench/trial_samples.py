"""Every timed trial of KernelBench problems run as their own candidates (`ModelNew = Model`,
so both sides should time alike), reference and candidate side by side.

Level 1's candidates needed a median of 21 timed trials to reach the rse target where their
references needed 3 (H100, docs/benchmarks.md). This prints each trial's event time, marks
the candidate's verified trials (outputs sent to the judge and compared before the next
trial) and the input set each trial ran on, so the slow trials can be seen instead of
guessed. It runs the job in this process as a worker child would (the candidate in its own
process), with the server's default timing options.

    python bench/trial_samples.py PROBLEM.py [PROBLEM.py ...] [--device cuda:0]
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import kforge_worker.timing as timing  # noqa: E402
from kforge_worker import wire  # noqa: E402
from kforge_worker.devinfo import parse_device  # noqa: E402
from kforge_worker.evaluate import TIMING_INPUT_SETS, run_job  # noqa: E402
from kforge_worker.spec import parse_job  # noqa: E402

DEFAULTS = json.loads((REPO / "tests" / "protocol" / "defaults.json").read_text())
AS_CANDIDATE = "\n\nModelNew = Model\n"


class Recorder:
    """What the judge sees of the timing: its own timed runs' events (the reference) and
    the candidate's `trial` messages, each marked verified when its outputs followed."""

    def __init__(self) -> None:
        self.local: list[list[float]] = []
        self.trials: list[dict[str, Any]] = []
        self._receive = wire.receive
        self._stats = timing.compute_stats

    def install(self) -> None:
        def receive(*args: Any, **kwargs: Any) -> Any:
            header, values = self._receive(*args, **kwargs)
            kind = header.get("type")
            if kind == "trial":
                self.trials.append({"index": header.get("index"), "ms": header.get("ms")})
            elif kind == "trial_outputs" and self.trials:
                self.trials[-1]["verified"] = True
            return header, values

        def compute_stats(events: list[float], *args: Any, **kwargs: Any) -> Any:
            self.local.append(list(events))
            return self._stats(events, *args, **kwargs)

        wire.receive = receive
        timing.compute_stats = compute_stats


def job_for(problem: Path, device: str, tmp: Path) -> dict[str, Any]:
    source = problem.read_text()
    return {
        "job_id": f"trial-samples-{problem.stem}",
        "kind": "compare",
        "kernel": {"source_code": source + AS_CANDIDATE, "kernel_type": "torch"},
        "reference": {"source_code": source, "kernel_type": "torch"},
        "num_correct_trials": DEFAULTS.get("num_correct_trials", 5),
        "measure_performance": True,
        "timing": dict(DEFAULTS["timing"]),
        "atol": None,
        "rtol": None,
        "seed": 1234567890123,
        "device": device,
        "timeout_s": 600.0,
        "scratch_dir": str(tmp / "scratch"),
        "cache_dir": str(tmp / "cache"),
    }


def describe(name: str, samples: list[float]) -> str:
    if not samples:
        return f"{name}: none"
    med = statistics.median(samples)
    spread = " ".join(f"{s / med:.3f}" for s in samples[:40])
    return f"{name}: {len(samples)} trials, median {med:.4f} ms; each / median: {spread}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    recorder = Recorder()
    recorder.install()
    rows = []
    for problem in args.problems:
        recorder.local.clear()
        recorder.trials.clear()
        with tempfile.TemporaryDirectory() as tmp:
            result = run_job(
                parse_job(job_for(problem, args.device, Path(tmp))), parse_device(args.device)
            ).to_dict()
        cand = [float(t["ms"]) for t in recorder.trials]
        verified = [t["index"] for t in recorder.trials if t.get("verified")]
        ref = recorder.local[0] if recorder.local else []
        sets = result.get("metadata", {}).get("timing_input_sets", TIMING_INPUT_SETS)
        print(f"== {problem.stem}: correct {result.get('correctness')}, input sets {sets}")
        for field in ("validation_error", "runtime_error", "warnings"):
            if result.get(field):
                print(f"{field}: {str(result[field])[:600]}")
        print(describe("reference", ref))
        print(describe("candidate", cand))
        print(f"candidate verified trials (0-based): {verified}")
        by_set = [[ms for i, ms in enumerate(cand) if i % sets == k] for k in range(sets)]
        for k, part in enumerate(by_set):
            if part:
                print(f"  set {k}: median {statistics.median(part):.4f} ms over {len(part)}")
        after = [cand[i + 1] for i in verified if i + 1 < len(cand)]
        if after:
            print(f"  trials right after a verified one: median {statistics.median(after):.4f} ms")
        rows.append(
            {
                "problem": problem.stem,
                "correct": result.get("correctness"),
                "reference_ms": ref,
                "candidate_ms": cand,
                "verified": verified,
                "input_sets": sets,
                "stop_reason": (result.get("runtime_stats") or {}).get("stop_reason"),
                "ref_stop_reason": (result.get("ref_runtime_stats") or {}).get("stop_reason"),
            }
        )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
