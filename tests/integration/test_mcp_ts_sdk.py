"""kforge's MCP tools driven by the official TypeScript SDK clients, pinned in
tests/mcp-node/package.json: v1 (@modelcontextprotocol/sdk, 2025-11-25 through initialize) and v2
(@modelcontextprotocol/client, pinned to the stateless 2026-07-28), over Streamable HTTP and
stdio: tests/mcp-node/ts_client.mjs
lists the tools, calls compare_kernels and evaluate_kernel with progress, sends invalid
arguments, and cancels a long evaluate_kernel with an AbortSignal; this test checks its report.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from integration.kforge_server import KforgeServer
from integration.mcp_support import (
    NODE_DIR,
    compare_args,
    evaluate_args,
    invalid_args,
    node_env,
    node_tools,
    sleepy_args,
    stdio_command,
    worker_env,
)


def run_ts_client(
    tmp_path: Path, transport: dict[str, Any], revision: str = "2025-11-25"
) -> dict[str, Any]:
    plan = {
        "transport": transport,
        "revision": revision,
        "compare": compare_args(),
        "evaluate": evaluate_args(),
        "invalid": invalid_args(),
        "sleepy": sleepy_args(),
    }
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    r = subprocess.run(
        [str(node_tools() / "node"), str(NODE_DIR / "ts_client.mjs"), str(plan_file)],
        cwd=NODE_DIR,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, f"ts client failed:\n{r.stdout}\n{r.stderr[-5000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_report(report: dict[str, Any], revision: str = "2025-11-25") -> None:
    assert report["serverVersion"]["name"] == "kforge"
    if revision == "2026-07-28":
        assert report["protocolVersion"] == revision, report["protocolVersion"]
    assert report["tools"][:5] == [
        "evaluate_kernel",
        "compare_kernels",
        "validate_kernel",
        "get_job_status",
        "get_server_stats",
    ]
    for call in ("compare", "evaluate"):
        out = report[call]
        assert not out["isError"], out["text"]
        result = out["structured"]["kernel_exec_result"]
        assert result["compiled"] and result["correctness"], out["structured"]
        # The SDK runs notification handlers a microtask after the response handler, so the
        # final "100" that arrives right before the response may be dropped on its side.
        values = [p["progress"] for p in out["progress"]]
        assert len(values) >= 3 and values[0] == 0 and values == sorted(values), values
        assert len(set(values)) == len(values) and values[-1] <= 100
        assert all(p["total"] == 100 for p in out["progress"])
    invalid = report["invalid"]
    assert invalid["isError"]
    assert "io_contract.args[2].tensor_spec.shape[0]: must be an integer" in invalid["text"]
    cancel = report["cancel"]
    assert cancel["sawCorrectness"] and cancel["jobId"], cancel
    assert cancel["callOutcome"].startswith("rejected"), cancel
    assert cancel["status"] == "cancelled", cancel


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_streamable_http(server: KforgeServer, tmp_path: Path, revision: str) -> None:
    report = run_ts_client(tmp_path, {"url": server.url + "/mcp"}, revision)
    check_report(report, revision)
    with server.client() as rest:
        assert rest.get(f"/job/{report['cancel']['jobId']}").json()["state"] == "cancelled"


@pytest.mark.slow
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_stdio(tmp_path: Path, revision: str) -> None:
    command, args = stdio_command(tmp_path / "data")
    transport = {"command": command, "args": args, "env": worker_env()}
    check_report(run_ts_client(tmp_path, transport, revision), revision)
