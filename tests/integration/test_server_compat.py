"""The server's set-up as the kernel evaluation server's users have it (its flags and
environment variables), job retention, and the OpenAPI document against the real routes."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from integration.kernels import model_source, torch_kernel
from integration.kforge_server import KforgeServer, kforge_binary

QUICK = {
    "kernel": torch_kernel(model_source("return x * 2")),
    "num_correct_trials": 1,
    "measure_performance": False,
}


@contextmanager
def running(ready: bool = True, **kwargs: Any) -> Iterator[KforgeServer]:
    srv = KforgeServer(**kwargs).start()
    try:
        if ready:  # (waits through GET /stats, which --mode mcp does not serve)
            srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def test_finished_jobs_are_removed_after_the_retention(tmp_path: Any) -> None:
    sleepy = {
        "kernel": torch_kernel(model_source("time.sleep(60)\nreturn x", prelude="import time"))
    }
    with running(extra_args=["--job-retention", "2s"]) as srv, srv.client() as c:
        job = c.post("/evaluate", json=QUICK).json()
        assert job["state"] == "success", job
        running_id = c.post("/evaluate", params={"wait": "false"}, json=sleepy).json()["job_id"]
        assert c.get(f"/job/{job['job_id']}").status_code == 200  # not yet
        deadline = time.monotonic() + 30
        while c.get(f"/job/{job['job_id']}").status_code == 200:
            assert time.monotonic() < deadline, "a finished job outlived its retention"
            time.sleep(0.2)
        assert "job retention: deleted" in srv.log()
        # Unfinished jobs are never removed.
        assert c.get(f"/job/{running_id}").json()["state"] in ("queued", "running")
        c.post(f"/job/{running_id}/cancel")


def test_retention_must_be_a_duration() -> None:
    r = subprocess.run(
        [str(kforge_binary()), "serve", "--devices", "cpu", "--job-retention", "2 days"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert r.returncode != 0
    assert "--job-retention: must be 0 or a duration such as 3600, 90m, 24h or 7d" in r.stderr


def test_old_servers_environment_and_mode(tmp_path: Any) -> None:
    cupy_dir = tmp_path / "cupy-cache"
    env = {
        "GPU_TYPE": "H100",
        "LOG_LEVEL": "WARNING",
        "CUPY_KERNEL_CACHE_DIR": str(cupy_dir),
        "ENABLE_DEVICE_METRICS": "true",
        # The old server's CuPy cache is one for all kernels: kforge keeps it for candidates
        # only when caches are shared (with the default, isolated, every job has its own).
        "KFORGE_KERNEL_CACHE": "shared",
    }
    print_env = model_source(
        "print('cupy cache:', os.environ.get('CUPY_CACHE_DIR'))\nreturn x",
        prelude="import os",
    )
    with running(env=env, log_level=None, extra_args=["--mode", "fastapi"]) as srv:
        with srv.client() as c:
            r = c.post("/evaluate", json={**QUICK, "kernel": torch_kernel(print_env)})
            assert r.status_code == 200, r.text
            assert r.json()["gpu_type"] == "h100" and r.headers["x-gpu-type"] == "h100"
            assert f"cupy cache: {cupy_dir}" in r.json()["kernel_exec_result"]["stdout"]
            assert "gpu_type" not in c.get(f"/job/{r.json()['job_id']}").json()
            assert c.post("/mcp", json={}).status_code == 404  # fastapi = REST only
            assert "/mcp" not in c.get("/openapi.json").json()["paths"]
        log = srv.log()
    assert " info " not in log and "listening" not in log  # LOG_LEVEL=WARNING applied


def test_device_metrics_flag_values() -> None:
    r = subprocess.run(
        [str(kforge_binary()), "serve", "--devices", "cpu", "--port", "0"],
        env={"ENABLE_DEVICE_METRICS": "maybe", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert r.returncode != 0 and "--device-metrics" in r.stderr


def test_openapi_document_is_valid_and_matches_the_routes(server: KforgeServer) -> None:
    from openapi_spec_validator import validate

    with server.client() as c:
        doc = c.get("/openapi.json").json()
        validate(doc)  # raises on an invalid OpenAPI 3.1 document
        for path, item in doc["paths"].items():
            concrete = path.replace("{job_id}", "0123456789abcdef").replace("{batch_id}", "b-0")
            concrete = concrete.replace("{asset}", "style.css")  # a file the UI serves
            concrete = concrete.replace("{session_id}", "wb_0").replace("{report_id}", "br_0")
            unknown_id = path.startswith(
                ("/job/", "/batch/", "/workbench/sessions/", "/bench/reports/")
            )
            for method in item:
                if path == "/jobs/events":  # a stream that lasts: its head says it is there
                    with c.stream(method.upper(), concrete) as events:
                        assert events.status_code == 200, (method, path)
                        assert events.headers["content-type"].startswith("text/event-stream")
                    continue
                # (an age no job has: the session's server keeps its jobs)
                body = b'{"max_age_hours": 100000}' if "cleanup" in path else b"{}"
                r = c.request(method.upper(), concrete, content=body)
                assert r.status_code not in (404, 405) or unknown_id, (method, path)
                if unknown_id:  # an unknown job or batch, not an unknown route
                    assert r.json()["code"] == "not_found", (method, path, r.text)
        html = c.get("/docs")
        assert html.headers["content-type"].startswith("text/html")
        assert "<script" not in html.text and "/compare" in html.text
        assert c.get("/no/such/route").status_code == 404


@pytest.mark.parametrize("mode", ["rest", "mcp"])
def test_openapi_follows_the_mode(mode: str) -> None:
    with running(ready=mode != "mcp", extra_args=["--mode", mode]) as srv, srv.client() as c:
        paths = c.get("/openapi.json").json()["paths"]
    assert ("/mcp" in paths) == (mode == "mcp")
    assert ("/evaluate" in paths) == (mode == "rest")
    assert "/openapi.json" in paths and "/docs" in paths
