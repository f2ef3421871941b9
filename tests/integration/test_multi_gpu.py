"""Every GPU busy (issue 13): a server with two GPUs spreads jobs over both, runs a job pinned
to `cuda:1` there, and respects CUDA_VISIBLE_DEVICES.

Needs two GPUs (the device tool's two-GPU kinds: `MULTI_GPU=1 scripts/gpu-check.sh`); skipped
elsewhere. Which physical GPU a job ran on is checked by UUID (the worker's `child_device.uuid`
in /stats against nvidia-smi), not by index, since CUDA_VISIBLE_DEVICES renumbers them.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from integration.kernels import FAST_TIMING, TORCH_ADD_REF, torch_kernel, triton_add
from integration.kforge_server import KforgeServer


def gpu_uuids() -> list[str]:
    """The UUIDs of the GPUs this host shows (nvidia-smi order), [] without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


UUIDS = gpu_uuids()
pytestmark = pytest.mark.skipif(len(UUIDS) < 2, reason="needs two GPUs")


def wait_device_ready(srv: KforgeServer, device: str) -> dict[str, Any]:
    """The device's /stats entry once its Python worker has a warm child."""
    srv.wait_ready(device)
    return srv.device_stats(device)


@pytest.fixture(scope="module")
def two_gpus() -> Any:
    srv = KforgeServer(devices="gpus")
    srv.start()
    try:
        for device in ("cuda:0", "cuda:1"):
            wait_device_ready(srv, device)
        yield srv
    finally:
        srv.stop()


def test_the_server_serves_both_gpus_each_on_its_own_card(two_gpus: KforgeServer) -> None:
    uuids = {
        d: wait_device_ready(two_gpus, d)["workers"]["python"]["child_device"]["uuid"]
        for d in ("cuda:0", "cuda:1")
    }
    assert uuids == {"cuda:0": UUIDS[0], "cuda:1": UUIDS[1]}, (uuids, UUIDS)


def test_a_job_pinned_to_cuda_1_runs_there(two_gpus: KforgeServer) -> None:
    body = {"kernel": torch_kernel(TORCH_ADD_REF), "timing": FAST_TIMING, "device": "cuda:1"}
    with two_gpus.client() as c:
        r = c.post("/evaluate", json=body)
    assert r.status_code == 200, r.text
    job = r.json()
    res = job["kernel_exec_result"]
    assert res["correctness"], res
    assert job["device"] == "cuda:1", job
    assert res["metadata"]["device"] == "cuda:1" and res["metadata"]["gpu_id"] == 1, res["metadata"]


def test_jobs_for_any_gpu_spread_over_both(two_gpus: KforgeServer) -> None:
    ids = []
    with two_gpus.client() as c:
        for i in range(8):
            kernel = triton_add(extra=f" + 0.0 * {i}")  # a source (and compile) of its own
            r = c.post(
                "/evaluate",
                params={"wait": "false"},
                json={"kernel": kernel, "timing": FAST_TIMING, "device": "gpu"},
            )
            assert r.status_code == 202, r.text
            ids.append(r.json()["job_id"])
    jobs = two_gpus.wait_jobs(ids)
    assert all(j["state"] == "success" and j["kernel_exec_result"]["correctness"] for j in jobs)
    used = sorted({j["device"] for j in jobs})
    assert used == ["cuda:0", "cuda:1"], [j["device"] for j in jobs]


def test_cuda_visible_devices_is_respected() -> None:
    """With CUDA_VISIBLE_DEVICES naming the second GPU, the server sees one GPU, cuda:0, and
    it is that card."""
    srv = KforgeServer(devices="gpus", env={"CUDA_VISIBLE_DEVICES": UUIDS[1]})
    srv.start()
    try:
        entry = wait_device_ready(srv, "cuda:0")
        with srv.client() as c:
            names = [d["name"] for d in c.get("/stats").json()["devices"]]
            r = c.post(
                "/evaluate",
                json={"kernel": torch_kernel(TORCH_ADD_REF), "timing": FAST_TIMING},
            )
        assert names == ["cuda:0"], names
        assert entry["workers"]["python"]["child_device"]["uuid"] == UUIDS[1], entry
        assert r.status_code == 200 and r.json()["kernel_exec_result"]["correctness"], r.text
    finally:
        srv.stop()
