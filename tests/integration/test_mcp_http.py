"""The Streamable HTTP transport at the protocol level: status codes, headers and JSON-RPC error
objects for what clients get wrong (and what they rely on), against the real server."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from integration.kforge_server import KforgeServer
from integration.mcp_support import RawMcp, sse_messages


@pytest.fixture
def mcp(server: KforgeServer) -> Iterator[RawMcp]:
    raw = RawMcp(server.url)
    try:
        yield raw
    finally:
        raw.close()


def rpc_error(r: httpx.Response) -> dict:
    body = r.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body["error"]


# ---- lifecycle -------------------------------------------------------------------------


def test_initialize_negotiates_and_mints_a_session(mcp: RawMcp) -> None:
    r = mcp.initialize()
    assert r.headers["content-type"].startswith("application/json")
    result = r.json()["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "kforge" and result["serverInfo"]["version"]
    # resources and prompts: the Triton workbench's knowledge base (docs/workbench.md)
    assert set(result["capabilities"]) == {"tools", "logging", "resources", "prompts"}
    assert "evaluate_kernel" in result["instructions"]
    assert re.fullmatch(r"[0-9a-f]{32}", mcp.session_id or "")


@pytest.mark.parametrize(
    ("asked", "agreed"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ],
)
def test_version_negotiation(mcp: RawMcp, asked: str, agreed: str) -> None:
    assert mcp.initialize(asked).json()["result"]["protocolVersion"] == agreed


def test_old_protocol_gets_no_structured_content(mcp: RawMcp) -> None:
    mcp.initialize("2025-03-26")
    tools = mcp.request("tools/list").json()["result"]["tools"]
    assert all("outputSchema" not in t and "title" not in t for t in tools)
    r = mcp.request("tools/call", {"name": "get_server_stats", "arguments": {}})
    result = r.json()["result"]
    assert "structuredContent" not in result and result["content"][1]["type"] == "text"


def test_initialize_with_a_stale_session_id_gets_a_new_one(mcp: RawMcp) -> None:
    mcp.session_id = "0" * 32
    mcp.initialize()
    assert mcp.session_id != "0" * 32


def test_ping_and_set_level(mcp: RawMcp) -> None:
    mcp.initialize()
    assert mcp.request("ping").json()["result"] == {}
    assert mcp.request("logging/setLevel", {"level": "debug"}).json()["result"] == {}
    error = rpc_error(mcp.request("logging/setLevel", {"level": "loud"}))
    assert error["code"] == -32602 and "level" in error["message"]


def test_notifications_and_responses_get_202_with_no_body(mcp: RawMcp) -> None:
    mcp.initialize()
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "id": "kforge-404", "result": {}},
    ):
        r = mcp.post(message)
        assert r.status_code == 202 and r.content == b"", message


def test_delete_ends_the_session(mcp: RawMcp) -> None:
    mcp.initialize()
    headers = {"Mcp-Session-Id": mcp.session_id or ""}
    assert mcp.http.delete(mcp.url, headers=headers).status_code == 200
    r = mcp.request("ping")
    assert r.status_code == 404 and rpc_error(r)["code"] == -32001
    assert mcp.http.delete(mcp.url, headers=headers).status_code == 404
    assert mcp.http.delete(mcp.url).status_code == 400


# ---- sessions and protocol headers -----------------------------------------------------


def test_missing_session_is_400_and_unknown_is_404(mcp: RawMcp) -> None:
    r = mcp.request("tools/list")
    assert r.status_code == 400 and rpc_error(r)["code"] == -32000
    mcp.session_id = "deadbeef" * 4
    r = mcp.request("tools/list")
    assert r.status_code == 404 and rpc_error(r)["code"] == -32001


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_any_supported_protocol_header_is_accepted(mcp: RawMcp, version: str) -> None:
    mcp.initialize()
    r = mcp.request("tools/list", headers={"MCP-Protocol-Version": version})
    assert r.status_code == 200 and r.json()["result"]["tools"]


def test_missing_protocol_header_is_accepted(mcp: RawMcp) -> None:
    """Absent MCP-Protocol-Version means 2025-03-26 (a supported version), never 400; the
    session keeps what initialize negotiated."""
    mcp.initialize()
    r = mcp.request("tools/call", {"name": "get_server_stats", "arguments": {}})
    assert r.status_code == 200, r.text
    assert "MCP-Protocol-Version" not in r.request.headers
    assert r.json()["result"]["structuredContent"]["devices"]


@pytest.mark.parametrize("version", ["2024-11-05", "latest", ""])
def test_unsupported_protocol_header_is_400(mcp: RawMcp, version: str) -> None:
    mcp.initialize()
    r = mcp.request("tools/list", headers={"MCP-Protocol-Version": version})
    assert r.status_code == 400
    error = rpc_error(r)
    assert error["code"] == -32600 and "MCP-Protocol-Version" in error["message"]


def test_a_2026_header_without_the_meta_claim_is_400(mcp: RawMcp) -> None:
    """MCP-Protocol-Version 2026-07-28 makes the request a 2026 one, which must carry its
    context in params._meta (-32602), session or not."""
    mcp.initialize()
    r = mcp.request("tools/list", headers={"MCP-Protocol-Version": "2026-07-28"})
    assert r.status_code == 400
    error = rpc_error(r)
    assert error["code"] == -32602 and "params._meta" in error["message"]


# ---- malformed input -------------------------------------------------------------------


def test_malformed_json_is_a_parse_error(mcp: RawMcp) -> None:
    mcp.initialize()
    r = mcp.post(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert r.status_code == 400
    body = r.json()
    assert body["id"] is None and body["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ({"id": 5, "method": "ping"}, '"jsonrpc" must be "2.0"'),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, "string or a number"),
        (
            {"jsonrpc": "2.0", "id": 5, "method": "ping", "params": [1]},
            '"params" must be an object',
        ),
        ({"jsonrpc": "2.0", "id": 5}, "exactly one of"),
        ("just a string", "must be an object"),
    ],
)
def test_invalid_requests(mcp: RawMcp, message: object, why: str) -> None:
    mcp.initialize()
    r = mcp.post(message if not isinstance(message, str) else f'"{message}"')
    assert r.status_code == 400
    error = rpc_error(r)
    assert error["code"] == -32600 and why in error["message"], error
    if isinstance(message, dict) and message.get("id") is not None:
        assert r.json()["id"] == message["id"]


def test_unknown_method_and_unknown_tool(mcp: RawMcp) -> None:
    mcp.initialize()
    r = mcp.request("tools/destroy")
    assert r.status_code == 200 and rpc_error(r)["code"] == -32601
    r = mcp.request("completion/complete")  # no completions in the product catalog
    assert rpc_error(r)["code"] == -32601
    r = mcp.request("tools/call", {"name": "rm_rf", "arguments": {}})
    error = rpc_error(r)
    assert error["code"] == -32602 and "rm_rf" in error["message"]
    r = mcp.request("tools/call", {"name": "get_server_stats", "arguments": [1]})
    assert rpc_error(r)["code"] == -32602


def test_invalid_arguments_are_tool_errors(mcp: RawMcp) -> None:
    mcp.initialize()
    r = mcp.request("tools/call", {"name": "get_job_status", "arguments": {"job": "x"}})
    result = r.json()["result"]
    assert result["isError"] is True
    assert "job: is not a known field (expected one of: job_id)" in result["content"][0]["text"]
    # An unknown job is the old tool's normal answer, status "not_found".
    r = mcp.request("tools/call", {"name": "get_job_status", "arguments": {"job_id": "nope"}})
    result = r.json()["result"]
    assert not result.get("isError") and result["structuredContent"]["status"] == "not_found"


def test_oversized_body_is_413(server: KforgeServer, mcp: RawMcp) -> None:
    mcp.initialize()
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (17 << 20) + b'"}}'
    r = mcp.post(big)
    assert r.status_code == 413
    assert "exceeds the limit" in r.json()["error"]


def test_content_type_and_accept(mcp: RawMcp) -> None:
    mcp.initialize()
    r = mcp.request("ping", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and rpc_error(r)["code"] == -32600
    r = mcp.request("ping", headers={"Accept": "text/html"})
    assert r.status_code == 406
    for accept in ("application/json", "*/*", ""):  # lenient: JSON answers
        r = mcp.request("ping", headers={"Accept": accept})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")


# ---- streams ---------------------------------------------------------------------------


def test_progress_token_gets_an_event_stream(mcp: RawMcp) -> None:
    mcp.initialize()
    r = mcp.request(
        "tools/call",
        {"name": "get_server_stats", "arguments": {}, "_meta": {"progressToken": "t1"}},
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    messages = sse_messages(r.text)
    assert messages[-1]["id"] == mcp._next_id and "result" in messages[-1]


def test_without_sse_in_accept_a_long_tool_still_answers_json(mcp: RawMcp) -> None:
    mcp.initialize()
    r = mcp.request(
        "tools/call",
        {"name": "get_job_status", "arguments": {"job_id": "x"}, "_meta": {"progressToken": 1}},
        headers={"Accept": "application/json"},
    )
    assert r.headers["content-type"].startswith("application/json") and r.json()["result"]


def test_get_opens_a_stream_and_a_second_get_replaces_it(server: KforgeServer) -> None:
    mcp = RawMcp(server.url)
    mcp.initialize()
    headers = {"Mcp-Session-Id": mcp.session_id or "", "Accept": "text/event-stream"}
    with (
        httpx.Client(timeout=10) as a,
        httpx.Client(timeout=10) as b,
        a.stream("GET", mcp.url, headers=headers) as first,
    ):
        assert first.status_code == 200
        assert first.headers["content-type"] == "text/event-stream"
        with b.stream("GET", mcp.url, headers=headers) as second:
            assert second.status_code == 200  # not 409: the old stream is closed
            assert list(first.iter_bytes()) == []  # ended by the server
    assert mcp.http.get(mcp.url, headers={"Accept": "text/event-stream"}).status_code == 400
    mcp.close()


# ---- batches (2025-03-26 only) ---------------------------------------------------------


def test_batches_in_2025_03_26(mcp: RawMcp) -> None:
    mcp.initialize("2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "c", "method": "nope"},
        {"id": "d", "method": "ping"},
    ]
    r = mcp.post(batch)
    assert r.status_code == 200
    answers = {a["id"]: a for a in r.json()}
    assert set(answers) == {"a", "b", "c", "d"}
    assert answers["a"]["result"] == {} and answers["b"]["result"]["tools"]
    assert answers["c"]["error"]["code"] == -32601 and answers["d"]["error"]["code"] == -32600
    only_notifications = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    assert mcp.post(only_notifications).status_code == 202
    assert rpc_error(mcp.post([]))["code"] == -32600


def test_batches_are_refused_after_2025_03_26(mcp: RawMcp) -> None:
    mcp.initialize("2025-06-18")
    r = mcp.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert r.status_code == 400
    assert "not supported in protocol version 2025-06-18" in rpc_error(r)["message"]


# ---- pagination ------------------------------------------------------------------------


def test_tools_list_is_one_page_without_next_cursor(mcp: RawMcp) -> None:
    mcp.initialize()
    first = mcp.request("tools/list").json()["result"]
    second = mcp.request("tools/list").json()["result"]
    assert "nextCursor" not in first and first == second
    error = rpc_error(mcp.request("tools/list", {"cursor": "bm90LWEtY3Vyc29y"}))
    assert error["code"] == -32602 and "cursor" in error["message"]


# ---- security and browser clients ------------------------------------------------------


def test_origin_and_host_are_checked(server: KforgeServer) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
    }
    with httpx.Client(base_url=server.url, timeout=30) as http:
        evil = http.post("/mcp", json=init, headers={"Origin": "http://evil.example.com"})
        assert evil.status_code == 403
        spoofed = http.post("/mcp", json=init, headers={"Host": "evil.example.com"})
        assert spoofed.status_code == 403
        local = {"Origin": f"http://localhost:{server.port}", "Host": f"localhost:{server.port}"}
        ok = http.post("/mcp", json=init, headers=local)
        assert ok.status_code == 200
        assert "Mcp-Session-Id" in ok.headers["access-control-expose-headers"]


def test_cors_preflight_for_browser_clients(server: KforgeServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.options(
            "/mcp",
            headers={
                "Origin": "http://localhost:6274",  # the MCP Inspector's web UI
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, mcp-session-id",
            },
        )
        assert r.status_code == 204
        assert r.headers["access-control-allow-origin"] == "http://localhost:6274"
        for method in ("GET", "POST", "DELETE"):
            assert method in r.headers["access-control-allow-methods"]
        allowed = r.headers["access-control-allow-headers"].lower()
        for header in ("mcp-session-id", "mcp-protocol-version", "authorization", "content-type"):
            assert header in allowed


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ],
)
def test_oauth_discovery_is_a_plain_404(server: KforgeServer, path: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.get(path)
        assert r.status_code == 404 and "www-authenticate" not in r.headers
