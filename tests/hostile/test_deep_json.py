"""Issue #8 item 5: JSON nested ~100k levels deep (about 200 KB) overflowed the stack in a
recursive copy, on every entry point. Now the parser refuses it at the limit (64 by default,
--max-json-depth): 400 on REST, -32700 on MCP, and the process lives on."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator

import httpx
import pytest

from hostile.conftest import alive
from integration.kforge_server import KforgeServer, kforge_binary

DEPTH = 100_000
DEEP = "[" * DEPTH + "]" * DEPTH


def deep_in(prefix: str, suffix: str) -> bytes:
    return (prefix + DEEP + suffix).encode()


def test_rest_bodies(server: KforgeServer) -> None:
    bodies = {
        "/evaluate": deep_in('{"kernel":', "}"),
        "/compare": deep_in('{"ref_kernel":{"source_code":"x","kernel_type":"torch"},"x":', "}"),
        "/": deep_in("", ""),
        "/job/0123456789abcdef/cancel": deep_in('{"reason":', "}"),
        "/admin/cleanup-jobs": deep_in('{"max_age_hours":', "}"),
    }
    with server.client() as c:
        for path, body in bodies.items():
            r = c.post(path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (path, r.text[:300])
            assert "nested deeper than the limit of 64" in r.json()["message"], path
    assert alive(server)


def depth_body(levels: int) -> dict:
    """An /evaluate body nested `levels` deep in all (root, kernel and metadata included)."""
    inner = json.loads("[" * (levels - 3) + "]" * (levels - 3))
    return {"kernel": {"source_code": "x", "kernel_type": "torch", "metadata": {"m": inner}},
            "measure_performance": False}  # fmt: skip


def test_the_limit_is_64_by_default_and_configurable(server: KforgeServer, make_server) -> None:
    deeper = make_server("--max-json-depth", "100")
    for srv, limit in ((server, 64), (deeper, 100)):
        with srv.client() as c:
            ok = c.post("/evaluate", params={"wait": "false"}, json=depth_body(limit))
            assert ok.status_code == 202, ok.text
            refused = c.post("/evaluate", params={"wait": "false"}, json=depth_body(limit + 1))
            assert refused.status_code == 400, refused.text
            assert f"limit of {limit} levels" in refused.json()["message"]
    r = subprocess.run([str(kforge_binary()), "serve", "--max-json-depth", "0"],
                       capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert r.returncode != 0 and "--max-json-depth" in r.stderr


def mcp_headers(session: str | None = None) -> dict[str, str]:
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        h["Mcp-Session-Id"] = session
        h["MCP-Protocol-Version"] = "2025-06-18"
    return h


def test_mcp_http_initialize_without_a_session_and_inside_one(server: KforgeServer) -> None:
    with server.client() as c:
        r = c.post("/mcp", content=deep_in(
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":', "}}"),
            headers=mcp_headers())  # fmt: skip
        assert r.status_code == 400, r.text[:300]
        assert r.json()["error"]["code"] == -32700
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
        r = c.post("/mcp", json=init, headers=mcp_headers())
        assert r.status_code == 200, r.text
        session = r.headers["mcp-session-id"]
        r = c.post("/mcp", content=deep_in(
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":',
            "}}"), headers=mcp_headers(session))  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        r = c.post("/mcp", content=deep_in("", ""), headers=mcp_headers(session))  # a batch
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        ping = c.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
                      headers=mcp_headers(session))  # fmt: skip
        assert ping.status_code == 200, ping.text
    assert alive(server)


def run_stdio(lines: list[bytes], *args: str) -> list[dict]:
    proc = subprocess.run(
        [str(kforge_binary()), "mcp", "--devices", "cpu", "--log-level", "error", *args],
        input=b"\n".join(lines) + b"\n", capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_stdio_mcp(tmp_path) -> None:
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
    replies = run_stdio(
        [deep_in('{"jsonrpc":"2.0","id":1,"method":"initialize","params":', "}"), ping],
        "--data-dir", str(tmp_path / "mcp-data"),
    )  # fmt: skip
    assert replies[0]["error"]["code"] == -32700, replies[0]
    assert "nested deeper" in replies[0]["error"]["message"]
    assert replies[1]["id"] == 2 and "result" in replies[1]


class DeepReplies(http.server.BaseHTTPRequestHandler):
    """A fake `kforge serve` whose every answer is 100k levels deep."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        body = deep_in('{"job_id":', "}")
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def deep_server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), DeepReplies)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_stdio_mcp_forwarding_to_a_hostile_server(deep_server: str) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "evaluate_kernel",
                       "arguments": {"kernel_source": "x", "kernel_type": "torch"}}}  # fmt: skip
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    replies = run_stdio([json.dumps(m).encode() for m in (init, call, ping)],
                        "--server", deep_server)  # fmt: skip
    by_id = {r.get("id"): r for r in replies}
    assert by_id[2]["result"]["isError"] is True, by_id[2]
    assert "nested deeper" in json.dumps(by_id[2]), by_id[2]
    assert "result" in by_id[3]


PLAIN_MODEL = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return x

def get_inputs():
    return [torch.randn(4)]

def get_init_inputs():
    return []
"""

# Kernel code that writes `frames` (JSON texts) to every socket it can reach, its own
# protocol socket among them, as length-prefixed frames.
FRAME_WRITER = """
import os, stat, struct

def _write_frames(frames):
    for fd in range(3, 1100):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            for text in frames:
                body = text.encode()
                os.write(fd, struct.pack(">I", len(body)) + body)
        except OSError:
            pass
"""


def run_frame_writer(srv: KforgeServer, frames: list[str]) -> dict:
    source = FRAME_WRITER + f"\n_write_frames({frames!r})\n" + PLAIN_MODEL
    body = {"kernel": {"source_code": source, "kernel_type": "torch"},
            "measure_performance": False, "timeout": 60}  # fmt: skip
    with srv.client() as c:
        r = c.post("/evaluate", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def assert_device_still_runs_jobs(srv: KforgeServer) -> None:
    body = {"kernel": {"source_code": PLAIN_MODEL, "kernel_type": "torch"},
            "measure_performance": False}  # fmt: skip
    with srv.client() as c:
        r = c.post("/evaluate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["kernel_exec_result"]["correctness"] is True, r.text


def test_worker_frames_nested_100k_deep(server: KforgeServer) -> None:
    """Before: the supervisor parsed the frame and copied `partial` recursively: stack
    overflow, server gone. After: a protocol error of that job."""
    deep = "[" * DEPTH + "]" * DEPTH
    job = run_frame_writer(server, ['{"type":"progress","phase":"x","partial":{"d":' + deep + "}}"])
    assert job["state"] in ("success", "failed"), job
    assert alive(server)
    assert_device_still_runs_jobs(server)


def test_worker_frames_with_wrong_types(server: KforgeServer) -> None:
    """Fields the supervisor reads as strings sent as numbers: the job must still end (it
    stayed "running" for ever when the worker threw) and the device keep working."""
    job = run_frame_writer(server, ['{"type":5}'])
    assert job["state"] in ("success", "failed"), job
    assert alive(server)
    assert_device_still_runs_jobs(server)


def test_httpx_sees_the_limit_named(server: KforgeServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post("/evaluate", content=b"[" * 65 + b"]" * 65)
    assert r.status_code == 400
    assert "--max-json-depth" in r.json()["message"]
