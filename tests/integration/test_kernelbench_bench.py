"""bench/kernelbench_throughput.py on the cpu with a few small problems of our own in the
KernelBench format (the real problems are not in the repository): kforge and the
process-per-problem baseline both judge every problem correct, and the table and the JSON
say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBLEMS = {
    "level1/1_Add.py": """
import torch

class Model(torch.nn.Module):
    def forward(self, a, b):
        return a + b

def get_inputs():
    return [torch.randn(64, 32), torch.randn(64, 32)]

def get_init_inputs():
    return []
""",
    "level1/19_ReLU.py": """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(16, 128)]

def get_init_inputs():
    return []
""",
    "level2/1_Linear_ReLU.py": """
import torch

class Model(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn(8, 32)]

def get_init_inputs():
    return [32, 16]
""",
}


def write_problems(root: Path) -> None:
    for name, source in PROBLEMS.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "kernelbench_throughput.py"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ.copy(),
    )


def test_bench_runs_on_cpu_and_every_problem_is_correct(tmp_path: Path) -> None:
    write_problems(tmp_path / "problems")
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--problems", str(tmp_path / "problems"),
        "--device", "cpu",
        "--correct-trials", "2",
        "--perf-trials", "5",
        "--budget-ms", "50",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    data = json.loads(out.read_text())
    assert [o["problem"] for o in data["kforge"]] == ["1_Add", "19_ReLU", "1_Linear_ReLU"]
    assert all(o["correct"] for o in data["kforge"]), data["kforge"]
    assert all(o["correct"] for o in data["baseline"]), data["baseline"]
    assert data["harness"] == "builtin"
    for o in data["kforge"]:
        assert {"import", "inputs", "reference", "candidate", "compare", "timing"} <= set(
            o["phases_ms"]
        ), o
        assert o["inputs_device"] == "cpu"
        assert o["speedup"] > 0, o  # its value is timing: not asserted
        assert o["timing_error"] is None, o
    text = proc.stdout
    assert "kforge all (first submit->last)" in text and "process/problem all" in text
    assert "throughput kforge / process-per-problem" in text
    assert "candidate timed trials per problem: median" in text
    assert "reference timed trials per problem: median" in text
    assert "FAILED" not in text and "NOT TIMED" not in text


def test_bench_splits_into_runs_extrapolates_a_baseline_sample_and_names_bad_flags(
    tmp_path: Path,
) -> None:
    # kforge alone, then the baseline alone on one problem of the two, then one table.
    write_problems(tmp_path / "problems")
    common = ["--problems", str(tmp_path / "problems"), "--levels", "1", "--device", "cpu",
              "--correct-trials", "1", "--perf-trials", "3", "--budget-ms", "20"]  # fmt: skip
    mine, base = tmp_path / "kforge.json", tmp_path / "baseline.json"
    proc = run_bench(*common, "--baseline", "none", "--out", str(mine))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "kforge all" in proc.stdout and "process/problem" not in proc.stdout
    proc = run_bench(*common, "--kforge", "none", "--baseline-limit", "1", "--out", str(base))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert [o["problem"] for o in json.loads(base.read_text())["baseline"]] == ["1_Add"]
    proc = run_bench("--merge", str(mine), str(base))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "process/problem level 1 (1 run, extrapolated)        2" in proc.stdout
    assert "throughput kforge / process-per-problem" in proc.stdout
    # A correct problem whose candidate was not timed is no pass: --merge finds one in a file
    # from before `timing_error` was kept (no candidate trials) and exits non-zero.
    older = json.loads(mine.read_text())
    for o in older["kforge"]:
        del o["timing_error"]
    del older["kforge"][0]["trials"]["candidate"]
    (tmp_path / "older.json").write_text(json.dumps(older))
    proc = run_bench("--merge", str(tmp_path / "older.json"))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-4000:]
    assert "kforge correct but NOT TIMED: 1 of 2" in proc.stdout
    assert "kforge NOT TIMED level1 1_Add: no candidate timing" in proc.stdout
    bad = run_bench("--merge", str(tmp_path / "problems" / "level1" / "1_Add.py"))
    assert bad.returncode != 0 and "is not a --out file" in bad.stderr
    bad = run_bench("--problems", str(tmp_path / "missing"), "--device", "cpu")
    assert bad.returncode == 2 and "--problems" in bad.stderr
    bad = run_bench("--problems", str(tmp_path / "problems"), "--perf-trials", "0")
    assert bad.returncode == 2 and "--perf-trials" in bad.stderr


FAKE_EVAL = """
from openai import OpenAI  # KernelBench's utils import its LLM clients
from litellm import completion
import fake_dependency  # found only in the checkout's pydeps/
from types import SimpleNamespace

