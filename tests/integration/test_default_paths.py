"""The commands a new user runs, with their default paths, as root (every GPU container's and
cloud VM's default shell): `kforge mcp` and `kforge bench` keep their data under
~/.cache/kforge, and root's home is 0700. Jailed jobs run as uids of their own, and these
commands used to refuse such a data directory at start (`kforge mcp` by closing the pipe
before the handshake). `kforge serve`'s default (.kforge in the working directory, below
root's home) is the same case (tests/hostile/test_jail.py also checks that such a data
directory shows the jailed processes nothing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from integration.kernels import TORCH_ADD_REF, torch_kernel
from integration.kforge_server import device_under_test, kforge_binary
from integration.mcp_support import StdioPeer, call, evaluate_args, worker_env


@pytest.fixture
def locked_home() -> Iterator[Path]:
    """A home directory like root's: mode 0700, outside /tmp (below /tmp the jail rebuilds
    paths in a tmpfs of its own, which would hide the case)."""
    home = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="kforge-home-"))
    home.chmod(0o700)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def home_env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_CACHE_HOME": ""}


def test_mcp_with_default_paths_serves_a_job(locked_home: Path) -> None:
    peer = StdioPeer(None, env=home_env(locked_home))
    try:
        init = peer.initialize()
        assert init["result"]["serverInfo"]["name"] == "kforge", init
        call(peer, 1, "evaluate_kernel", evaluate_args())
        answer = peer.answer_to(1, timeout_s=600)["result"]
        assert not answer.get("isError"), answer
        result = answer["structuredContent"]["kernel_exec_result"]
        assert result["correctness"] is True, result
        assert (locked_home / ".cache" / "kforge" / "mcp-data" / "kforge.db").exists()
        assert peer.close_and_wait() == 0
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()


def test_bench_with_default_paths_runs(locked_home: Path) -> None:
    out = locked_home / "report"
    r = subprocess.run(
        [str(kforge_binary()), "bench", "--ops", "add", "--sizes", "small", "--runs", "1",
         "--correct-trials", "1", "--device", device_under_test(), "--out", str(out)],
        capture_output=True, text=True, timeout=1200, check=False,
        env={**os.environ, **worker_env(), **home_env(locked_home)},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    report = json.loads((out / "bench.json").read_text())
    assert report["ops"], report
    assert (locked_home / ".cache" / "kforge" / "bench-data" / "kforge.db").exists()


def test_mcp_that_cannot_start_answers_requests_with_the_reason(tmp_path: Path) -> None:
    # A data directory that cannot be made: the client gets the reason as a JSON-RPC error
    # to its initialize (and to any later request), not a closed pipe.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    peer = StdioPeer(tmp_path / "a-file" / "data")
    try:
        answer = peer.initialize()
        error = answer["error"]
        assert error["code"] == -32603, answer
        assert "kforge mcp cannot start" in error["message"], error
        assert str(blocker) in error["message"], error
        call(peer, 7, "evaluate_kernel", evaluate_args())
        assert "cannot start" in peer.answer_to(7)["error"]["message"]
        assert peer.close_and_wait() == 2
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()


def test_serve_with_its_default_data_dir_serves_a_job(locked_home: Path) -> None:
    # `kforge serve` keeps its data in ./.kforge: from a project below root's 0700 home.
    project = locked_home / "project"
    project.mkdir()
    port_file = locked_home / "port"
    log = (locked_home / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(kforge_binary()), "serve", "--port", "0", "--port-file", str(port_file),
         "--devices", device_under_test()],
        cwd=project, stdout=log, stderr=log, env={**os.environ, **worker_env()},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not port_file.exists():
            assert proc.poll() is None, (locked_home / "server.log").read_text()
            assert time.monotonic() < deadline, (locked_home / "server.log").read_text()
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        body = {"kernel": torch_kernel(TORCH_ADD_REF), "num_correct_trials": 1,
                "measure_performance": False}  # fmt: skip
        with httpx.Client(base_url=url, timeout=600) as c:
            r = c.post("/evaluate", json=body)
            assert r.status_code == 200, r.text
            assert r.json()["kernel_exec_result"]["correctness"] is True, r.text
            assert c.get("/health").json()["sandbox"]["jailing"] == (os.geteuid() == 0)
        assert (project / ".kforge" / "kforge.db").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
