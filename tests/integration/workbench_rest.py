"""A small real workbench session made through MCP over HTTP, for the tests of the REST views
of sessions (test_ui_resources.py) and of the web UI (test_ui.py).

Two softmax versions on the given device: v1 wrong (validation finds the mismatch), v2 right,
validated and benchmarked. With `hostile`, v1's first comment (which the development log
quotes as its intent) and its docstring carry HTML and script, for the XSS checks.
"""

from __future__ import annotations

from typing import Any

from integration.mcp_support import RawMcp, call_result
from integration.workbench_session import CPU_INPUTS, REFERENCE, V1_WRONG, V2_RIGHT

HOSTILE_DOC = '<img src=x onerror="window.__pwned=5">'
HOSTILE_COMMENT = "# <script>window.__pwned=4</script>"


def hostile_v1() -> str:
    return (
        HOSTILE_COMMENT
        + "\n"
        + V1_WRONG.replace("v1: one row per program", f"v1 {HOSTILE_DOC}: one row per program")
    )


def make_session(base_url: str, token: str | None, device: str, hostile: bool = False) -> str:
    """Runs the session as the principal of `token`; returns its id."""
    mcp = RawMcp(base_url)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    mcp.http.headers.update(auth)
    try:
        mcp.initialize()

        def call(tool: str, args: dict[str, Any], error: bool = False) -> dict[str, Any]:
            r = mcp.request("tools/call", {"name": tool, "arguments": args}, timeout=600)
            assert r.status_code == 200, r.text
            result = call_result(r)
            assert bool(result.get("isError")) == error, (tool, result)
            return result

        call("set_kernel_name", {"name": "softmax", "device": device, "min_versions": 2})
        validate = {"reference_code": REFERENCE, "test_input_code": CPU_INPUTS}
        call("write_kernel_code", {"code": hostile_v1() if hostile else V1_WRONG})
        call("validate_correctness", validate, error=True)
        v2 = call("write_kernel_code", {"code": V2_RIGHT})
        call("validate_correctness", validate)
        call("benchmark_kernel", {**validate, "warmup": 2, "rep": 5})
        return str(v2["structuredContent"]["session"]["id"])
    finally:
        mcp.close()
