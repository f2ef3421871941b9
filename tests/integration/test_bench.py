"""`kforge bench`, POST /bench and the MCP tool run_benchmark_suite on the real binary with
real workers (the device under test: cpu on CI, where Triton runs in its interpreter).

The CLI run benchmarks add and softmax at all three sizes and checks every section and
number of both logs, in English and (rendered again from bench.json) with the Korean
headings; a --kernels directory with deliberately broken versions must report each one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.kforge_server import REPO, KforgeServer, device_under_test, kforge_binary
from integration.mcp_support import RawMcp, sse_messages, worker_env

VERSIONS = ["v1_baseline", "v2_tiling", "v3_coalesced", "v4_optimized"]
EN_HEADINGS = [
    "# {title} Triton kernel development log",
    "## Phase 1: Research and analysis",
    "## Phase 2: Kernel writing",
    "## Phase 3: Correctness Check",
    "## Phase 3: Benchmark results",
    "## Phase 4: Best kernel",
]
KO_HEADINGS = [
    "# {title} Triton Kernel 개발 로그",
    "## Phase 1: 자료 조사 및 분석",
    "## Phase 2: 커널 작성",
    "## Phase 3: Correctness Check",
    "## Phase 3: 벤치마크 결과",
    "## Phase 4: 최적 커널",
]
EN_LABELS = [
    "**Operation**", "**Mathematical definition**", "**Inputs/outputs**",
    "**Computational complexity**", "**Selected kernel**", "**Speedup**", "**Analysis**",
]  # fmt: skip
KO_LABELS = [
    "**Operation**", "**수학적 정의**", "**입력/출력**", "**계산 복잡도**",
    "**선택된 커널**", "**Speedup**", "**분석**",
]  # fmt: skip
MAIN_TABLE = "| Kernel | Small | Medium | Large | Final | Speedup |"
NUMBER = r"\d+(?:\.\d+)?(?:e[-+]\d+)?"


def bench(args: list[str], tmp: Path, timeout_s: float = 1200) -> subprocess.CompletedProcess[str]:
    """`kforge bench ARGS` with an embedded engine in its own data directory."""
    command = [
        str(kforge_binary()), "bench", *args,
        "--data-dir", str(tmp / "data"), "--device", device_under_test(),
    ]  # fmt: skip
    env = {**os.environ, **worker_env()}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )


def sections(log: str, headings: list[str], title: str) -> list[str]:
    """The log cut at its headings, which must all be there, in order."""
    at, cuts = 0, []
    for pattern in headings:
        h = pattern.format(title=title)
        found = log.find(h + "\n", at)
        assert found >= 0, f"missing heading {h!r} in:\n{log}"
        cuts.append(found)
        at = found + len(h)
    return [log[a:b] for a, b in zip(cuts, [*cuts[1:], len(log)], strict=True)]


def table_rows(section: str, header: str) -> dict[str, list[str]]:
    """Rows of the Markdown table under `header`: first cell -> the other cells."""
    lines = section.splitlines()
    start = lines.index(header)
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def check_log(log: str, lang: str, report_op: dict[str, Any], sizes: list[str]) -> None:
    """Every section of a library op's log, with a number in every cell it should have."""
    headings, labels = (EN_HEADINGS, EN_LABELS) if lang == "en" else (KO_HEADINGS, KO_LABELS)
    title = report_op["title"]
    phase1, phase2, correct, timing, phase4 = sections(log, headings, title)[1:]
    for label in labels[:4]:
        assert label in phase1, label
    for v in VERSIONS:
        assert f"### {v} — " in phase2, v
    header = next(line for line in correct.splitlines() if line.startswith("| Kernel |"))
    rows = table_rows(correct, header)
    assert sorted(rows) == VERSIONS
    for v in VERSIONS:
        result, retries, max_abs, max_rel = rows[v]
        assert result == "✅" and retries == "0", rows[v]
        assert re.fullmatch(NUMBER, max_abs) and re.fullmatch(NUMBER, max_rel), rows[v]
    table = table_rows(timing, MAIN_TABLE)
    assert sorted(table) == sorted(["torch", "torch.compile", *VERSIONS]), table
    columns = [["small", "medium", "large"].index(s) for s in sizes]
    for kernel, cells in table.items():
        for i in [*columns, 3]:
            assert re.fullmatch(NUMBER, cells[i]), (kernel, cells)
        assert re.fullmatch(NUMBER + "x", cells[4]), (kernel, cells)
    assert table["torch"][4] == "1.0x"
    assert f"![{report_op['op']}: " in timing
    for label in labels[4:]:
        assert label in phase4, label
    best = report_op["best"]["kernel"]
    assert best in VERSIONS and best in phase4
    speedup = re.search(r"\*\*Speedup\*\*: (?:torch 대비 )?(" + NUMBER + ")x", phase4)
    assert speedup, phase4
    # Numbers in the log are the report's.
    final = report_op["rows"][[r["kernel"] for r in report_op["rows"]].index(best)]["final_ms"]
    assert table[best][3] == f"{final:.4g}"


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("bench")
    # All three sizes and torch.compile: about 5 minutes on a loaded 2-core machine, most of it
    # torch.compile's start-up in each of its six jobs (inductor probes the CPU's vector ISAs in
    # subprocesses that import torch).
    args = [
        "--ops",
        "add,softmax",
        "--runs",
        "2",
        "--correct-trials",
        "2",
        "--out",
        str(tmp / "en"),
    ]
    r = bench(args, tmp)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp / "en" / "bench.json").read_text())
    return tmp, report


