"""The commands a new user runs, with their default paths, as root (every GPU container's and
cloud VM's default shell): `kforge mcp` and `kforge bench` keep their data under
~/.cache/kforge, and root's home is 0700. Jailed jobs run as uids of their own, and these
commands used to refuse such a data directory at start (`kforge mcp` by closing the pipe
before the handshake). `kforge serve`'s default (.kforge in the working directory, below
root's home) is the same case: tests/hostile/test_jail.py serves jailed jobs from a data
directory below a 0700 directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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
