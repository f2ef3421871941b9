"""Kill the server with SIGKILL in the middle of a batch: no accepted job may be lost."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from integration.kernels import model_source, torch_kernel
from integration.kforge_server import KforgeServer

TERMINAL = {"success", "failed", "cancelled"}


def test_sigkill_mid_batch_then_restart_finishes_every_job(tmp_path: Path) -> None:
    srv = KforgeServer(data_dir=tmp_path).start()
    srv.wait_ready()
    body = {
        "kernel": torch_kernel(model_source("import time\ntime.sleep(0.3)\nreturn x")),
        "num_correct_trials": 1,
        "measure_performance": False,
    }
    with srv.client() as c:
        ids = []
        for _ in range(8):
            r = c.post("/evaluate", params={"wait": "false"}, json=body)
            assert r.status_code == 202, r.text
            ids.append(r.json()["job_id"])
        # Let a couple finish so both finished and unfinished jobs cross the crash.
        deadline = time.monotonic() + 120
        while sum(c.get(f"/job/{i}").json()["state"] == "success" for i in ids) < 2:
            assert time.monotonic() < deadline, srv.log()
            time.sleep(0.05)
    srv.kill(signal.SIGKILL)

    again = KforgeServer(data_dir=tmp_path).start()
    try:
        with again.client() as c:
            deadline = time.monotonic() + 300
            while True:
                jobs = [c.get(f"/job/{i}") for i in ids]
                assert all(j.status_code == 200 for j in jobs)
                states = [j.json()["state"] for j in jobs]
                if all(s in TERMINAL for s in states):
                    break
                assert time.monotonic() < deadline, (states, again.log())
                time.sleep(0.1)
            assert states == ["success"] * len(ids), [j.json() for j in jobs]
            recovered = c.get("/stats").json()["jobs_recovered"]
            assert recovered >= 1
    finally:
        again.stop()


def test_a_data_directory_serves_one_server_at_a_time(tmp_path: Path) -> None:
    first = KforgeServer(data_dir=tmp_path).start()
    try:
        second = KforgeServer(data_dir=tmp_path)
        try:
            second.start(timeout_s=60)
            raise AssertionError("a second server started on the same data directory")
        except RuntimeError as e:
            assert "is in use by pid" in str(e)
    finally:
        first.stop()