def test_cli_writes_every_file_with_every_section_and_number(
    cli_run: tuple[Path, dict[str, Any]],
) -> None:
    tmp, report = cli_run
    out = tmp / "en"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["add_log.md", "add.svg", "softmax_log.md", "softmax.svg", "summary.md", "bench.json"]
    )
    assert report["device"] == device_under_test()
    assert report["sizes"] == ["small", "medium", "large"] and report["runs"] == 2
    for op in report["ops"]:
        assert all(row["correct"] for row in op["rows"]), op["rows"]
        check_log((out / f"{op['op']}_log.md").read_text(), "en", op, report["sizes"])
        svg = (out / f"{op['op']}.svg").read_text()
        assert svg.startswith("<svg ") and svg.count("<rect x=") >= 6 * 3
    assert report["peaks"]["copy"]["gbs"] > 0
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# kforge bench summary")
    assert "| add | v" in summary and "| softmax | v" in summary
    if device_under_test() == "cpu":
        assert "not GPU timings" in report["timing_note"]
        assert "> **Note:** cpu device: Triton ran in its interpreter" in summary


def test_the_report_renders_again_with_the_korean_headings(
    cli_run: tuple[Path, dict[str, Any]],
) -> None:
    tmp, report = cli_run
    r = subprocess.run(
        [str(kforge_binary()), "bench", "--from-json", str(tmp / "en" / "bench.json"),
         "--log-lang", "ko", "--out", str(tmp / "ko")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "# kforge 벤치마크 요약" in r.stdout
    for op in report["ops"]:
        ko = (tmp / "ko" / f"{op['op']}_log.md").read_text()
        check_log(ko, "ko", op, report["sizes"])
        en = (tmp / "en" / f"{op['op']}_log.md").read_text()
        en_timing = sections(en, EN_HEADINGS, op["title"])[4]
        ko_timing = sections(ko, KO_HEADINGS, op["title"])[4]
        assert table_rows(en_timing, MAIN_TABLE) == table_rows(ko_timing, MAIN_TABLE)
    assert json.loads((tmp / "ko" / "bench.json").read_text()) == report


def broken_softmax(root: Path) -> Path:
    """kernels/softmax copied, with v2 that does not compile, v3 off by a factor, no v4."""
    mine = root / "mine" / "softmax"
    shutil.copytree(REPO / "kernels" / "softmax", mine)
    v2 = mine / "v2_tiling.py"
    v2.write_text(v2.read_text().replace("row = tl.program_id(0)", "row = tl.program_id(0) +"))
    v3 = mine / "v3_coalesced.py"
    right = "out = numerator / tl.sum(numerator, axis=0)"
    wrong = v3.read_text().replace(right, right + " * 1.5")
    assert wrong != v3.read_text()
    v3.write_text(wrong)
    (mine / "v4_optimized.py").unlink()
    (mine / "retries.json").write_text('{"v3_coalesced": 3}')
    return root / "mine"


def test_kernels_dir_with_broken_versions_reports_each(tmp_path: Path) -> None:
    mine = broken_softmax(tmp_path)
    r = bench(
        ["--ops", "softmax", "--kernels", str(mine), "--sizes", "small", "--runs", "2",
         "--no-peaks", "--no-torch-compile", "--out", str(tmp_path / "out")],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "out" / "bench.json").read_text())
    op = report["ops"][0]
    assert op["kernels"] == str(mine)
    rows = {row["kernel"]: row for row in op["rows"]}
    assert rows["v1_baseline"]["correct"]
    assert not rows["v2_tiling"]["correct"] and rows["v2_tiling"]["error_kind"] == "compile"
    assert "SyntaxError" in rows["v2_tiling"]["error"]
    assert not rows["v3_coalesced"]["correct"] and rows["v3_coalesced"]["error_kind"] == "mismatch"
    assert "elements differ" in rows["v3_coalesced"]["error"]
    assert "could not be loaded" in rows["v4_optimized"]["error"]
    assert op["best"]["kernel"] == "v1_baseline" and op["best"]["correct_versions"] == 1

    log = (tmp_path / "out" / "softmax_log.md").read_text()
    correct = sections(log, EN_HEADINGS, "torch.softmax")[3]
    table = table_rows(correct, "| Kernel | Result | Retries | Max abs error | Max rel error |")
    assert [table[v][0] for v in VERSIONS] == ["✅", "❌", "❌", "❌"]
    assert table["v3_coalesced"][1] == "3"
    assert "- **v2_tiling** (compile): small: " in correct
    assert "- **v3_coalesced** (mismatch): small: " in correct
    assert "Not loaded: " in sections(log, EN_HEADINGS, "torch.softmax")[2]
    assert "| v3_coalesced ❌ | — | — | — | — | — |" in log
    assert "torch.compile" not in sections(log, EN_HEADINGS, "torch.softmax")[4]
    assert "- **Selected kernel**: v1_baseline" in log


def test_bad_options_name_the_flag(tmp_path: Path) -> None:
    r = bench(["--ops", "softmax,conv2d"], tmp_path, timeout_s=120)
    assert r.returncode == 2 and "--ops: unknown op 'conv2d'" in r.stderr, r.stderr
    r = bench(["--ops", "softmax", "--sizes", "small,huge"], tmp_path, timeout_s=120)
    assert r.returncode == 2 and "--sizes: 'huge' is not small, medium or large" in r.stderr
    r = bench(["--ops", "add", "--size-preset", "huge"], tmp_path, timeout_s=120)
    assert r.returncode == 2 and "--size-preset: 'huge' is not default or seed" in r.stderr
    r = bench(["--ops", "add", "--regenerate-cmd", "true"], tmp_path, timeout_s=120)
    assert r.returncode == 2 and "--regenerate-cmd: needs --kernels DIR" in r.stderr, r.stderr
    mine = ["--ops", "add", "--kernels", str(REPO / "kernels")]
    r = bench([*mine, "--regenerate-cmd", "true", "--regenerate-tries", "0"], tmp_path, 120)
    assert r.returncode == 2 and "--regenerate-tries: must be 1 to 10" in r.stderr, r.stderr
    r = bench([*mine, "--regenerate-tries", "2"], tmp_path, timeout_s=120)
    assert r.returncode == 2, r.stderr
    assert "--regenerate-tries: has no effect without --regenerate-cmd" in r.stderr


def test_the_seed_size_preset_runs_the_seed_sizes_on_the_cpu_device(tmp_path: Path) -> None:
    """256x256 .. 4096x4096 whatever the device (the cpu device's default is 16x64 ..)."""
    r = bench(
        ["--ops", "add", "--size-preset", "seed", "--sizes", "small", "--runs", "1",
         "--correct-trials", "1", "--no-peaks", "--no-torch-compile", "--out", str(tmp_path / "o")],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "o" / "bench.json").read_text())
    assert report["size_preset"] == "seed" and report["size_profile"] == "gpu"
    op = report["ops"][0]
    assert op["sizes"]["small"]["label"] == "256x256"
    assert op["sizes"]["small"]["shapes"] == {"x": [256, 256], "y": [256, 256]}
    assert op["sizes"]["small"]["bytes"] == 3 * 256 * 256 * 4
    assert all(row["correct"] for row in op["rows"]), op["rows"]
    assert "small 256x256 (" in (tmp_path / "o" / "add_log.md").read_text()


