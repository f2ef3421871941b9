"""Pipelined stages (--pipeline-depth, issue 13) through the real server.

On a GPU (KFORGE_TEST_DEVICE=cuda:N) several native `cuda` jobs are in flight at once: each
compiles without the GPU, asks for the device's grant, and its result says how long it
waited (`process.device_wait_ms`); every one is correct, and a Python job run beside them
too. Python Triton compares in flight together load, compile and check under a shared grant
and time under an exclusive one: all correct, and their exclusive grants
(`process.device_grants`) never overlap. On `cpu` the flag is accepted but the cpu device
keeps one job at a time (compiles beside a timed CPU kernel would skew it); the test-only
`--test-cpu-pipeline-depth` pipelines it like a GPU, so the shared/exclusive grant of Python
jobs (ordering, the stop of a job waiting for its timing, a timeout while stopped) is
checked here without a GPU.
"""

from __future__ import annotations

import itertools
import subprocess
import time
from typing import Any

import pytest

from integration.cuda_kernels import tiled_matmul
from integration.kernels import (
    FAST_TIMING,
    TORCH_ADD_REF,
    model_source,
    torch_kernel,
    triton_add,
)
from integration.kforge_server import (
    KforgeServer,
    assert_speedup_given,
    device_under_test,
    kforge_binary,
)

DEVICE = device_under_test()
ON_GPU = DEVICE != "cpu"
# The gate's holders are job ids, which /stats shows to admins only.
ADMIN = "pipeline-test-admin-token"
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs a GPU (KFORGE_TEST_DEVICE=cuda:N)")


@pytest.fixture(scope="module")
def pipelined() -> Any:
    srv = KforgeServer(devices=DEVICE, extra_args=["--pipeline-depth", "3"], admin_token=ADMIN)
    srv.start()
    try:
        srv.wait_ready(DEVICE)
        yield srv
    finally:
        srv.stop()


def device_stats(srv: KforgeServer) -> dict[str, Any]:
    return srv.device_stats(DEVICE)


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
    # Its gate has one holder: the timed block took it at once (no admission ticket).
    assert device_stats(pipelined)["device_gate"]["max_shared"] == 1
    assert len(res["process"]["device_grants"]) == 1, res["process"]


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
    jobs = pipelined.wait_jobs([*ids, py.json()["job_id"]])
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
                "custom_kernel": triton_add(f" + 0.0 * {i + 1}"),
                "ref_kernel": torch_kernel(TORCH_ADD_REF),
                "timing": FAST_TIMING,
                "device": DEVICE,
            }
            r = c.post("/compare", params={"wait": "false"}, json=body)
            assert r.status_code == 202, r.text
            ids.append(r.json()["job_id"])
    jobs = pipelined.wait_jobs(ids)
    windows = []
    for job in jobs:
        res = job["kernel_exec_result"]
        assert job["state"] == "success" and res["correctness"], job
        assert res["runtime"] > 0, res
        assert_speedup_given(res.get("speedup"), res)  # a speedup > 0: both sides timed
        process = res["process"]
        assert process["device_wait_ms"] >= 0
        grants = process["device_grants"]
        assert len(grants) == 1, grants  # one exclusive block: both timings, the profiling
        windows.append((grants[0]["granted_at_ms"], grants[0]["released_at_ms"]))
    windows.sort()
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end <= start, windows  # one timed region at a time
    # Idle once the teardowns that run after the answers (shared tickets) are done too.
    deadline = time.monotonic() + 60
    while (gate := device_stats(pipelined)["device_gate"])["shared_holders"] or gate["waiting"]:
        assert time.monotonic() < deadline, gate
        time.sleep(0.05)
    assert gate["max_shared"] == 3
    assert gate["holder"] is None and gate["shared_holders"] == [] and gate["waiting"] == 0
    assert gate["exclusive_grants"] >= 6


# --- The cpu device pipelined for tests (--test-cpu-pipeline-depth) ---

cpu_only = pytest.mark.skipif(ON_GPU, reason="the test-only cpu pipelining")