def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num, device):
    assert callable(OpenAI) and fake_dependency.VALUE == 7
    try:
        completion(model="x")
    except RuntimeError as e:
        metadata = {"llm": str(e)}
    return SimpleNamespace(compiled=True, correctness=False, runtime=1.5, metadata=metadata)
"""


def test_the_baseline_imports_kernelbench_without_its_llm_clients(tmp_path: Path) -> None:
    # A GPU host for evaluation has no openai or litellm; KernelBench's eval imports them but
    # never calls them, and pure-Python dependencies may sit in the checkout's pydeps/.
    checkout = tmp_path / "kb"
    (checkout / "src" / "kernelbench").mkdir(parents=True)
    (checkout / "src" / "kernelbench" / "__init__.py").write_text("")
    (checkout / "src" / "kernelbench" / "eval.py").write_text(FAKE_EVAL)
    (checkout / "pydeps").mkdir()
    (checkout / "pydeps" / "fake_dependency.py").write_text("VALUE = 7\n")
    problem = tmp_path / "p.py"
    problem.write_text(PROBLEMS["level1/1_Add.py"])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "kernelbench_process.py"), "--ref", str(problem),
         "--custom", str(problem), "--device", "cpu", "--kernelbench-dir", str(checkout)],
        check=False, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["harness"] == "kernelbench" and out["compiled"] and out["runtime_ms"] == 1.5
    assert "litellm.completion: litellm is not installed" in out["error"], out


def test_the_runner_times_kforge_kernelbench_and_the_process_baseline_on_cpu(
    tmp_path: Path,
) -> None:
    # bench/kernelbench_runner.py: levels 1+2 torch vs torch through `kforge kernelbench`, then
    # the level-2 subset (here its one problem) against one process per sample.
    write_problems(tmp_path / "kb")
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "kernelbench_runner.py"),
         "--kb", str(tmp_path / "kb"), "--device", "cpu", "--correct-trials", "2",
         "--perf-trials", "5", "--out", str(out),
         "--hack-cases", "^(cached_output|mutate_inputs|lazy_subclass|honest_torch)$"],
        check=False, capture_output=True, text=True, timeout=900, env=os.environ.copy(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    figures = json.loads(out.read_text())
    summary = figures["torch_vs_torch"]["summary"]
    assert summary["samples"] == 3 and summary["correct"] == 3, summary
    assert summary["fast_p"]["fast_1"] == 0, summary  # identical kernels are not faster
    subset = figures["level2_subset"]
    assert subset["problems"] == "1" and subset["baseline_wall_s"] > 0 and subset["ratio"] > 0
    assert subset["kforge_again_wall_s"] > 0 and subset["ratio_again"] > 0, subset
    assert "| level 2 problems 1: kforge, again | 1 | 1 |" in proc.stdout
    assert "| levels 1,2, torch vs torch | 3 | 3 |" in proc.stdout
    # Where the samples' time went, from the jobs the engine stored: every sample's wall
    # in its worker, its phases and queueing.
    steps = figures["torch_vs_torch"]["steps"]
    assert steps["wall"]["n"] == 3 and steps["wall"]["median"] > 0, steps
    assert steps["queued"]["n"] == 3 and "phase timing" in steps, steps
    assert steps["wall"]["sum"] <= 1e3 * figures["torch_vs_torch"]["wall_s"] * 4, steps
    assert "where a sample's time went (levels 1,2; ms)" in proc.stdout
    assert figures["level2_subset"]["steps_again"]["wall"]["n"] == 1
    assert "process per sample (builtin harness) | 1 | 1 |" in proc.stdout
    hacks = figures["hacks"]  # the corpus's cases as a run: no exploit counted fast
    assert hacks["hacks"] == 3 and hacks["missed"] == [], hacks
    assert hacks["controls"] == 1 and hacks["controls_correct"] == 1, hacks
    assert "exploits counted fast_1: 0 (must be 0)" in proc.stdout