GOOD_V1 = (REPO / "kernels" / "add" / "v1_baseline.py").read_text()
# The stand-in for an agent: its first try writes a version that does not compile, its second
# the library's v1. It records what it was given.
REGENERATE_SCRIPT = """
import json, os, pathlib, sys
path = pathlib.Path(sys.argv[1])
seen = pathlib.Path(os.environ["KFORGE_OP_DIR"]) / "seen.jsonl"
with seen.open("a") as f:
    keys = ["KFORGE_OP", "KFORGE_VERSION", "KFORGE_VERSION_PATH", "KFORGE_ERROR_KIND",
            "KFORGE_TRY", "KFORGE_MAX_TRIES", "KFORGE_ERROR_FILE"]
    error = pathlib.Path(sys.argv[2]).read_text()
    f.write(json.dumps({**{k: os.environ[k] for k in keys}, "argv": sys.argv[1:],
                        "error": error}) + "\\n")
if os.environ["KFORGE_TRY"] == "1":
    path.write_text(path.read_text().replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 1024 +"))
else:
    path.write_text(pathlib.Path(sys.argv[3]).read_text())
print("regenerated", path.name)
"""


def test_regenerate_cmd_rewrites_a_failing_version_until_it_is_correct(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "add").mkdir(parents=True)
    for v in VERSIONS:
        shutil.copy(REPO / "kernels" / "add" / f"{v}.py", mine / "add")
    v1 = mine / "add" / "v1_baseline.py"
    v1.write_text(WRONG_V1)
    (tmp_path / "good_v1.py").write_text(GOOD_V1)
    (tmp_path / "regen.py").write_text(REGENERATE_SCRIPT)
    command = f'"{sys.executable}" {tmp_path / "regen.py"} "$1" "$2" {tmp_path / "good_v1.py"}'
    r = bench(
        ["--ops", "add", "--kernels", str(mine), "--sizes", "small", "--runs", "1",
         "--correct-trials", "1", "--no-peaks", "--no-torch-compile", "--out", str(tmp_path / "o"),
         "--regenerate-cmd", command],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "add v1_baseline: try 1 of 3 (mismatch): running the --regenerate-cmd" in r.stderr
    assert "add v1_baseline: try 2: correct at every size" in r.stderr
    assert v1.read_text() == GOOD_V1

    # What the command was given: the version's path ($1, KFORGE_VERSION_PATH) and the failure.
    seen = [json.loads(line) for line in (mine / "add" / "seen.jsonl").read_text().splitlines()]
    assert [s["KFORGE_TRY"] for s in seen] == ["1", "2"]
    assert [s["KFORGE_ERROR_KIND"] for s in seen] == ["mismatch", "compile"]
    assert seen[0]["KFORGE_VERSION_PATH"] == seen[0]["argv"][0] == str(v1)
    assert seen[0]["KFORGE_MAX_TRIES"] == "3" and seen[0]["KFORGE_VERSION"] == "v1_baseline"
    assert "elements differ" in seen[0]["error"] and "SyntaxError" in seen[1]["error"]

    report = json.loads((tmp_path / "o" / "bench.json").read_text())
    assert report["regenerate"]["command"] == command and report["regenerate"]["max_tries"] == 3
    rows = {row["kernel"]: row for row in report["ops"][0]["rows"]}
    assert rows["v1_baseline"]["correct"] and rows["v1_baseline"]["retries"] == 2
    tries = rows["v1_baseline"]["regeneration"]
    assert [t["result"] for t in tries] == ["failing", "correct"], tries
    assert tries[0]["error_kind"] == "compile" and tries[0]["command"]["exit_code"] == 0
    assert tries[1]["command"]["output_tail"] == "regenerated v1_baseline.py\n"
    assert report["ops"][0]["best"]["correct_versions"] == 4

    log = (tmp_path / "o" / "add_log.md").read_text()
    correct = sections(log, EN_HEADINGS, "torch.add")[3]
    assert "| v1_baseline | ✅ | 2 |" in correct
    assert "Regeneration (`--regenerate-cmd`, at most 3 tries per op):" in correct
    assert "- **v1_baseline** try 1 of 3, after mismatch (small: " in correct
    assert "re-judged: ❌ compile: small: " in correct
    assert "- **v1_baseline** try 2 of 3, after compile: " in correct
    assert "re-judged: ✅ correct at every size" in correct
    checklist = log[log.index("## Checklist") :]
    assert "  - [x] regenerated by --regenerate-cmd, tries: 2, correct after try 2" in checklist
    assert "  - [x] correct at small (16x64)" in checklist

    # The op directory got its own tests, which pass with pytest alone now that v1 is right.
    tests = mine / "add" / "tests"
    assert sorted(p.name for p in tests.iterdir() if p.suffix in (".py", ".json")) == [
        "conftest.py", "manifest.json", "test_benchmark.py", "test_correctness.py",
    ]  # fmt: skip
    assert f"- [x] per-op tests in `{tests}`: conftest.py (written)" in checklist
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "KFORGE_TEST_DEVICE": device_under_test()},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "24 passed" in run.stdout


