"""`kforge kernelbench` on a fake KernelBench checkout and run (problems written here, in its
layout): the run layout, the outputs' shapes, fast_p with honesty flags, resume by source hash,
missing and unreadable files as results, the baselines export, Ctrl-C, and the server mode."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from integration.kforge_server import KforgeServer, device_under_test, kforge_binary
from integration.mcp_support import RawMcp, call_result, worker_env

ADD = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(1 << 16), torch.randn(1 << 16)]


def get_init_inputs():
    return []
"""

SCALE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


def get_inputs():
    return [torch.randn(32, 8)]


def get_init_inputs():
    return [1.0]
"""

RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""


def new_model(
    forward: str, init: str = "def __init__(self, *args):\n        super().__init__()"
) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        f"    {init}\n\n    def forward(self, *xs):\n        {forward}\n"
    )


ADD_OK = new_model("return xs[0] + xs[1]")
ADD_WRONG = new_model("return xs[0] - xs[1]")
ADD_BROKEN = "import torch\nclass ModelNew(:\n    pass\n"
# Returns its input: as correct as x * 1.0, but the output aliases the input (an honesty flag).
SCALE_ALIAS = new_model("return xs[0]")
RELU_OK = new_model("return torch.relu(xs[0])")
SLOW = new_model("import time; time.sleep(600); return xs[0]")


def fake_checkout(root: Path) -> Path:
    """KernelBench/level1 and level2 with our own tiny problems."""
    (root / "KernelBench" / "level1").mkdir(parents=True)
    (root / "KernelBench" / "level2").mkdir(parents=True)
    (root / "KernelBench" / "level1" / "1_Add.py").write_text(ADD)
    (root / "KernelBench" / "level1" / "2_Scale.py").write_text(SCALE)
    (root / "KernelBench" / "level2" / "1_Relu.py").write_text(RELU)
    return root


def fake_run(run: Path) -> Path:
    run.mkdir(parents=True)
    files = {
        "level_1_problem_1_sample_0_kernel.py": ADD_OK,
        "level_1_problem_1_sample_1_kernel.py": ADD_WRONG,
        "level_1_problem_1_sample_2_kernel.py": ADD_BROKEN,
        "level_1_problem_2_sample_0_kernel.py": SCALE_ALIAS,
        "level_1_problem_2_sample_1_kernel.py": "   \n",  # empty: unreadable
        # level_1_problem_2_sample_2: missing
        "level_2_problem_1_sample_0_kernel.py": RELU_OK,
        "notes.py": "# not a sample\n",
        "level_2_problem_7_sample_0_kernel.py": RELU_OK,  # the checkout has no such problem
    }
    for name, text in files.items():
        (run / name).write_text(text)
    # Not UTF-8: it cannot travel as JSON, so it is unreadable (a result, not a crash).
    (run / "level_2_problem_1_sample_1_kernel.py").write_bytes(b"import torch\n# \xff\xfe\n")
    return run


def kernelbench(args: list[str], tmp: Path, timeout_s: float = 900) -> subprocess.CompletedProcess:
    command = [
        str(kforge_binary()), "kernelbench", *args,
        "--device", device_under_test(), "--data-dir", str(tmp / "data"),
        "--baselines", str(tmp / "baselines.json"),
        "--correct-trials", "2", "--num-trials", "5",
    ]  # fmt: skip
    env = {**os.environ, **worker_env()}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )


def records(out: Path) -> dict[str, dict[str, Any]]:
    lines = (out / "kernelbench_samples.jsonl").read_text().splitlines()
    return {f"{r['level']}/{r['problem_id']}/{r['sample_id']}": r for r in map(json.loads, lines)}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("kb")
    fake_checkout(tmp / "kb")
    fake_run(tmp / "runs" / "r1")
    r = kernelbench(
        [
            "--kb", str(tmp / "kb"), "--level", "1,2", "--run", str(tmp / "runs" / "r1"),
            "--samples", "3", "--out", str(tmp / "out"), "--fast-p", "0.5",
            "--baseline-json", str(tmp / "baseline_time_torch.json"),
        ],
        tmp,
    )  # fmt: skip
    return tmp, r


def test_every_sample_is_a_record_with_its_verdict(first_run: tuple[Path, Any]) -> None:
    tmp, r = first_run
    assert r.returncode == 0, r.stderr
    got = records(tmp / "out")
    # 3 samples of each of the 3 problems (level 2's problem 1: sample 0 found, 1-2 missing).
    assert sorted(got) == sorted(
        [f"{lv}/{p}/{s}" for lv, p in [(1, 1), (1, 2), (2, 1)] for s in range(3)] + ["2/7/0"]
    )
    assert got["2/7/0"]["status"] == "no_problem" and "no problem 7" in got["2/7/0"]["reason"]
    assert got["1/1/0"]["status"] == "judged" and got["1/1/0"]["correct"] is True
    assert got["1/1/0"]["job_id"] and got["1/1/0"]["runtime_stats"]["trials"] >= 1
    assert got["1/1/0"]["speedup"] is not None and got["1/1/0"]["problem"] == "1_Add.py"
    assert got["1/1/1"]["correct"] is False and got["1/1/1"]["compiled"] is True
    assert got["1/1/1"]["error_kind"] == "mismatch"
    assert got["1/1/2"]["compiled"] is False and "SyntaxError" in got["1/1/2"]["reason"]
    assert got["1/2/1"]["status"] == "unreadable" and "empty" in got["1/2/1"]["reason"]
    assert got["1/2/2"]["status"] == "missing"
    assert got["2/1/0"]["correct"] is True
    assert got["2/1/1"]["status"] == "unreadable" and "not UTF-8" in got["2/1/1"]["reason"]
    # The aliasing hack is correct but flagged, and never fast.
    hack = got["1/2/0"]
    assert hack["correct"] is True
    assert "outputs_not_aliasing_inputs" in [f["code"] for f in hack["flags"]]
    assert "ignored 1 *.py file" in r.stderr


def test_summary_counts_fast_p_and_flags(first_run: tuple[Path, Any]) -> None:
    tmp, r = first_run
    summary = json.loads((tmp / "out" / "kernelbench_summary.json").read_text())
    l1 = summary["levels"]["1"]
    assert l1["samples"] == 6 and l1["problems"] == 2
    assert l1["correct"] == 2 and l1["flagged"] == 1 and l1["missing"] == 1
    assert l1["correctness_rate"] == pytest.approx(2 / 6)
    assert set(l1["fast_p"]) == {"fast_0", "fast_0.5", "fast_1", "fast_2"}
    # Only the honest correct sample can count, the flagged hack never (by either rule):
    # fast_0 is 1/6, and fast_1 counts it only when its whole interval is above 1 (identical
    # kernels: not on a GPU; the cpu device's clock on a busy machine may say otherwise).
    # (The cpu judge's clock may see no time at all for a kernel this small: no speedup, so
    # not fast either.)
    honest = records(tmp / "out")["1/1/0"]
    timed = honest["speedup"] is not None
    assert l1["fast_p"]["fast_0"] == pytest.approx((1 / 6) if timed else 0)
    assert l1["fast_p_point"]["fast_0"] == pytest.approx((1 / 6) if timed else 0)
    surely_faster = honest["speedup_ci"] is not None and honest["speedup_ci"][0] > 1
    assert l1["fast_p"]["fast_1"] == pytest.approx((1 / 6) if surely_faster else 0)
    assert l1["geomean_count"] == (1 if timed else 0)
    assert summary["all"]["samples"] == 10  # level 2's problem 7 counts, as a failed sample
    assert "fast_1" in r.stdout and "all" in r.stdout


def test_eval_results_and_baselines_have_kernelbenchs_shapes(first_run: tuple[Path, Any]) -> None:
    tmp, _ = first_run
    l1 = json.loads((tmp / "out" / "level_1" / "eval_results.json").read_text())
    assert sorted(l1) == ["1", "2"]
    assert [e["sample_id"] for e in l1["1"]] == [0, 1, 2]
    ok = l1["1"][0]
    assert set(ok) == {
        "sample_id",
        "compiled",
        "correctness",
        "metadata",
        "runtime",
        "runtime_stats",
    }
    assert ok["correctness"] is True and ok["runtime"] > 0
    assert {"mean", "std", "min", "max", "num_trials", "hardware", "device"} <= set(
        ok["runtime_stats"]
    )
    assert l1["1"][1]["runtime"] == -1.0 and "correctness_issue" in l1["1"][1]["metadata"]
    assert l1["1"][2]["metadata"]["compilation_error"]
    assert json.loads((tmp / "out" / "level_2" / "eval_results.json").read_text())["1"][0][
        "correctness"
    ]
    baselines = json.loads((tmp / "baseline_time_torch.json").read_text())
    assert sorted(baselines) == ["level1", "level2"]
    add = baselines["level1"]["1_Add.py"]
    assert set(add) == {"mean", "std", "min", "max", "num_trials", "hardware", "device"}
    assert add["mean"] > 0 and "1_Relu.py" in baselines["level2"]
    cache = json.loads((tmp / "baselines.json").read_text())
    assert len(cache["baselines"]) == 3  # one per problem on this device


def test_a_rerun_judges_only_what_changed(first_run: tuple[Path, Any]) -> None:
    tmp, _ = first_run
    before = records(tmp / "out")
    run = tmp / "runs" / "r1"
    (run / "level_1_problem_1_sample_1_kernel.py").write_text(ADD_OK)  # fixed
    (run / "level_1_problem_2_sample_2_kernel.py").write_text(new_model("return xs[0] * 1.0"))
    r = kernelbench(
        ["--kb", str(tmp / "kb"), "--level", "1,2", "--run", str(run), "--samples", "3",
         "--out", str(tmp / "out")],
        tmp,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "2 sample(s) to judge" in r.stderr and "4 reused" in r.stderr
    after = records(tmp / "out")
    assert (
        after["1/1/1"]["correct"] is True and after["1/1/1"]["job_id"] != before["1/1/1"]["job_id"]
    )
    assert after["1/2/2"]["correct"] is True
    assert after["1/1/0"]["job_id"] == before["1/1/0"]["job_id"]  # reused, not judged again
    assert len((tmp / "out" / "kernelbench_samples.jsonl").read_text().splitlines()) == 10


def test_one_level_writes_eval_results_in_the_out_dir(tmp_path: Path) -> None:
    fake_checkout(tmp_path / "kb")
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_2_problem_1_sample_0_kernel.py").write_text(RELU_OK)
    r = kernelbench(
        ["--kb", str(tmp_path / "kb" / "KernelBench"), "--level", "2", "--run", str(run)], tmp_path
    )
    assert r.returncode == 0, r.stderr
    # No --out: the run directory, as eval_from_generations.py writes runs/<run>/eval_results.json.
    assert json.loads((run / "eval_results.json").read_text())["1"][0]["correctness"] is True


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--level", "3"], "--level"),
        (["--problems", "7"], "--problems"),
        (["--problems", "2-1"], "--problems"),
        (["--fast-p", "x"], "--fast-p"),
    ],
)
def test_bad_options_name_the_flag(tmp_path: Path, args: list[str], flag: str) -> None:
    fake_checkout(tmp_path / "kb")
    (tmp_path / "run").mkdir()
    r = kernelbench(
        ["--kb", str(tmp_path / "kb"), "--run", str(tmp_path / "run"), *args], tmp_path, 60
    )
    assert r.returncode == 2
    assert f"kforge kernelbench: {flag}:" in r.stderr


def test_ctrl_c_cancels_the_jobs_in_flight(tmp_path: Path) -> None:
    fake_checkout(tmp_path / "kb")
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_1_problem_1_sample_0_kernel.py").write_text(SLOW)
    command = [
        str(kforge_binary()), "kernelbench", "--kb", str(tmp_path / "kb"), "--run", str(run),
        "--problems", "1", "--device", device_under_test(), "--data-dir", str(tmp_path / "data"),
        "--baselines", str(tmp_path / "b.json"), "--correct-trials", "1", "--timeout", "600",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **worker_env()},
    )  # fmt: skip
    time.sleep(40)  # the engine starts, the job runs (and sleeps)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "cancelling the jobs in flight" in err
    # 30 s without a finished sample: the progress said which job was still out, and how far.
    assert re.search(
        r"s in, waiting for 1 job\(s\): level_1_problem_1_sample_0_kernel\.py \((queued|running)",
        err,
    ), err
    got = records(run)
    assert got["1/1/0"]["status"] == "cancelled"


def test_server_mode_runs_the_batches_on_a_server(server: KforgeServer, tmp_path: Path) -> None:
    fake_checkout(tmp_path / "kb")
    run = tmp_path / "run"
    run.mkdir()
    (run / "level_1_problem_1_sample_0_kernel.py").write_text(ADD_OK)
    (run / "level_1_problem_1_sample_1_kernel.py").write_text(ADD_WRONG)
    r = kernelbench(
        ["--kb", str(tmp_path / "kb"), "--run", str(run), "--problems", "1",
         "--server", server.url],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = records(run)
    assert got["1/1/0"]["correct"] is True and got["1/1/1"]["correct"] is False
    job = server.client().get(f"/job/{got['1/1/0']['job_id']}").json()
    assert job["kernel_exec_result"]["correctness"] is True


def kernelbench_body(server: KforgeServer) -> dict[str, Any]:
    return {
        "problems": [
            {
                "level": 1,
                "problem_id": 1,
                "name": "1_Add.py",
                "ref_code": ADD,
                "samples": [
                    {"sample_id": 0, "source_code": ADD_OK},
                    {"sample_id": 1, "source_code": ADD_WRONG},
                ],
            },
            {
                "level": 2,
                "problem_id": 1,
                "ref_code": RELU,
                "samples": [{"sample_id": 0, "source_code": RELU_OK}],
            },
        ],
        "device": server.devices,
        "num_correct_trials": 2,
        "num_trials": 5,
        "fast_p": [0.5],
    }


def test_post_kernelbench_answers_every_sample_and_the_summary(server: KforgeServer) -> None:
    with server.client() as c:
        r = c.post("/kernelbench", json=kernelbench_body(server))
        assert r.status_code == 200, r.text
        answer = r.json()
        assert len(answer["batches"]) == 2
        got = {f"{s['level']}/{s['problem_id']}/{s['sample_id']}": s for s in answer["samples"]}
        assert sorted(got) == ["1/1/0", "1/1/1", "2/1/0"]
        assert got["1/1/0"]["correct"] and not got["1/1/1"]["correct"] and got["2/1/0"]["correct"]
        assert got["1/1/1"]["error_kind"] == "mismatch"
        summary = answer["summary"]
        assert summary["levels"]["1"]["samples"] == 2 and summary["levels"]["1"]["correct"] == 1
        assert summary["all"]["correct"] == 2 and "fast_0.5" in summary["all"]["fast_p"]
        job = c.get(f"/job/{got['1/1/0']['job_id']}").json()
        assert job["kernel_exec_result"]["correctness"] is True


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b.pop("problems"), "problems"),
        (lambda b: b["problems"][0]["samples"][1].pop("source_code"),
         "problems[0].samples[1].source_code"),
        (lambda b: b["problems"][1].pop("ref_code"), "problems[1].ref_code"),
        (lambda b: b["problems"][1].update(level=1), "problems[1].problem_id"),
        (lambda b: b.update(num_correct_trials=0), "num_correct_trials"),
    ],
)  # fmt: skip
def test_bad_kernelbench_bodies_name_the_field(
    server: KforgeServer, change: Any, field: str
) -> None:
    body = kernelbench_body(server)
    change(body)
    with server.client() as c:
        r = c.post("/kernelbench", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field, r.json()


def test_mcp_kernelbench_eval(server: KforgeServer) -> None:
    mcp = RawMcp(server.url)
    try:
        mcp.initialize()
        tools = [t["name"] for t in mcp.request("tools/list").json()["result"]["tools"]]
        assert "kernelbench_eval" in tools
        args = kernelbench_body(server)
        r = mcp.request("tools/call", {"name": "kernelbench_eval", "arguments": args}, timeout=600)
        assert r.status_code == 200, r.text
        result = call_result(r)
        assert not result.get("isError"), result
        out = result["structuredContent"]
        assert [s["correct"] for s in out["samples"]] == [True, False, True]
        assert "3 sample(s): 2 correct" in result["content"][0]["text"]
        args["problems"][0]["samples"][0].pop("source_code")
        r = mcp.request("tools/call", {"name": "kernelbench_eval", "arguments": args})
        result = call_result(r)
        assert result["isError"]
        assert "problems[0].samples[0].source_code" in result["content"][0]["text"]
    finally:
        mcp.close()
