"""Hostile tests: the real `kforge serve` binary attacked as issue #8 describes, on the `cpu`
device. Each test starts its own server (port 0, a temporary data directory) when it needs
special flags; `server` is one shared warm server for the cases that need none.

README.md lists every case with its issue item and what it showed before and after the fix.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.kforge_server import KforgeServer


@pytest.fixture(scope="session")
def server() -> Iterator[KforgeServer]:
    """One warm server on the cpu device for the cases that need no special flags."""
    srv = KforgeServer(devices="cpu", log_level="info").start()
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()
        print(srv.log()[-3000:])


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., KforgeServer]]:
    """Starts servers with extra flags (stopped at the end of the test)."""
    started: list[KforgeServer] = []

    def start(*args: str, env: dict[str, str] | None = None, token: str | None = None,
              ready: bool = False, nofile: int | None = None) -> KforgeServer:  # fmt: skip
        data_dir = tmp_path / f"server{len(started)}"
        data_dir.mkdir()
        wrapper = ["prlimit", f"--nofile={nofile}:{nofile}", "--"] if nofile else None
        srv = KforgeServer(data_dir=data_dir, devices="cpu", extra_args=list(args), env=env,
                           token=token, log_level="info", wrapper=wrapper)  # fmt: skip
        started.append(srv)
        srv.start()
        if ready:
            srv.wait_ready()
        return srv

    yield start
    for srv in started:
        srv.stop()


def alive(srv: KforgeServer) -> bool:
    """The server process runs and answers /health."""
    if srv.proc is None or srv.proc.poll() is not None:
        return False
    with srv.client(timeout_s=30) as c:
        return c.get("/health").status_code == 200


def raw_request(port: int, data: bytes, timeout_s: float = 10.0) -> bytes:
    """Sends raw bytes on a fresh connection and returns everything read until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def wait_until(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def mcp_session(c: httpx.Client) -> dict[str, str]:
    """Opens an MCP session (protocol 2025-06-18, JSON answers) for `c`'s token; the headers
    of its later requests."""
    headers = {"Accept": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    r = c.post("/mcp", json=init, headers=headers)
    assert r.status_code == 200, r.text
    return {**headers, "Mcp-Session-Id": r.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip


def mcp_call(c: httpx.Client, session: dict[str, str], name: str,
             arguments: dict[str, Any]) -> httpx.Response:  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}  # fmt: skip
    return c.post("/mcp", json=call, headers=session)