# ---- POST /bench and run_benchmark_suite on a running server ----

# torch.compile takes about a minute per job on a loaded 2-core CI machine; the CLI run above
# covers it.
SMALL = {"sizes": ["small"], "runs": 2, "peaks": False, "torch_compile": False}
WRONG_V1 = (
    (REPO / "kernels" / "add" / "v1_baseline.py")
    .read_text()
    .replace("x.to(tl.float32) + alpha * y", "x.to(tl.float32) - alpha * y")
)


def test_post_bench_answers_with_the_report_and_the_logs(server: KforgeServer) -> None:
    with server.client() as c:
        r = c.post("/bench", json={"ops": ["add"], "log_lang": "ko", **SMALL})
    assert r.status_code == 200, r.text
    body = r.json()
    op = body["report"]["ops"][0]
    assert op["best"]["kernel"] in VERSIONS and op["best"]["correct_versions"] == 4
    assert body["files"]["add_log.md"].startswith("# torch.add Triton Kernel 개발 로그")
    assert set(body["files"]) == {"add_log.md", "add.svg", "summary.md"}


def test_post_bench_streams_progress_and_reports_a_wrong_inline_version(
    server: KforgeServer,
) -> None:
    body = {"ops": "add", "kernels": {"add": {"v1_baseline": WRONG_V1}}, **SMALL}
    with httpx.Client(timeout=600) as c:
        r = c.post(server.url + "/bench", json=body, headers={"Accept": "text/event-stream"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in r.text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln and not ln.startswith(":")]
        kind = [ln[6:].strip() for ln in lines if ln.startswith("event:")]
        data = "\n".join(ln[5:].strip() for ln in lines if ln.startswith("data:"))
        if data:
            events.append((kind[0], json.loads(data)))
    kinds = [k for k, _ in events]
    # v1 (given) and torch; v2..v4 were not given.
    assert kinds == ["progress"] * 2 + ["result"], kinds
    assert [e["done"] for _, e in events[:2]] == [1, 2]
    op = events[-1][1]["report"]["ops"][0]
    rows = {row["kernel"]: row for row in op["rows"]}
    assert rows["v1_baseline"]["error_kind"] == "mismatch"
    assert rows["v2_tiling"]["error"] == "could not be loaded: not provided"
    assert op["best"]["kernel"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ops": ["add"], "runs": 0}, "runs"),
        ({"ops": ["add"], "kernels_dir": "/etc"}, "kernels_dir"),
        ({"ops": ["conv2d"]}, "ops"),
        ({"ops": ["add"], "device": "cuda:99"}, "device"),
        ({"ops": ["add"], "colour": "red"}, "colour"),
        ({"sizes": ["small"]}, "ops"),
        ({"ops": ["add"], "size_preset": "huge"}, "size_preset"),
        ({"ops": ["add"], "regenerate_cmd": "true"}, "regenerate_cmd"),
    ],
)
def test_post_bench_rejects_bad_bodies_naming_the_field(
    server: KforgeServer, body: dict[str, Any], field: str
) -> None:
    with server.client() as c:
        r = c.post("/bench", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field, r.json()


def test_mcp_tool_runs_the_suite_with_progress(server: KforgeServer) -> None:
    mcp = RawMcp(server.url)
    try:
        mcp.initialize()
        r = mcp.request(
            "tools/call",
            {
                "name": "run_benchmark_suite",
                "arguments": {"ops": ["softmax"], **SMALL},
                "_meta": {"progressToken": "bench"},
            },
            timeout=600,
        )
        messages = sse_messages(r.text)
    finally:
        mcp.close()
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == list(range(6)), progress  # 4 versions, torch
    assert all(p["total"] == 5 for p in progress)
    result = messages[-1]["result"]
    assert not result.get("isError"), result
    text = result["content"][0]["text"]
    assert text.startswith("softmax: v")
    # On cpu the interpreter is ~0.002x torch: the summary keeps its digits, never "0.00x".
    assert "0.00x" not in text, text
    assert re.search(r", (\d+\.\d*[1-9]\d*x|<0\.000001x) vs torch", text), text
    files = result["structuredContent"]["files"]
    assert "## Phase 4: Best kernel" in files["softmax_log.md"]


def test_stdio_mcp_tool_reads_a_kernels_dir_and_writes_the_logs(tmp_path: Path) -> None:
    mine = broken_softmax(tmp_path)
    proc = subprocess.Popen(
        [str(kforge_binary()), "mcp", "--devices", device_under_test(),
         "--data-dir", str(tmp_path / "data")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, **worker_env()},
    )  # fmt: skip
    assert proc.stdin and proc.stdout

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        assert proc.stdout
        for line in proc.stdout:
            m = json.loads(line)
            if m.get("id") == request_id and "method" not in m:
                return m
        raise AssertionError("kforge mcp exited")

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}})  # fmt: skip
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        args = {"ops": "softmax", "kernels_dir": str(mine), "out_dir": str(tmp_path / "logs"),
                **SMALL}  # fmt: skip
        send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "run_benchmark_suite", "arguments": args}})  # fmt: skip
        result = answer(1)["result"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert not result.get("isError"), result
    assert result["structuredContent"]["out_dir"] == str(tmp_path / "logs")
    log = (tmp_path / "logs" / "softmax_log.md").read_text()
    assert "| v3_coalesced | ❌ | 3 |" in log
    assert (tmp_path / "logs" / "bench.json").exists()
