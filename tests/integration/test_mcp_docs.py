"""The MCP client configurations in docs/mcp.md work as written.

Each snippet follows a `<!-- mcp-config: NAME -->` marker (JSON, or TOML for Codex). The test
takes the `kforge` entry, connects with the official Python SDK client using its `url` (the
address swapped for the test server's) or its `command` and `args` (the binary swapped for the
one under test, the default data directory moved into a temp dir), and calls a tool. The curl
examples (`<!-- example: NAME -->`, also run by test_docs_examples.py) must get MCP answers.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from integration.kforge_server import REPO, KforgeServer, kforge_binary
from integration.mcp_support import worker_env

SHELL_EXAMPLE = re.compile(
    r"<!-- example: (?P<name>[\w-]+)[^>]*-->\s*```bash\n(?P<code>.*?)```", re.S
)
CONFIG = re.compile(
    r"<!-- mcp-config: (?P<name>[\w-]+) -->\s*```(?P<lang>json|toml)\n(?P<body>.*?)```", re.S
)


def snippets() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for m in CONFIG.finditer((REPO / "docs" / "mcp.md").read_text()):
        body = m["body"]
        config = json.loads(body) if m["lang"] == "json" else tomllib.loads(body)
        servers = config.get("mcpServers") or config.get("servers") or config.get("mcp_servers")
        found.append((m["name"], servers["kforge"]))
    return found


def test_the_docs_cover_the_clients_and_both_transports() -> None:
    names = [name for name, _ in snippets()]
    for client in ("claude-code", "cursor", "claude-desktop", "vscode", "codex"):
        assert any(n.startswith(client) for n in names), client
    entries = [entry for _, entry in snippets()]
    assert any("url" in e for e in entries) and any("command" in e for e in entries)


async def use_server(client: Client) -> None:
    tools = await client.list_tools()
    assert "evaluate_kernel" in [t.name for t in tools.tools]
    stats = await client.call_tool("get_server_stats", {})
    assert not stats.is_error and stats.structured_content["devices"], stats


@pytest.mark.parametrize(("name", "entry"), snippets(), ids=[n for n, _ in snippets()])
def test_config_snippet_connects(
    server: KforgeServer, tmp_path: Path, name: str, entry: dict[str, Any]
) -> None:
    if "url" in entry:
        assert entry.get("type", "http") == "http", name
        target: Any = entry["url"].replace("http://127.0.0.1:8000", server.url)
    else:
        assert entry["command"] == "kforge", name
        args = [a.replace("http://127.0.0.1:8000", server.url) for a in entry.get("args", [])]
        # The documented command as is; only the default data dir moves into tmp_path.
        env = {**worker_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        target = StdioServerParameters(command=str(kforge_binary()), args=args, env=env)

    async def connect() -> None:
        async with Client(target) as client:
            await use_server(client)

    anyio.run(connect)
    if "command" in entry and "--server" not in entry["args"]:
        assert (tmp_path / "cache" / "kforge" / "mcp-data" / "kforge.db").exists()


def mcp_shell_examples() -> list[tuple[str, str]]:
    text = (REPO / "docs" / "mcp.md").read_text()
    return [(f"mcp.md:{m['name']}", m["code"]) for m in SHELL_EXAMPLE.finditer(text)]


def test_the_shell_examples_are_there() -> None:
    assert {n for n, _ in mcp_shell_examples()} >= {"mcp.md:mcp-initialize", "mcp.md:mcp-session"}


@pytest.mark.parametrize(
    ("name", "code"), mcp_shell_examples(), ids=[n for n, _ in mcp_shell_examples()]
)
def test_shell_example_gets_an_mcp_answer(server: KforgeServer, name: str, code: str) -> None:
    """test_docs_examples.py runs them too; here the answer is checked as MCP."""
    r = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code.replace("http://127.0.0.1:8000", server.url)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"{name}:\n{r.stdout}\n{r.stderr}"
    answer = json.loads(r.stdout)
    assert answer["jsonrpc"] == "2.0" and "error" not in answer, answer
    result = answer["result"]
    if name == "mcp.md:mcp-initialize":
        assert result["serverInfo"]["name"] == "kforge"
    elif name == "mcp.md:mcp-discover":
        assert result["supportedVersions"] == ["2026-07-28"] and result["resultType"] == "complete"
    else:
        assert not result.get("isError") and result["structuredContent"]["devices"], result
