"""Pipelined stages (--pipeline-depth, issue 13) through the real server.

On a GPU (KFORGE_TEST_DEVICE=cuda:N) several native `cuda` jobs are in flight at once: each
compiles without the GPU, asks for the device's grant, and its result says how long it
waited (`process.device_wait_ms`); every one is correct, and a Python job run beside them
too. Python Triton compares in flight together load, compile and check under a shared grant
and time under an exclusive one: all correct, and their exclusive grants
(`process.device_grants`) never overlap. On `cpu` the flag is accepted but the cpu device
keeps one job at a time (compiles beside a timed CPU kernel would skew it).
"""

from __future__ import annotations

import itertools
import subprocess
import time
from typing import Any

import pytest

from integration.cuda_kernels import tiled_matmul
from integration.kernels import FAST_TIMING, TORCH_ADD_REF, torch_kernel, triton_add
from integration.kforge_server import KforgeServer, device_under_test, kforge_binary

DEVICE = device_under_test()
ON_GPU = DEVICE != "cpu"
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs a GPU (KFORGE_TEST_DEVICE=cuda:N)")


@pytest.fixture(scope="module")
def pipelined() -> Any:
    srv = KforgeServer(devices=DEVICE, extra_args=["--pipeline-depth", "3"])
    srv.start()
    try:
        srv.wait_ready(DEVICE)
        yield srv
    finally:
        srv.stop()


def device_stats(srv: KforgeServer) -> dict[str, Any]:
    with srv.client() as c:
        devices = c.get("/stats").json()["devices"]
    return next(d for d in devices if d["name"] == DEVICE)


def wait_all(srv: KforgeServer, job_ids: list[str], timeout_s: float = 600) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    out = []
    with srv.client() as c:
        for job_id in job_ids:
            while (job := c.get(f"/job/{job_id}").json())["state"] in ("queued", "running"):
                assert time.monotonic() < deadline, job
                time.sleep(0.05)
            out.append(job)
    return out


@pytest.mark.parametrize("depth", ["0", "9", "two"])
def test_a_bad_pipeline_depth_is_refused_naming_the_flag(depth: str) -> None:
    r = subprocess.run(
        [str(kforge_binary()), "serve", "--pipeline-depth", depth],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "--pipeline-depth" in r.stderr + r.stdout


@pytest.mark.skipif(ON_GPU, reason="checks the cpu device")
def test_the_cpu_device_keeps_one_job_at_a_time(pipelined: KforgeServer) -> None:
    d = device_stats(pipelined)
    assert d["depth"] == 1
    body = {"kernel": torch_kernel(TORCH_ADD_REF), "timing": FAST_TIMING}
    with pipelined.client() as c:
        res = c.post("/evaluate", json=body).json()["kernel_exec_result"]
    assert res["correctness"], res
    assert "device_wait_ms" not in res.get("process", {})


@gpu_only
def test_native_jobs_in_flight_together_are_all_correct_and_waited_for_the_grant(
    pipelined: KforgeServer,
) -> None:
    assert device_stats(pipelined)["depth"] == 3
    ids = []
    with pipelined.client() as c:
        for i in range(6):
            kernel = tiled_matmul(m=256, n=256, k=256)
            kernel["source_code"] += f"\n// job {i}: a fresh source, compiled by NVRTC\n"
            body = {"kernel": kernel, "timing": FAST_TIMING, "device": DEVICE}
            r = c.post("/evaluate", params={"wait": "false"}, json=body)
            assert r.status_code == 202, r.text
            ids.append(r.json()["job_id"])
        py = c.post(
            "/evaluate",
            params={"wait": "false"},
            json={"kernel": torch_kernel(TORCH_ADD_REF), "timing": FAST_TIMING, "device": DEVICE},
        )
        assert py.status_code == 202, py.text
    jobs = wait_all(pipelined, [*ids, py.json()["job_id"]])
    for job in jobs:
        res = job["kernel_exec_result"]
        assert job["state"] == "success" and res["correctness"], job
    waits = [j["kernel_exec_result"]["process"].get("device_wait_ms") for j in jobs[:-1]]
    assert all(w is not None and w >= 0 for w in waits), waits
    assert device_stats(pipelined)["running"] == 0


@gpu_only
def test_python_jobs_in_flight_together_are_correct_and_their_timed_regions_never_overlap(
    pipelined: KforgeServer,
) -> None:
    ids = []
    with pipelined.client() as c:
        for i in range(6):
            body = {
                # A fresh source each: every job compiles its own Triton kernel.
                "kernel": triton_add(f" + 0.0 * {i + 1}"),
                "ref_kernel": torch_kernel(TORCH_ADD_REF),
                "timing": FAST_TIMING,
                "device": DEVICE,
            }
            r = c.post("/compare", params={"wait": "false"}, json=body)
            assert r.status_code == 202, r.text
            ids.append(r.json()["job_id"])
    jobs = wait_all(pipelined, ids)
    windows = []
    for job in jobs:
        res = job["kernel_exec_result"]
        assert job["state"] == "success" and res["correctness"], job
        assert res["runtime"] > 0 and res["ref_runtime"] > 0, res
        process = res["process"]
        assert process["device_wait_ms"] >= 0
        grants = process["device_grants"]
        assert len(grants) == 1, grants  # one exclusive block: both timings, the profiling
        windows.append((grants[0]["granted_at_ms"], grants[0]["released_at_ms"]))
    windows.sort()
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end <= start, windows  # one timed region at a time
    gate = device_stats(pipelined)["device_gate"]
    assert gate["max_shared"] == 3
    assert gate["holder"] is None and gate["shared_holders"] == [] and gate["waiting"] == 0
    assert gate["exclusive_grants"] >= 6
