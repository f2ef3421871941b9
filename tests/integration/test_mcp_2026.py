"""MCP revision 2026-07-28 on the real server's /mcp, next to the 2025 revisions (raw HTTP).

The stateless wire (params._meta, no session), server/discover, the validation ladder and its
HTTP statuses, the header rules (Mcp-Method, Mcp-Name, Mcp-Param-*), caching hints,
resource-not-found -32602, input_required rounds, skills (SEP-2640) and tasks mapped onto
durable jobs (a task survives a server restart). Also the 2025 transport's defects the issue
named: error ids echoed, SSE for an SSE-only client, fractional ids, resumable streams
(event ids, Last-Event-ID replay, retry hints) and portable tool schemas.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.kforge_server import REPO, KforgeServer
from integration.mcp_support import (
    RawMcp,
    evaluate_args,
    sleepy_args,
    sse_messages,
    stdio_command,
    worker_env,
)

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
SKILLS = "io.modelcontextprotocol/skills"


class Modern:
    """A 2026-07-28 client: every request carries its _meta and the required headers."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url + "/mcp"
        self.http = httpx.Client(timeout=120)
        self.next_id = 0

    def meta(self, caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {},
            **extra,
        }

    def post(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        caps: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        request_id: Any = None,
        accept: str = "application/json, text/event-stream",
    ) -> httpx.Response:
        self.next_id += 1
        p = dict(params or {})
        p["_meta"] = meta if meta is not None else self.meta(caps)
        h = {
            "Content-Type": "application/json",
            "Accept": accept,
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        name = p.get("name") if method in ("tools/call", "prompts/get") else None
        name = p.get("uri") if method == "resources/read" else name
        name = p.get("taskId") if method.startswith("tasks/") else name
        if isinstance(name, str):
            h["Mcp-Name"] = name
        h.update(headers or {})
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id if request_id is None else request_id,
            "method": method,
            "params": p,
        }
        return self.http.post(self.url, json=body, headers=h)

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        r = self.post(method, params, **kw)
        assert r.status_code == 200, r.text
        body = body_of(r)
        assert "result" in body, body
        return body["result"]

    def close(self) -> None:
        self.http.close()


def body_of(r: httpx.Response) -> dict[str, Any]:
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        return sse_messages(r.text)[-1]
    return r.json()


@pytest.fixture(scope="module")
def fixtures_server() -> Iterator[KforgeServer]:
    srv = KforgeServer(
        extra_args=["--conformance-fixtures", "--skills-dir", str(REPO / "skills")]
    ).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def modern(fixtures_server: KforgeServer) -> Iterator[Modern]:
    client = Modern(fixtures_server.url)
    try:
        yield client
    finally:
        client.close()


def test_discover_names_versions_capabilities_and_extensions(modern: Modern) -> None:
    r = modern.post("server/discover")
    assert r.status_code == 200 and "mcp-session-id" not in r.headers
    result = r.json()["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == [MODERN]
    caps = result["capabilities"]
    assert {"tools", "prompts", "resources"} <= set(caps)
    assert "subscribe" not in caps["resources"] and "tasks" not in caps
    assert caps["extensions"] == {TASKS: {}, SKILLS: {}}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "kforge"
    assert result["ttlMs"] >= 0 and result["cacheScope"] == "public"


def test_the_2025_path_is_unchanged(fixtures_server: KforgeServer) -> None:
    raw = RawMcp(fixtures_server.url)
    try:
        init = raw.initialize().json()["result"]
        assert init["protocolVersion"] == "2025-11-25"
        # An initialize carrying the 2026 _meta claim is the removed method, not the handshake.
        modern = Modern(fixtures_server.url)
        r = modern.post("initialize", {"protocolVersion": MODERN})
        assert r.status_code == 404 and r.json()["error"]["code"] == -32601
        modern.close()
        listed = raw.request("tools/list", headers={"MCP-Protocol-Version": "2025-11-25"})
        assert listed.status_code == 200 and "resultType" not in listed.json()["result"]
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("meta", "code", "status"),
    [
        (None, -32602, 400),  # no _meta at all
        ({"io.modelcontextprotocol/protocolVersion": MODERN}, -32602, 400),
        ({"io.modelcontextprotocol/clientCapabilities": {}}, -32602, 400),
    ],
)
def test_missing_meta_keys_are_invalid_params(
    fixtures_server: KforgeServer, meta: dict[str, Any] | None, code: int, status: int
) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": "m-1", "method": "tools/list", "params": {}}
    if meta is not None:
        body["params"]["_meta"] = meta
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
    }
    r = httpx.post(fixtures_server.url + "/mcp", json=body, headers=headers)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["code"] == code and r.json()["id"] == "m-1"


