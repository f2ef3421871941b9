"""The official MCP conformance suite against the real server (Streamable HTTP, 2025-11-25).

`npx @modelcontextprotocol/conformance@0.1.16 server --url .../mcp` runs every active server
scenario with the locally installed package (tests/mcp-node, installed by scripts/setup.sh; no
download at test time). kforge serves the suite's fixtures only with --conformance-fixtures.
No expected-failures file: every check must pass.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest

from integration.kforge_server import KforgeServer
from integration.mcp_support import CONFORMANCE_VERSION, NODE_DIR, node_env


@pytest.fixture(scope="module")
def fixtures_server() -> Iterator[KforgeServer]:
    srv = KforgeServer(extra_args=["--conformance-fixtures"]).start()
    try:
        yield srv
    finally:
        srv.stop()


def run_conformance(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "npx",
            "--offline",
            "-y",
            f"@modelcontextprotocol/conformance@{CONFORMANCE_VERSION}",
            "server",
            "--url",
            url,
            *extra,
        ],
        cwd=NODE_DIR,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def plain(text: str) -> str:
    """Output without ANSI colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_every_conformance_check_passes(fixtures_server: KforgeServer) -> None:
    r = run_conformance(fixtures_server.url + "/mcp")
    out = plain(r.stdout + r.stderr)
    summary = re.search(r"Total: (\d+) passed, (\d+) failed", out)
    assert summary, f"no conformance summary:\n{out[-5000:]}\n{fixtures_server.log()}"
    passed, failed = int(summary[1]), int(summary[2])
    assert failed == 0 and r.returncode == 0, f"{summary[0]}\n{out[-8000:]}"
    # 30 scenarios at 0.1.16; the two elicitation scenarios check 5 things each.
    assert passed >= 39, summary[0]
    for scenario in ("tools-call-with-progress", "tools-call-sampling", "dns-rebinding-protection"):
        assert re.search(rf"✓ {scenario}: \d+ passed, 0 failed", out), scenario


def test_pending_scenarios_pass_too(fixtures_server: KforgeServer) -> None:
    """`--suite all` adds the scenarios not yet scored at 0.1.16 (json-schema-2020-12,
    server-sse-polling): they pass as well."""
    r = run_conformance(fixtures_server.url + "/mcp", "--suite", "all")
    out = plain(r.stdout + r.stderr)
    summary = re.search(r"Total: (\d+) passed, (\d+) failed", out)
    assert summary and int(summary[2]) == 0 and r.returncode == 0, out[-8000:]
    assert re.search(r"✓ json-schema-2020-12: \d+ passed, 0 failed", out)


def test_product_server_lists_no_fixtures(server: KforgeServer) -> None:
    """Without --conformance-fixtures the suite's fixture tools are absent (the product catalog
    stays apart), so its tool scenarios fail there."""
    r = run_conformance(server.url + "/mcp", "--scenario", "tools-call-simple-text")
    assert r.returncode != 0
    assert "[tools-call-simple-text] FAILURE" in plain(r.stdout + r.stderr)
