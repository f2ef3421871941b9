"""phases_ms in every result (REST and MCP) and GET /metrics in the Prometheus text format,
through a real server of its own (so the counters start at zero) on the device under test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from integration import cuda_kernels
from integration.kernels import FAST_TIMING, TORCH_ADD_REF, torch_kernel, triton_add
from integration.kforge_server import KforgeServer, device_under_test
from integration.mcp_support import RawMcp, evaluate_args, sse_messages

PHASES = ("import", "compile", "inputs", "reference", "candidate", "compare", "timing")
# The GPU host has no internet to install promtool; scripts/gpu-check.sh sets this there.
NO_PROMTOOL = os.environ.get("KFORGE_NO_PROMTOOL") == "1"


@pytest.fixture(scope="module")
def srv() -> Iterator[KforgeServer]:
    server = KforgeServer().start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
        print(server.log()[-3000:])


def post(srv: KforgeServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with srv.client() as c:
        r = c.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def kernelbench_compare(srv: KforgeServer) -> dict[str, Any]:
    ref = torch_kernel(TORCH_ADD_REF)
    return post(
        srv,
        "/compare",
        {"ref_kernel": ref, "custom_kernel": ref, "timing": FAST_TIMING, "num_correct_trials": 2},
    )


def assert_phases_fit(result: dict[str, Any], expected: set[str]) -> None:
    phases = result["phases_ms"]
    assert set(phases) == expected, phases
    assert set(phases) <= set(PHASES)
    assert all(isinstance(v, float | int) and v >= 0 for v in phases.values()), phases
    assert sum(phases.values()) <= result["process"]["wall_ms"], (phases, result["process"])


def test_phases_ms_of_a_kernelbench_compare_fit_in_the_jobs_wall_time(srv: KforgeServer) -> None:
    body = kernelbench_compare(srv)
    result = body["kernel_exec_result"]
    assert result["correctness"], result
    expected = {"import", "inputs", "reference", "candidate", "compare", "timing"}
    assert_phases_fit(result, expected)
    assert result["metadata"]["get_inputs_device"] == device_under_test()
    # GET /job/{id} serves the same stored result.
    with srv.client() as c:
        again = c.get(f"/job/{body['job_id']}").json()["kernel_exec_result"]
    assert again["phases_ms"] == result["phases_ms"]


def test_phases_ms_of_a_failed_import_hold_only_the_import(srv: KforgeServer) -> None:
    body = post(srv, "/evaluate", {"kernel": torch_kernel("import nonexistent_module_xyz\n")})
    result = body["kernel_exec_result"]
    assert not result["compiled"], result
    assert_phases_fit(result, {"import"})


def test_phases_ms_of_the_native_cuda_worker(srv: KforgeServer) -> None:
    kernel = cuda_kernels.vector_add()
    body = post(srv, "/evaluate", {"kernel": kernel, "timing": FAST_TIMING})
    result = body["kernel_exec_result"]
    assert result["metadata"]["worker_runtime"] == "native", result["metadata"]
    if device_under_test() == "cpu":  # it compiles, then cannot run without a GPU
        assert result["compiled"] and result["error_kind"] == "runtime", result
        assert_phases_fit(result, {"compile"})
    else:
        assert result["correctness"], result
        assert_phases_fit(result, {"compile", "inputs", "candidate", "compare", "timing"})


def test_phases_ms_in_the_mcp_tool_result(srv: KforgeServer) -> None:
    mcp = RawMcp(srv.url)
    try:
        mcp.initialize()
        r = mcp.request("tools/call", {"name": "evaluate_kernel", "arguments": evaluate_args()})
        assert r.status_code == 200, r.text
        sse = r.headers["content-type"].startswith("text/event-stream")
        result = (sse_messages(r.text)[-1] if sse else r.json())["result"]
        assert not result.get("isError"), result
        res = result["structuredContent"]["kernel_exec_result"]
        assert {"import", "inputs", "reference", "candidate", "compare"} <= set(res["phases_ms"])
    finally:
        mcp.close()


def scrape(srv: KforgeServer) -> str:
    with srv.client() as c:
        r = c.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4"), r.headers
    return r.text


def value(text: str, sample: str, default: float | None = None) -> float:
    """The value of the sample line `sample` (name and labels, exactly); `default` when
    there is none, else that is a failure."""
    found = [ln for ln in text.splitlines() if ln.startswith(sample + " ")]
    assert len(found) <= 1, found
    if found:
        return float(found[0].rsplit(" ", 1)[1])
    assert default is not None, f"no sample {sample} in:\n{text}"
    return default


def finished(text: str, kernel_type: str) -> float:
    """kforge_jobs_finished_total of one kernel type, over every state."""
    pattern = rf'^kforge_jobs_finished_total\{{state="\w+",kernel_type="{kernel_type}"\}} (\S+)$'
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.M))


def test_metrics_after_jobs(srv: KforgeServer) -> None:
    torch_ok = 'kforge_jobs_finished_total{state="success",kernel_type="torch"}'
    start = value(scrape(srv), torch_ok, default=0)
    kernelbench_compare(srv)
    post(srv, "/evaluate", {"kernel": triton_add(), "timing": FAST_TIMING})
    text = scrape(srv)
    assert value(text, torch_ok) == start + 1
    assert value(text, 'kforge_jobs_finished_total{state="success",kernel_type="triton"}') >= 1
    # Per-phase latency histograms, cumulative, with the count matching +Inf.
    inf = value(
        text, 'kforge_job_phase_seconds_bucket{phase="timing",kernel_type="torch",le="+Inf"}'
    )
    assert inf == value(text, 'kforge_job_phase_seconds_count{phase="timing",kernel_type="torch"}')
    assert inf >= 1
    buckets = [
        float(m.group(1))
        for m in re.finditer(
            r'^kforge_job_phase_seconds_bucket\{phase="import",kernel_type="torch",le="[^"]+"\} '
            r"(\S+)$",
            text,
            re.M,
        )
    ]
    assert buckets == sorted(buckets) and buckets[-1] >= 1
    assert value(text, 'kforge_job_run_seconds_count{kernel_type="triton"}') >= 1
    # Queue, workers, devices, store.
    assert value(text, "kforge_queue_depth") == 0
    assert value(text, "kforge_queue_bytes") == 0
    assert value(text, 'kforge_jobs_stored{state="success"}') >= 3
    device = device_under_test()
    kind = "cpu" if device == "cpu" else "gpu"
    busy = value(text, f'kforge_device_busy_seconds_total{{device="{device}",kind="{kind}"}}')
    assert busy > 0
    assert value(text, f'kforge_device_jobs_total{{device="{device}",kind="{kind}"}}') >= 2
    assert value(text, f'kforge_worker_restarts_total{{device="{device}",worker="python"}}') == 0
    assert "# TYPE kforge_job_phase_seconds histogram" in text


def test_metrics_count_a_job_whose_kernel_does_not_compile(srv: KforgeServer) -> None:
    before = finished(scrape(srv), "torch")
    body = post(srv, "/evaluate", {"kernel": torch_kernel("raise SystemExit(3)\n")})
    assert not body["kernel_exec_result"]["compiled"]
    assert finished(scrape(srv), "torch") == before + 1


@pytest.mark.skipif(NO_PROMTOOL, reason="KFORGE_NO_PROMTOOL=1 (no promtool on this host)")
def test_promtool_accepts_the_metrics(srv: KforgeServer) -> None:
    kernelbench_compare(srv)
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (scripts/setup.sh)"
    check = subprocess.run(
        [promtool, "check", "metrics"],
        input=scrape(srv),
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