def test_version_and_header_rungs(modern: Modern) -> None:
    # The header must match _meta: -32020.
    r = modern.post(
        "tools/list", meta=modern.meta() | {"io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    # Both unknown: -32022 naming what is served and echoing what was asked.
    r = modern.post(
        "tools/list",
        meta=modern.meta() | {"io.modelcontextprotocol/protocolVersion": "v999.0.0"},
        headers={"MCP-Protocol-Version": "v999.0.0"},
    )
    error = r.json()["error"]
    assert r.status_code == 400 and error["code"] == -32022
    assert error["data"] == {"supported": [MODERN], "requested": "v999.0.0"}
    # Mcp-Method: case-insensitive name, case-sensitive value.
    assert modern.post("tools/list", headers={"mcp-method": "tools/list"}).status_code == 200
    r = modern.post("tools/list", headers={"Mcp-Method": "TOOLS/LIST"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    r = modern.post("tools/call", {"name": "test_simple_text"}, headers={"Mcp-Name": "other"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32020
    # Values are trimmed of spaces and tabs (http_headers unit test; httpx cannot send them).


def test_param_headers_mirror_marked_arguments(modern: Modern) -> None:
    call = {"name": "test_x_mcp_header", "arguments": {"region": "Hello"}}
    ok = modern.post("tools/call", call, headers={"Mcp-Param-Region": "=?base64?SGVsbG8=?="})
    assert ok.status_code == 200 and body_of(ok)["result"]["content"][0]["text"] == "region: Hello"
    for bad in ("=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "World"):
        r = modern.post("tools/call", call, headers={"Mcp-Param-Region": bad})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32020, bad
    missing = modern.post("tools/call", call)
    assert missing.status_code == 400 and "Mcp-Param-Region" in missing.json()["error"]["message"]


def test_removed_and_unknown_methods_are_404(modern: Modern) -> None:
    for method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "nope/x"):
        r = modern.post(method, {"uri": "test://static-text"}, request_id=f"id-{method}")
        assert r.status_code == 404, (method, r.text)
        assert r.json()["error"]["code"] == -32601 and r.json()["id"] == f"id-{method}"


def test_no_subscriptions_are_advertised_and_listen_does_not_exist(
    modern: Modern, fixtures_server: KforgeServer
) -> None:
    """kforge declares no listChanged/subscribe in either era, so subscriptions/listen is an
    unknown method (404, -32601) with or without the tasks extension: task status is polled."""
    caps = modern.result("server/discover")["capabilities"]
    for kind in ("tools", "prompts", "resources"):
        assert "listChanged" not in caps[kind] and "subscribe" not in caps[kind], caps
    listen = {"notifications": {"toolsListChanged": True, "taskIds": ["task-" + "0" * 32]}}
    for with_tasks in (None, {"extensions": {TASKS: {}}}):
        r = modern.post("subscriptions/listen", listen, caps=with_tasks, request_id="listen-1")
        assert r.status_code == 404, r.text
        assert r.json()["error"]["code"] == -32601 and r.json()["id"] == "listen-1"
    mcp = RawMcp(fixtures_server.url)
    try:
        legacy = mcp.initialize().json()["result"]["capabilities"]
    finally:
        mcp.close()
    for kind in ("tools", "prompts", "resources"):
        assert "listChanged" not in legacy.get(kind, {}), legacy


def test_caching_hints_on_lists_and_reads(modern: Modern) -> None:
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        result = modern.result(method)
        assert result["resultType"] == "complete" and result["ttlMs"] >= 0, method
        assert result["cacheScope"] in ("public", "private"), method
    read = modern.result("resources/read", {"uri": "test://static-text"})
    assert read["cacheScope"] == "private" and read["ttlMs"] == 0
    called = modern.result("tools/call", {"name": "test_simple_text", "arguments": {}})
    assert "ttlMs" not in called and called["resultType"] == "complete"


def test_resource_not_found_is_invalid_params_with_the_uri(modern: Modern) -> None:
    uri = "test://nonexistent"
    r = modern.post("resources/read", {"uri": uri})
    assert r.status_code == 200
    error = r.json()["error"]
    assert error["code"] == -32602 and error["data"] == {"uri": uri}


def test_input_required_rounds(modern: Modern) -> None:
    tool = {"name": "test_input_required_result_elicitation", "arguments": {}}
    first = modern.result("tools/call", tool, caps={"elicitation": {}})
    assert first["resultType"] == "input_required" and "ttlMs" not in first
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    answer = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    done = modern.result("tools/call", {**tool, "inputResponses": answer}, caps={"elicitation": {}})
    assert done["content"][0]["text"] == "Hello, Ada!"
    # Only declared capabilities are asked through.
    only_sampling = modern.result(
        "tools/call",
        {"name": "test_input_required_result_capabilities", "arguments": {}},
        caps={"sampling": {}},
    )
    methods = {r["method"] for r in only_sampling["inputRequests"].values()}
    assert methods == {"sampling/createMessage"}
    # A tampered requestState is refused; a genuine one is accepted.
    stateful = {"name": "test_input_required_result_request_state", "arguments": {}}
    asked = modern.result("tools/call", stateful, caps={"elicitation": {}})
    ok = {"confirm": {"action": "accept", "content": {"ok": True}}}
    r = modern.post(
        "tools/call",
        {**stateful, "inputResponses": ok, "requestState": asked["requestState"] + "x"},
    )
    assert r.json()["error"]["code"] == -32602 and "requestState" in r.json()["error"]["message"]
    good = modern.result(
        "tools/call", {**stateful, "inputResponses": ok, "requestState": asked["requestState"]}
    )
    assert "state-ok" in good["content"][0]["text"]
    # A capability the call cannot do without: -32021 with HTTP 400.
    r = modern.post("tools/call", {"name": "test_missing_capability", "arguments": {}})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32021
    assert r.json()["error"]["data"]["requiredCapabilities"] == {"sampling": {}}


def test_no_logs_without_a_log_level_and_no_requests_on_streams(modern: Modern) -> None:
    r = modern.post(
        "tools/call", {"name": "test_logging_tool", "arguments": {}}, accept="text/event-stream"
    )
    assert r.headers["content-type"].startswith("text/event-stream")
    messages = sse_messages(r.text)
    assert [m for m in messages if m.get("method") == "notifications/message"] == []
    logged = modern.post(
        "tools/call",
        {"name": "test_logging_tool", "arguments": {}},
        accept="text/event-stream",
        meta=modern.meta() | {"io.modelcontextprotocol/logLevel": "info"},
    )
    assert any(m.get("method") == "notifications/message" for m in sse_messages(logged.text))
    # The 2025 elicitation tool cannot ask the client at 2026-07-28: a tool error, no request.
    r = modern.post(
        "tools/call",
        {"name": "test_elicitation", "arguments": {"message": "hi"}},
        caps={"elicitation": {}},
        accept="text/event-stream",
    )
    messages = sse_messages(r.text)
    assert all("method" not in m or "id" not in m for m in messages), messages
    assert messages[-1]["result"]["isError"] is True


def test_skills_are_served(modern: Modern) -> None:
    listed = modern.result("skills/list")
    names = [s["frontmatter"]["name"] for s in listed["skills"]]
    assert names == ["kforge-workbench", "triton-kernel-agent"]
    skill = listed["skills"][1]
    assert skill["uri"] == "skill://triton-kernel-agent/SKILL.md"
    files = {r["uri"]: r for r in skill["resources"]}
    assert skill["uri"] in files and "skill://triton-kernel-agent/assets/log_template.md" in files
    text = (REPO / "skills/triton-kernel-agent/SKILL.md").read_bytes()
    assert files[skill["uri"]]["digest"] == "sha256:" + hashlib.sha256(text).hexdigest()
    assert files[skill["uri"]]["size"] == len(text)
    got = modern.result("skills/get", {"uri": skill["uri"]})
    assert got["skill"] == skill and "nextCursor" not in got
    r = modern.post("skills/get", {"uri": "skill://nope/SKILL.md"})
    assert r.json()["error"]["code"] == -32602
    read = modern.result("resources/read", {"uri": skill["uri"]})
    assert read["contents"][0]["mimeType"] == "text/markdown"
    assert read["contents"][0]["text"] == text.decode()


def test_error_ids_sse_only_clients_and_fractional_ids(fixtures_server: KforgeServer) -> None:
    raw = RawMcp(fixtures_server.url)
    try:
        # No session: the 400 echoes the request's id.
        r = raw.post({"jsonrpc": "2.0", "id": 41, "method": "tools/list"})
        assert r.status_code == 400 and r.json()["id"] == 41
        raw.initialize()
        r = raw.post(
            {"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
            headers={"MCP-Protocol-Version": "1999-01-01"},
        )
        assert r.status_code == 400 and r.json()["id"] == 7
        r = raw.post({"jsonrpc": "2.0", "id": 2.5, "method": "ping"})
        assert r.status_code == 200 and r.json() == {"jsonrpc": "2.0", "id": 2.5, "result": {}}
        r = raw.post(
            {"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers={"Accept": "text/event-stream"}
        )
        assert r.headers["content-type"].startswith("text/event-stream")
        assert sse_messages(r.text)[-1]["id"] == 3
    finally:
        raw.close()


def sse_events(text: str) -> list[dict[str, str]]:
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line.startswith(":") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = fields.get(key, "") + value.strip()
        if fields:
            events.append(fields)
    return events


def test_a_2025_stream_resumes_with_last_event_id(fixtures_server: KforgeServer) -> None:
    """test_reconnection closes its stream mid-call; GET + Last-Event-ID gets the rest."""
    raw = RawMcp(fixtures_server.url)
    try:
        raw.initialize()
        r = raw.post(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "test_reconnection", "arguments": {}},
            }
        )
        events = sse_events(r.text)
        assert events[0]["id"] and events[0].get("data", "") == "" and events[0]["retry"] == "1000"
        assert not any('"id":9' in e.get("data", "") for e in events), "answered before the close"
        last = [e["id"] for e in events if "id" in e][-1]
        resumed = raw.http.get(
            raw.url,
            headers={
                "Accept": "text/event-stream",
                "Mcp-Session-Id": raw.session_id or "",
                "MCP-Protocol-Version": "2025-11-25",
                "Last-Event-ID": last,
            },
        )
        assert resumed.status_code == 200
        answer = sse_messages(resumed.text)[-1]
        assert answer["id"] == 9 and "resumed" in answer["result"]["content"][0]["text"]
        # Another session may not resume it; an unknown id is 404.
        other = RawMcp(fixtures_server.url)
        other.initialize()
        stolen = other.http.get(
            other.url,
            headers={
                "Accept": "text/event-stream",
                "Mcp-Session-Id": other.session_id or "",
                "MCP-Protocol-Version": "2025-11-25",
                "Last-Event-ID": last,
            },
        )
        assert stolen.status_code == 404
        other.close()
    finally:
        raw.close()


def schema_types(schema: Any) -> Iterator[Any]:
    """Every `type` keyword of a JSON Schema (property maps are walked as maps of schemas)."""
    if isinstance(schema, dict):
        if "type" in schema:
            yield schema["type"]
        for key, value in schema.items():
            if key in ("properties", "$defs") and isinstance(value, dict):
                for sub in value.values():
                    yield from schema_types(sub)
            elif key != "type":
                yield from schema_types(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from schema_types(value)


def test_product_tool_schemas_are_portable(server: KforgeServer) -> None:
    """No multi-type fields (["object", "array"], ["string", "null"]) anywhere in the product's
    tool schemas: strict clients reject them."""
    modern = Modern(server.url)
    try:
        tools = modern.result("tools/list")["tools"]
    finally:
        modern.close()
    assert len(tools) >= 6
    for tool in tools:
        for part in ("inputSchema", "outputSchema"):
            for t in schema_types(tool.get(part, {})):
                assert isinstance(t, str), (tool["name"], part, t)


def test_a_task_survives_a_server_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    srv = KforgeServer(data_dir=data).start()
    caps = {"extensions": {TASKS: {}}}
    try:
        modern = Modern(srv.url)
        created = modern.result(
            "tools/call", {"name": "evaluate_kernel", "arguments": evaluate_args()}, caps=caps
        )
        assert created["resultType"] == "task" and created["status"] == "working"
        task_id = created["taskId"]
        assert len(task_id) == 32 and created["ttlMs"] is None
        # Strong consistency: the task is there at once.
        assert modern.result("tasks/get", {"taskId": task_id}, caps=caps)["taskId"] == task_id
        # Without the opt-in the task methods are refused before any lookup.
        r = modern.post("tasks/get", {"taskId": "gate-test"})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32021
        modern.close()
        srv.stop()
        srv.start()
        modern = Modern(srv.url)
        deadline = time.monotonic() + 300
        while True:
            task = modern.result("tasks/get", {"taskId": task_id}, caps=caps)
            if task["status"] != "working":
                break
            assert time.monotonic() < deadline, task
            time.sleep(0.2)
        assert task["status"] == "completed", task
        result = task["result"]
        assert result.get("isError", False) is False
        assert result["structuredContent"]["kernel_exec_result"]["correctness"] is True
        r = modern.post("tasks/get", {"taskId": "0" * 32}, caps=caps)
        assert r.json()["error"]["code"] == -32602
        modern.close()
    finally:
        srv.stop()


def test_a_task_is_cancelled(server: KforgeServer) -> None:
    caps = {"extensions": {TASKS: {}}}
    modern = Modern(server.url)
    try:
        created = modern.result(
            "tools/call", {"name": "evaluate_kernel", "arguments": sleepy_args()}, caps=caps
        )
        task_id = created["taskId"]
        ack = modern.result("tasks/cancel", {"taskId": task_id}, caps=caps)
        assert ack["resultType"] == "complete" and set(ack) <= {"resultType", "_meta"}
        deadline = time.monotonic() + 60
        while (task := modern.result("tasks/get", {"taskId": task_id}, caps=caps))[
            "status"
        ] == "working":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert task["status"] == "cancelled" and "result" not in task
        # Idempotent on a finished task.
        assert modern.result("tasks/cancel", {"taskId": task_id}, caps=caps)["resultType"]
        # Without the opt-in, the same tool runs synchronously as always.
        sync = modern.result("tools/call", {"name": "get_server_stats", "arguments": {}})
        assert sync["resultType"] == "complete" and not sync.get("isError")
    finally:
        modern.close()


def test_stdio_serves_2026_next_to_the_session(tmp_path: Path) -> None:
    command, args = stdio_command(tmp_path / "data")
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": meta}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "v9"}},
        },
    ]
    r = subprocess.run(
        [command, *args],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **worker_env()},
        check=False,
    )
    answers = {m["id"]: m for m in map(json.loads, r.stdout.splitlines())}
    assert answers[1]["result"]["supportedVersions"] == [MODERN], r.stderr[-3000:]
    assert answers[2]["error"]["code"] == -32601
    assert answers[3]["error"]["code"] == -32602


def test_a_request_state_outlives_a_restart_and_is_shared_by_key_file(tmp_path: Path) -> None:
    """requestState is signed with <data dir>/mcp-state.key (not a per-process key): a retry
    after a restart is accepted; a server with another key refuses it saying so; servers given
    one --mcp-state-key-file accept each other's states."""
    stateful = {"name": "test_input_required_result_request_state", "arguments": {}}
    ok = {"confirm": {"action": "accept", "content": {"ok": True}}}
    data = tmp_path / "a"
    data.mkdir()
    first = KforgeServer(data_dir=data, extra_args=["--conformance-fixtures"]).start()
    try:
        modern = Modern(first.url)
        state = modern.result("tools/call", stateful, caps={"elicitation": {}})["requestState"]
        modern.close()
        key = (data / "mcp-state.key").read_text().strip()
        assert len(key) == 64 and (data / "mcp-state.key").stat().st_mode & 0o777 == 0o600
        first.stop()
        first.start()
        modern = Modern(first.url)
        retry = {**stateful, "inputResponses": ok, "requestState": state}
        assert "state-ok" in modern.result("tools/call", retry)["content"][0]["text"]
        modern.close()
    finally:
        first.stop()
    other_dir = tmp_path / "b"
    other_dir.mkdir()
    other = KforgeServer(data_dir=other_dir, extra_args=["--conformance-fixtures"]).start()
    try:
        modern = Modern(other.url)
        r = modern.post("tools/call", retry)
        error = body_of(r)["error"]
        assert error["code"] == -32602 and "signed with another key" in error["message"], error
        modern.close()
    finally:
        other.stop()
    shared = tmp_path / "c"
    shared.mkdir()
    args = ["--conformance-fixtures", "--mcp-state-key-file", str(data / "mcp-state.key")]
    node = KforgeServer(data_dir=shared, extra_args=args).start()
    try:
        modern = Modern(node.url)
        assert "state-ok" in modern.result("tools/call", retry)["content"][0]["text"]
        modern.close()
    finally:
        node.stop()
    (tmp_path / "bad.key").write_text("short\n")
    bad_dir = tmp_path / "d"
    bad_dir.mkdir()
    bad = KforgeServer(
        data_dir=bad_dir, extra_args=["--mcp-state-key-file", str(tmp_path / "bad.key")]
    )
    with pytest.raises(RuntimeError):
        bad.start(timeout_s=60)
    assert "bad.key must hold 64 lowercase hex characters" in bad.log()
    bad.stop()
