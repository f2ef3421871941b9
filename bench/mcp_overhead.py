"""What MCP adds on top of the engine: `tools/call get_server_stats` round trips over Streamable
HTTP and over stdio, against the same work through the REST API (`GET /stats`), and sustained
calls per second with 100 concurrent MCP sessions (against 100 concurrent REST clients).

get_server_stats does the same work as GET /stats (JobService::stats: a store read plus the
devices' state), so the difference is the MCP layer: JSON-RPC framing, the session, the tool
registry, schema validation, the structured result and its text copy.

The HTTP client is a minimal keep-alive HTTP/1.1 client on asyncio streams (one connection per
client, one request in flight on each), a few times cheaper per request than httpx, so that on a
small machine the load generator costs less than the server it measures. Client and server
share the machine's cores: the numbers are what one machine serves to itself.

    python bench/mcp_overhead.py [--calls 1000] [--sessions 100] [--seconds 10] [--out FILE]

Uses $KFORGE_BIN (else the release build, else the dev build) on the `cpu` device. Prints a
table and writes the raw numbers as JSON (default bench/results/mcp_overhead.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.kforge_server import KforgeServer, kforge_binary  # noqa: E402

PROTOCOL = "2025-11-25"
WARMUP_CALLS = 50
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def stats_call(i: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "get_server_stats", "arguments": {}},
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99),
        "mean_ms": statistics.fmean(ms),
    }


def check_result(answer: dict[str, Any]) -> None:
    result = answer.get("result", {})
    if "structuredContent" not in result or result.get("isError"):
        raise RuntimeError(f"unexpected answer: {answer}")


class Connection:
    """One keep-alive HTTP/1.1 connection; answers must carry Content-Length (kforge's do)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, dict[str, str], bytes]:
        assert self.reader and self.writer
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        answer_headers = {}
        for line in head[1:]:
            if line:
                name, _, value = line.partition(":")
                answer_headers[name.strip().lower()] = value.strip()
        if "content-length" not in answer_headers:
            raise RuntimeError(f"{method} {path}: answer without Content-Length: {head}")
        content = await self.reader.readexactly(int(answer_headers["content-length"]))
        return status, answer_headers, content

    async def close(self) -> None:
        if self.writer:
            self.writer.close()
            await self.writer.wait_closed()


class McpHttpSession:
    """An initialized MCP session on its own connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.headers = dict(MCP_HEADERS)
        self.next_id = 0

    async def post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        return await self.conn.request("POST", "/mcp", self.headers, json.dumps(message).encode())

    async def start(self) -> McpHttpSession:
        status, headers, body = await self.post(INIT)
        if status != 200:
            raise RuntimeError(f"initialize: {status} {body!r}")
        self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = PROTOCOL
        status, _, _ = await self.post(INITIALIZED)
        if status != 202:
            raise RuntimeError(f"notifications/initialized: {status}")
        return self

    async def get_server_stats(self) -> None:
        self.next_id += 1
        status, _, body = await self.post(stats_call(self.next_id))
        if status != 200:
            raise RuntimeError(f"tools/call: {status} {body!r}")
        check_result(json.loads(body))


async def rest_get_stats(conn: Connection) -> None:
    status, _, body = await conn.request("GET", "/stats", {"Accept": "application/json"})
    if status != 200:
        raise RuntimeError(f"GET /stats: {status} {body!r}")
    json.loads(body)


async def http_round_trips(port: int, calls: int) -> dict[str, Any]:
    """One client, one call at a time, REST and MCP alternating (same machine state)."""
    rest_conn = await Connection("127.0.0.1", port).open()
    session = await McpHttpSession(await Connection("127.0.0.1", port).open()).start()
    rest: list[float] = []
    mcp: list[float] = []
    for i in range(calls + WARMUP_CALLS):
        t0 = time.perf_counter()
        await rest_get_stats(rest_conn)
        t1 = time.perf_counter()
        await session.get_server_stats()
        t2 = time.perf_counter()
        if i >= WARMUP_CALLS:
            rest.append(t1 - t0)
            mcp.append(t2 - t1)
    await rest_conn.close()
    await session.conn.close()
    return {"rest_get_stats": summary(rest), "mcp_http_tools_call": summary(mcp)}


def stdio_round_trips(calls: int) -> dict[str, Any]:
    """`kforge mcp` with its embedded engine: one line out, one line back."""
    env = {**os.environ, "KFORGE_WORKER_PATH": str(REPO / "python")}
    with tempfile.TemporaryDirectory(prefix="kforge-bench-") as data:
        proc = subprocess.Popen(
            [str(kforge_binary()), "mcp", "--devices", "cpu", "--data-dir", data,
             "--log-level", "warning"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )  # fmt: skip
        assert proc.stdin and proc.stdout

        def ask(message: dict[str, Any]) -> dict[str, Any]:
            assert proc.stdin and proc.stdout
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            return json.loads(proc.stdout.readline())

        ask(INIT)
        proc.stdin.write(json.dumps(INITIALIZED).encode() + b"\n")
        samples: list[float] = []
        for i in range(calls + WARMUP_CALLS):
            t0 = time.perf_counter()
            answer = ask(stats_call(i + 1))
            t1 = time.perf_counter()
            check_result(answer)
            if i >= WARMUP_CALLS:
                samples.append(t1 - t0)
        proc.stdin.close()
        proc.wait(timeout=60)
    return {"mcp_stdio_tools_call": summary(samples)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sustained(
    port: int, server_pid: int, clients: int, seconds: float, mcp: bool
) -> dict[str, float]:
    """Calls per second with `clients` concurrent clients, each on its own connection and (for
    MCP) its own session, each with one call in flight; the latency they saw; and the server
    process's CPU time per call (independent of how fast the load generator is)."""
    conns = await asyncio.gather(*(Connection("127.0.0.1", port).open() for _ in range(clients)))
    sessions = await asyncio.gather(*(McpHttpSession(c).start() for c in conns)) if mcp else []
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def client(index: int) -> None:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            if mcp:
                await sessions[index].get_server_stats()
            else:
                await rest_get_stats(conns[index])
            latencies.append(time.perf_counter() - t0)

    started, cpu_before = time.perf_counter(), cpu_seconds(server_pid)
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed, cpu_used = time.perf_counter() - started, cpu_seconds(server_pid) - cpu_before
    await asyncio.gather(*(c.close() for c in conns))
    return {
        "calls_per_s": len(latencies) / elapsed,
        "server_cpu_us_per_call": cpu_used / len(latencies) * 1e6,
        **summary(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="sequential calls per path")
    parser.add_argument("--sessions", type=int, default=100, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="sustained run length")
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / "mcp_overhead.json"
    )
    args = parser.parse_args()

    server = KforgeServer(devices="cpu", log_level="warning").start()
    try:
        server.wait_ready()
        results: dict[str, Any] = {
            "machine": f"{platform.node()} ({os.cpu_count()} cores)",
            "binary": str(kforge_binary()),
            "calls": args.calls,
            **asyncio.run(http_round_trips(server.port, args.calls)),
            **stdio_round_trips(args.calls),
            "sessions": args.sessions,
        }
        assert server.proc
        for key, mcp in (("sustained_rest", False), ("sustained_mcp", True)):
            results[key] = asyncio.run(
                sustained(server.port, server.proc.pid, args.sessions, args.seconds, mcp)
            )
    finally:
        server.stop()

    print(f"{'one client, sequential':<28} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for key in ("rest_get_stats", "mcp_http_tools_call", "mcp_stdio_tools_call"):
        s = results[key]
        print(f"{key:<28} {s['p50_ms']:>8.3f} {s['p99_ms']:>8.3f} {s['mean_ms']:>8.3f}")
    print(f"{args.sessions} concurrent clients, {args.seconds:.0f} s:")
    for key in ("sustained_rest", "sustained_mcp"):
        s = results[key]
        print(
            f"  {key:<26} {s['calls_per_s']:>8.0f} calls/s"
            f"  (p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms;"
            f" server CPU {s['server_cpu_us_per_call']:.0f} µs/call)"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
