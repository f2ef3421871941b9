"""docs/workbench.md is true: its client configurations connect and serve the workbench, and
its worked vector_add session runs as written (the code blocks marked `<!-- worked: ... -->`).
Configurations are tested as test_mcp_docs.py tests docs/mcp.md's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from integration.kforge_server import REPO, KforgeServer, device_under_test, kforge_binary
from integration.mcp_support import worker_env

DOC = (REPO / "docs" / "workbench.md").read_text()
CONFIG = re.compile(r"<!-- mcp-config: (?P<name>[\w-]+) -->\s*```json\n(?P<body>.*?)```", re.S)
WORKED = re.compile(r"<!-- worked: (?P<name>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.S)


def configs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (m["name"], json.loads(m["body"])["mcpServers"]["kforge"]) for m in CONFIG.finditer(DOC)
    ]


def worked() -> dict[str, str]:
    return {m["name"]: m["code"] for m in WORKED.finditer(DOC)}


def test_the_doc_covers_cursor_and_claude_code() -> None:
    names = [n for n, _ in configs()]
    assert any(n.startswith("cursor") for n in names)
    assert any(n.startswith("claude-code") for n in names)
    assert set(worked()) == {"reference_code", "test_input_code", "v1"}


@pytest.mark.parametrize(("name", "entry"), configs(), ids=[n for n, _ in configs()])
def test_config_serves_the_workbench(
    server: KforgeServer, tmp_path: Path, name: str, entry: dict[str, Any]
) -> None:
    if "url" in entry:
        target: Any = entry["url"].replace("http://127.0.0.1:8000", server.url)
    else:
        assert entry["command"] == "kforge", name
        env = {**worker_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        target = StdioServerParameters(
            command=str(kforge_binary()), args=entry["args"], env=env, cwd=str(tmp_path)
        )

    async def connect() -> None:
        async with Client(target) as client:
            r = await client.call_tool("get_overview", {})
            assert not r.is_error and "## States" in r.content[0].text
            # Named, the session is stored and gets its workspace (docs/workbench.md#sessions).
            r = await client.call_tool("set_kernel_name", {"name": "vector_add"})
            assert not r.is_error, r.content[0].text

    anyio.run(connect)
    if "args" in entry and "--workspace" in entry["args"]:
        workspace = tmp_path / entry["args"][entry["args"].index("--workspace") + 1]
        assert next(p.name for p in workspace.iterdir()).startswith("wb_")


def test_the_worked_session_runs_as_written(tmp_path: Path) -> None:
    code = worked()
    params = StdioServerParameters(
        command=str(kforge_binary()),
        args=["mcp", "--devices", device_under_test(), "--data-dir", str(tmp_path / "data")],
        env=worker_env(),
    )

    async def session() -> None:
        async with Client(params) as client:
            info = await client.call_tool("get_torch_op_info", {"op_name": "vector_add"})
            assert info.structured_content["reference_code"] == code["reference_code"]
            assert info.structured_content["test_input_code"] == code["test_input_code"]
            assert not (await client.call_tool("set_kernel_name", {"name": "vector_add"})).is_error
            v1 = await client.call_tool("write_kernel_code", {"code": code["v1"]})
            assert "Stored v1 as kernel/vector_add_v1.py" in v1.content[0].text
            ran = await client.call_tool(
                "run_triton_kernel", {"test_input_code": code["test_input_code"]}
            )
            assert "ran without error on 3 input case(s)" in ran.content[0].text, ran.content
            ok = await client.call_tool(
                "validate_correctness",
                {"reference_code": code["reference_code"],
                 "test_input_code": code["test_input_code"]},
            )  # fmt: skip
            assert "is CORRECT on every input" in ok.content[0].text, ok.content
            bench = await client.call_tool(
                "benchmark_kernel",
                {"reference_code": code["reference_code"],
                 "test_input_code": code["test_input_code"], "warmup": 1, "rep": 3},
            )  # fmt: skip
            assert not bench.is_error and len(bench.structured_content["cases"]) == 3

    anyio.run(session)
