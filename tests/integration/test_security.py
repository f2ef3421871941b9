"""Security defaults of `kforge serve`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from integration.kforge_server import KforgeServer, kforge_binary


def test_refuses_non_loopback_without_token(tmp_path: Path) -> None:
    r = subprocess.run(
        [str(kforge_binary()), "serve", "--host", "0.0.0.0", "--port", "0",
         "--data-dir", str(tmp_path), "--devices", "cpu"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode != 0
    assert "without an API token" in r.stderr


def test_token_is_required_when_set(tmp_path: Path) -> None:
    srv = KforgeServer(data_dir=tmp_path, extra_args=["--token", "t0ps3cret"]).start()
    try:
        with srv.client() as c:
            assert c.get("/health").status_code == 401
            bad = c.get("/health", headers={"Authorization": "Bearer nope"})
            assert bad.status_code == 401
            ok = c.get("/health", headers={"Authorization": "Bearer t0ps3cret"})
            assert ok.status_code == 200
            # The probes an orchestrator sends without a token: a status word, nothing else.
            live = c.get("/livez")
            assert live.status_code == 200 and live.json() == {"status": "alive"}
            ready = c.get("/readyz")
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}
            assert c.post("/livez").status_code == 401
    finally:
        srv.stop()


def test_token_never_reaches_kernel_code(tmp_path: Path) -> None:
    srv = KforgeServer(
        data_dir=tmp_path, env={"KFORGE_TOKEN": "t0ps3cret"}, token="t0ps3cret"
    ).start()
    source = """
import os, torch
class Model(torch.nn.Module):
    def forward(self, x):
        leaked = [k for k, v in os.environ.items() if 't0ps3cret' in v]
        if leaked:
            raise RuntimeError('leaked: ' + ','.join(leaked))
        return x
def get_inputs():
    return [torch.randn(8)]
def get_init_inputs():
    return []
"""
    try:
        srv.wait_ready()
        body = {"kernel": {"source_code": source, "kernel_type": "torch"},
                "measure_performance": False}  # fmt: skip
        with srv.client() as c:
            r = c.post("/evaluate", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["kernel_exec_result"]["correctness"] is True, r.json()
    finally:
        srv.stop()
