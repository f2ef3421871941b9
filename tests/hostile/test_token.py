"""Issue #8 item 7: the API token leaked through /proc/<server>/cmdline (--token) and
/proc/<server>/environ (KFORGE_TOKEN). Now the server overwrites both in place once parsed,
reads --token-file, and makes itself non-dumpable (its /proc files root-owned)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hostile.conftest import wait_until
from integration.kforge_server import KforgeServer, kforge_binary

TOKEN = "s3cret-T0KEN-for-proc-tests"


def proc_file(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


def assert_token_not_visible(pid: int) -> None:
    cmdline = proc_file(pid, "cmdline")
    assert TOKEN.encode() not in cmdline, cmdline
    try:
        environ = proc_file(pid, "environ")
    except PermissionError:
        return  # another uid: not readable at all, which is the point
    assert TOKEN.encode() not in environ
    assert b"KFORGE_TOKEN=" + TOKEN.encode() not in environ


def test_token_flag_is_wiped_from_cmdline(make_server) -> None:
    srv = make_server("--token", TOKEN, token=TOKEN)
    assert srv.proc is not None
    assert_token_not_visible(srv.proc.pid)
    assert b"--token\0***" in proc_file(srv.proc.pid, "cmdline")
    with srv.client() as c:
        assert c.get("/health").status_code == 200  # the token still works


def test_token_equals_form_is_wiped(make_server) -> None:
    srv = make_server(f"--token={TOKEN}", token=TOKEN)
    assert srv.proc is not None
    assert_token_not_visible(srv.proc.pid)
    with srv.client() as c:
        assert c.get("/health").status_code == 200


def test_token_variable_is_wiped_from_environ(make_server) -> None:
    srv = make_server(env={"KFORGE_TOKEN": TOKEN}, token=TOKEN)
    assert srv.proc is not None
    assert_token_not_visible(srv.proc.pid)
    with srv.client() as c:
        assert c.get("/health").status_code == 200
        assert c.get("/health", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_token_file(make_server, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    srv = make_server("--token-file", str(token_file), token=TOKEN)
    assert srv.proc is not None
    assert_token_not_visible(srv.proc.pid)
    with srv.client() as c:
        assert c.get("/health").status_code == 200
    assert "may be read or written" not in srv.log()


def start_refused(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kforge_binary()), "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
         "--devices", "cpu", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("flag", ["--token-file", "--admin-token-file", "--tokens-file"])
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602])
def test_a_token_file_others_may_read_or_write_is_refused(tmp_path: Path, flag: str,
                                                          mode: int) -> None:  # fmt: skip
    """Issue #37: a loose token file was only warned about; now the server does not start."""
    loose = tmp_path / "loose"
    loose.write_text(TOKEN if flag != "--tokens-file" else f"alice user {TOKEN}\n")
    loose.chmod(mode)
    r = start_refused(tmp_path, flag, str(loose))
    assert r.returncode == 2, r.stderr
    assert str(loose) in r.stderr and f"mode {mode:04o}" in r.stderr, r.stderr
    assert f"chmod 600 {loose}" in r.stderr and "--allow-loose-token-file" in r.stderr, r.stderr
    assert TOKEN not in r.stderr


def test_allow_loose_token_file_warns_instead(make_server, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.write_text(TOKEN)
    loose.chmod(0o644)
    srv = make_server("--token-file", str(loose), "--allow-loose-token-file", token=TOKEN)
    assert wait_until(lambda: "may be read or written by its group or other users" in srv.log(), 10)
    with srv.client() as c:
        assert c.get("/health").status_code == 200


def test_token_file_and_token_together_are_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    r = subprocess.run(
        [str(kforge_binary()), "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
         "--devices", "cpu", "--token-file", str(token_file), "--token", "other"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 2
    assert "give the token once" in r.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to start the server as another uid")  # fmt: skip
def test_server_is_not_dumpable() -> None:
    """Run as nobody, the server's /proc files must belong to root (PR_SET_DUMPABLE 0), so
    other processes of its own uid cannot read its environment or memory either."""
    data = Path(tempfile.mkdtemp(prefix="kforge-nobody-"))  # /tmp: reachable by nobody
    data.chmod(0o777)
    port_file = data / "port"
    args = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            str(kforge_binary()), "serve", "--port", "0", "--port-file", str(port_file),
            "--data-dir", str(data), "--devices", "cpu", "--token", TOKEN]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert wait_until(port_file.exists, 60), proc.stderr.read().decode() if proc.stderr else ""
        status = os.stat(f"/proc/{proc.pid}/environ")
        assert status.st_uid == 0, "the server is dumpable: its /proc files belong to its uid"
        assert_token_not_visible(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_mcp_forwarder_wipes_its_token_too(server: KforgeServer, how: str) -> None:
    """`kforge mcp --server URL --token T` is a long-lived process next to an editor."""
    args = [str(kforge_binary()), "mcp", "--server", server.url, "--log-level", "error"]
    env = dict(os.environ)
    if how == "flag":
        args += ["--token", TOKEN]
    else:
        env["KFORGE_TOKEN"] = TOKEN
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1  # parsed and running
        assert_token_not_visible(proc.pid)
    finally:
        proc.kill()
        proc.wait()