# A job that stays in its shared phase for seconds: each correctness call sleeps.
SLOW_CHECK = model_source("time.sleep(1.5)\nreturn x * 2", prelude="import time")


PIPELINED_CPU_ARGS = ["--test-cpu-pipeline-depth", "3", "--warm-children-cpu", "2"]


@pytest.fixture(scope="module")
def cpu_pipelined() -> Any:
    srv = KforgeServer(
        devices="cpu",
        # The pool's own accounting is checked below (every job takes a child of the pool):
        # judges kept for later jobs have their own test (test_judge_reuse.py).
        extra_args=[*PIPELINED_CPU_ARGS, "--jobs-per-judge", "1"],
        admin_token=ADMIN,
    )
    srv.start()
    try:
        srv.wait_ready("cpu")
        yield srv
    finally:
        srv.stop()


def cpu_gate(srv: KforgeServer) -> dict[str, Any]:
    return srv.device_stats("cpu")["device_gate"]


def submit(srv: KforgeServer, route: str, body: dict[str, Any]) -> str:
    with srv.client() as c:
        r = c.post(route, params={"wait": "false"}, json={**body, "device": "cpu"})
    assert r.status_code == 202, r.text
    return r.json()["job_id"]


def wait_gate(srv: KforgeServer, pred: Any, what: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while not pred(gate := cpu_gate(srv)):
        assert time.monotonic() < deadline, f"{what}: {gate}"
        time.sleep(0.05)
    return gate


def slow_job(srv: KforgeServer) -> str:
    """A job holding a shared grant for seconds (no timing: it never asks for exclusive)."""
    job_id = submit(
        srv,
        "/evaluate",
        {"kernel": torch_kernel(SLOW_CHECK), "num_correct_trials": 6, "measure_performance": False},
    )
    wait_gate(srv, lambda g: job_id in g["shared_holders"], "the slow job admitted")
    return job_id


def timed_add() -> dict[str, Any]:
    return {
        "custom_kernel": triton_add(),
        "ref_kernel": torch_kernel(TORCH_ADD_REF),
        "timing": FAST_TIMING,
        "num_correct_trials": 1,
    }


@cpu_only
def test_pipelined_cpu_python_jobs_are_correct_and_time_one_at_a_time(
    cpu_pipelined: KforgeServer,
) -> None:
    d = cpu_pipelined.device_stats("cpu")
    assert d["depth"] == 3 and d["device_gate"]["max_shared"] == 3
    ids = []
    for i in range(4):
        body = timed_add()
        body["custom_kernel"] = triton_add(f" + 0.0 * {i + 1}")
        ids.append(submit(cpu_pipelined, "/compare", body))
    windows = []
    for job in cpu_pipelined.wait_jobs(ids):
        res = job["kernel_exec_result"]
        assert job["state"] == "success" and res["correctness"], job
        assert res["runtime"] > 0, res
        assert_speedup_given(res.get("speedup"), res)  # a speedup > 0: both sides timed
        grants = res["process"]["device_grants"]
        assert len(grants) == 1, grants
        windows.append((grants[0]["granted_at_ms"], grants[0]["released_at_ms"]))
    windows.sort()
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end <= start, windows
    # Idle: a job's teardown runs after its answer (holding a shared ticket), so wait for it too.
    gate = wait_gate(
        cpu_pipelined,
        lambda g: g["waiting"] == 0 and g["holder"] is None and g["shared_holders"] == [],
        "idle",
    )
    assert gate["holder"] is None and gate["shared_holders"] == []
    # Each job's replacement child warmed after its answer (Worker::after_job), registered
    # with the gate while it warmed: the pool is full again and no warm-up is left there.
    deadline = time.monotonic() + 60
    while True:
        cpu = cpu_pipelined.device_stats("cpu")
        python, gate = cpu["workers"]["python"], cpu["device_gate"]
        target = python["warm_children_target"]
        if python["processes_started"] >= python["jobs_run"] + target and gate["warming"] == 0:
            break
        assert time.monotonic() < deadline, (python, gate)
        time.sleep(0.1)


@cpu_only
def test_a_timed_job_waits_stopped_for_a_shared_holder_then_times_alone(
    cpu_pipelined: KforgeServer,
) -> None:
    slow = slow_job(cpu_pipelined)
    timed = submit(cpu_pipelined, "/compare", timed_add())
    # The timed job asked for the device alone: it waits for the slow job's shared phase.
    gate = wait_gate(cpu_pipelined, lambda g: g["waiting_exclusive"] == 1, "exclusive waiting")
    assert gate["holder"] is None and slow in gate["shared_holders"]
    assert timed not in gate["shared_holders"]  # its admission went back when it asked
    slow_job_view, timed_view = cpu_pipelined.wait_jobs([slow, timed])
    assert slow_job_view["state"] == "success", slow_job_view
    res = timed_view["kernel_exec_result"]
    assert timed_view["state"] == "success" and res["correctness"], timed_view
    assert res["process"]["device_wait_ms"] > 500, res["process"]
    assert len(res["process"]["device_grants"]) == 1


@cpu_only
def test_a_job_stopped_while_it_waits_for_its_timing_is_killed_at_its_timeout(
    cpu_pipelined: KforgeServer,
) -> None:
    slow = slow_job(cpu_pipelined)
    body = {**timed_add(), "timeout": 5}
    stuck = submit(cpu_pipelined, "/compare", body)
    wait_gate(cpu_pipelined, lambda g: g["waiting_exclusive"] == 1, "exclusive waiting")
    (stuck_view,) = cpu_pipelined.wait_jobs([stuck], timeout_s=60)
    res = stuck_view["kernel_exec_result"]
    assert res["error_kind"] == "timeout", stuck_view
    assert "device_grants" not in res["process"]  # never granted
    # Its request left the queue; the slow job still holds its shared grant and finishes.
    gate = cpu_gate(cpu_pipelined)
    assert gate["waiting"] == 0 and gate["holder"] is None, gate
    (slow_view,) = cpu_pipelined.wait_jobs([slow])
    assert slow_view["state"] == "success", slow_view


@cpu_only
def test_queued_jobs_warm_several_children_at_once() -> None:
    """Jobs queued beyond the warm children (a batch) raise the pool's target up to
    --max-warm-children-cpu, and the missing children warm side by side instead of one per
    finished job (Worker::expect_jobs): with a base of one, at most one would warm at a
    time."""
    srv = KforgeServer(
        devices="cpu",
        extra_args=[
            "--test-cpu-pipeline-depth",
            "2",
            "--warm-children-cpu",
            "1",
            "--max-warm-children-cpu",
            "3",
        ],
        admin_token=ADMIN,
    )
    srv.start()
    try:
        srv.wait_ready("cpu")
        # Two slow jobs hold both lanes (the warm child and one of their own), so a batch sent
        # next waits in the queue: its four jobs are queued at once (a cpu child warms in
        # ~0.1 s, faster than compares sent one by one would queue).
        slow = [
            submit(
                srv,
                "/evaluate",
                {
                    "kernel": torch_kernel(SLOW_CHECK),
                    "num_correct_trials": 2,
                    "measure_performance": False,
                },
            )
            for _ in range(2)
        ]
        wait_gate(srv, lambda g: set(slow) <= set(g["shared_holders"]), "both slow jobs admitted")
        body = timed_add()
        body["candidates"] = [triton_add(f" + 0.0 * {i + 1}") for i in range(4)]
        del body["custom_kernel"]
        with srv.client() as c:
            r = c.post("/batch", json={**body, "device": "cpu"})
        assert r.status_code == 200, r.text
        for view in r.json()["results"]:
            assert view["kernel_exec_result"]["correctness"], view
        for job in srv.wait_jobs(slow):
            assert job["state"] == "success", job
        python = srv.device_stats("cpu")["workers"]["python"]
        assert python["warm_children_target"] == 1 and python["warm_children_max"] == 3, python
        assert python["most_children_warming"] >= 2, python
    finally:
        srv.stop()
