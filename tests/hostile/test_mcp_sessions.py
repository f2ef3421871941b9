"""Issue #8 item 9: 10,001 unauthenticated MCP `initialize` calls evicted an idle legitimate
session. Now sessions that were used are never evicted for new ones; sessions initialized
and never used are capped separately (the oldest makes room), and a full server says 503."""

from __future__ import annotations

import concurrent.futures
import http.client
import json

from integration.kforge_server import KforgeServer

HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "flood", "version": "1"}}})  # fmt: skip


def post(conn: http.client.HTTPConnection, body: str, session: str | None = None):
    headers = dict(HEADERS)
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = "2025-06-18"
    conn.request("POST", "/mcp", body=body, headers=headers)
    r = conn.getresponse()
    return r.status, r.getheader("mcp-session-id"), r.read()


def flood(port: int, n: int) -> list[int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        return [post(conn, INIT)[0] for _ in range(n)]
    finally:
        conn.close()


def test_initialize_flood_does_not_evict_a_session_in_use(make_server) -> None:
    srv: KforgeServer = make_server("--mcp-max-pending-sessions", "500")
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    status, session, _ = post(conn, INIT)
    assert status == 200 and session
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert post(conn, initialized, session)[0] == 202
    tools = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert post(conn, tools, session)[0] == 200

    total = 10_001
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        parts = [total // 4 + (1 if i < total % 4 else 0) for i in range(4)]
        statuses = [s for chunk in pool.map(lambda n: flood(srv.port, n), parts) for s in chunk]
    assert len(statuses) == total
    assert set(statuses) == {200}, set(statuses)

    status, _, body = post(conn, tools, session)
    assert status == 200, body
    assert "evaluate_kernel" in body.decode()
    conn.close()


def test_a_full_server_answers_503(make_server) -> None:
    srv: KforgeServer = make_server("--mcp-max-sessions", "3")
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    ping = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"})
    for _ in range(3):
        status, session, _ = post(conn, INIT)
        assert status == 200
        assert post(conn, ping, session)[0] == 200  # used: established
    conn.request("POST", "/mcp", body=INIT, headers=HEADERS)
    r = conn.getresponse()
    body = r.read()
    assert r.status == 503, body
    assert r.getheader("retry-after") == "5"
    assert b"--mcp-max-sessions" in body
    conn.close()
