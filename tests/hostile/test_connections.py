"""Issue #8 item 9: 1,100 idle connections with RLIMIT_NOFILE 1024 locked out every new
client; header dribblers lived 60 s, not the 30 s read timeout; the loopback check was the
string prefix "127.". Now connections are capped below the open-file limit with the idlest
closed first, a head must arrive within --header-timeout-s of its first byte, and --host is
resolved and its address checked."""

from __future__ import annotations

import resource
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from hostile.conftest import wait_until
from integration.kforge_server import KforgeServer, kforge_binary


def open_idle(port: int, n: int) -> list[socket.socket]:
    sockets = []
    for _ in range(n):
        try:
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    return sockets


def test_idle_connection_flood_does_not_lock_out_new_clients(make_server) -> None:
    # The setting: RLIMIT_NOFILE 1024 for the server, 1,100 idle connections.
    srv: KforgeServer = make_server(nofile=1024)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    flood = open_idle(srv.port, 1100)
    try:
        assert len(flood) == 1100
        started = time.monotonic()
        with httpx.Client(base_url=srv.url, timeout=10) as c:
            for _ in range(5):
                assert c.get("/health").status_code == 200
        assert time.monotonic() - started < 10
        assert "at --max-connections" in srv.log()
    finally:
        for s in flood:
            s.close()


def test_busy_server_refuses_extra_connections_fast(make_server) -> None:
    srv: KforgeServer = make_server("--max-connections", "8")
    held = []
    try:
        # Eight connections each in the middle of a request body: busy, never evicted.
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(b"POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
            held.append(s)
        time.sleep(0.5)
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as extra:
            answer = extra.recv(4096)
        assert time.monotonic() - started < 2
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"--max-connections" in answer
    finally:
        for s in held:
            s.close()


def test_header_dribbler_dies_at_the_header_timeout(make_server) -> None:
    srv: KforgeServer = make_server("--header-timeout-s", "2", "--idle-timeout-s", "60")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        started = time.monotonic()
        s.sendall(b"GET /health HTTP/1.1\r\n")
        closed = False
        while time.monotonic() - started < 20 and not closed:
            try:
                s.sendall(b"X")
                s.settimeout(0.2)
                closed = s.recv(1) == b""
            except TimeoutError:
                pass
            except OSError:
                closed = True
        elapsed = time.monotonic() - started
    assert closed
    assert 1.5 < elapsed < 6, elapsed
    # An idle connection is not a dribbler: it lives on past the header timeout.
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as idle:
        idle.settimeout(3.5)
        with pytest.raises(TimeoutError):
            idle.recv(1)


def serve_exit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kforge_binary()), "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
         "--devices", "cpu", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_host_is_resolved_not_matched_by_prefix(tmp_path: Path) -> None:
    # Looks like 127.0.0.1 to a prefix check; ".invalid" never resolves (RFC 6761).
    r = serve_exit(tmp_path, "--host", "127.0.0.1.invalid")
    assert r.returncode == 2
    assert "cannot resolve '127.0.0.1.invalid'" in r.stderr, r.stderr
    r = serve_exit(tmp_path, "--host", "10.255.255.1")
    assert r.returncode == 2 and "without an API token" in r.stderr, r.stderr
    # A name of this host that resolves to a non-loopback address needs a token too.
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        return
    if not address.startswith("127."):
        r = serve_exit(tmp_path, "--host", name)
        assert r.returncode == 2 and "without an API token" in r.stderr, r.stderr


def test_a_loopback_name_needs_no_token(make_server) -> None:
    srv: KforgeServer = make_server("--host", "localhost")
    assert wait_until(lambda: "listening on" in srv.log(), 10)
