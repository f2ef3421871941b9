"""The device's gate without pipelining (the default depth 1), through the real server.

Jobs run one at a time, but a job's worker starts the replacement of the process it took
while the job runs (a Python child) or as it ends (a native `cuda` process), so a process
warms up (a CUDA context, warm-up launches) beside the next timed region unless something
stops it: on an H100 that slowed a torch reference timed beside a warming child by 25-30 %.
Every device therefore has a gate at depth 1 too: a job's timed region takes it alone
(`process.device_grants`), and every process is registered with it from its start until a
job takes it (`device_gate.warmed` counts them), so it is stopped (SIGSTOP) while a timed
region runs. That a registered process is stopped is tested in tests/unit/workers
(DeviceGrantTest.AChildWarmingBesideTheJobsIsStoppedWhileAnExclusiveGrantIsIn).
"""

from __future__ import annotations

import time

from integration.kernels import FAST_TIMING, TORCH_ADD_REF, torch_kernel, triton_add
from integration.kforge_server import KforgeServer, device_under_test

DEVICE = device_under_test()


def test_without_pipelining_a_timed_job_takes_the_device_alone(server: KforgeServer) -> None:
    body = {
        "custom_kernel": triton_add(),
        "ref_kernel": torch_kernel(TORCH_ADD_REF),
        "timing": FAST_TIMING,
        "num_correct_trials": 1,
        "device": DEVICE,
    }
    with server.client() as c:
        r = c.post("/compare", json=body)
    assert r.status_code == 200, r.text
    res = r.json()["kernel_exec_result"]
    assert res["correctness"] and res["runtime"] > 0, res
    grants = res["process"]["device_grants"]
    assert len(grants) == 1, grants  # the judge's timed regions, under one grant
    assert grants[0]["granted_at_ms"] <= grants[0]["released_at_ms"], grants
    d = server.device_stats(DEVICE)
    assert d["depth"] == 1 and "pipeline_depth" not in d["facts"], d
    gate = d["device_gate"]
    assert gate["max_shared"] == 1 and gate["exclusive_grants"] >= 1, gate
    # Given back (another test's job left running may hold it a while: the server is shared).
    deadline = time.monotonic() + 120
    while gate["holder"] is not None or gate["waiting"] != 0:
        assert time.monotonic() < deadline, gate
        time.sleep(0.1)
        gate = server.device_stats(DEVICE)["device_gate"]


def test_without_pipelining_every_process_warms_up_registered_with_the_gate(
    server: KforgeServer,
) -> None:
    # Both workers' processes, started at start-up and as jobs take them: each registered
    # once, until a job takes it (a waiting one is idle: stopping it costs nothing).
    deadline = time.monotonic() + 120
    while True:
        d = server.device_stats(DEVICE)
        started = sum(w["processes_started"] for w in d["workers"].values())
        # A kept judge's warm-ups (a spare woken by its job, the judge while parked) are
        # registered too: docs/security.md "A judge serves several jobs".
        kept = sum(w.get("kept_judge_gate_registrations_total", 0) for w in d["workers"].values())
        gate = d["device_gate"]
        if gate["warmed"] == started + kept:
            break
        assert time.monotonic() < deadline, (gate, d["workers"])
        time.sleep(0.1)
    assert started >= 2, d["workers"]
    waiting = sum(
        w["warm_children_target"] + w.get("judges_parked_now", 0) for w in d["workers"].values()
    )
    assert gate["warming"] <= waiting, (gate, d["workers"])
