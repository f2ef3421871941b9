"""The official MCP conformance suite against the real server (Streamable HTTP).

`npx @modelcontextprotocol/conformance@0.2.0-alpha.12 server --url .../mcp` with the locally
installed package (tests/mcp-node, installed by scripts/setup.sh; no download at test time), in
the three ways the issue names: the frozen requirement sets of revisions 2025-11-25 and
2026-07-28, and `--suite all` (every scenario, pending and extensions included). kforge serves
the suite's fixtures only with --conformance-fixtures.

All three pass in full: every check of every scenario, the ones `--requirements 2026-07-28`
runs without scoring them (the tasks extension's, skills, json-schema-2020-12, the header
scenarios) included. No expected-failures baseline: any failure fails the test.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest

from integration.kforge_server import REPO, KforgeServer
from integration.mcp_support import CONFORMANCE_VERSION, NODE_DIR, node_env


@pytest.fixture(scope="module")
def fixtures_server() -> Iterator[KforgeServer]:
    srv = KforgeServer(
        extra_args=["--conformance-fixtures", "--skills-dir", str(REPO / "skills")]
    ).start()
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
        timeout=900,
        check=False,
    )


def plain(text: str) -> str:
    """Output without ANSI colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def summary_of(out: str) -> tuple[int, int]:
    summary = re.search(r"Total: (\d+) passed, (\d+) failed", out)
    assert summary, f"no conformance summary:\n{out[-5000:]}"
    return int(summary[1]), int(summary[2])


def test_requirements_2025_11_25_pass_in_full(fixtures_server: KforgeServer) -> None:
    r = run_conformance(fixtures_server.url + "/mcp", "--requirements", "2025-11-25")
    out = plain(r.stdout + r.stderr)
    passed, failed = summary_of(out)
    assert failed == 0 and r.returncode == 0, f"{passed}/{failed}\n{out[-8000:]}"
    # 77 checks at alpha.12 before issue #14; 83 with resumable streams (server-sse-polling's
    # priming event, retry field and resume) and json-schema-2020-12's SEP-2106 keywords
    # checked. Fewer would mean checks went missing.
    assert passed >= 83, (passed, failed)
    for scenario in ("tools-call-with-progress", "tools-call-sampling", "dns-rebinding-protection"):
        assert re.search(rf"✓ {scenario}: \d+ passed, 0 failed", out), scenario


def test_requirements_2026_07_28_pass_in_full(fixtures_server: KforgeServer) -> None:
    """Revision 2026-07-28's requirement set at the 2026 wire: every scored scenario passes."""
    r = run_conformance(fixtures_server.url + "/mcp", "--requirements", "2026-07-28")
    out = plain(r.stdout + r.stderr)
    passed, failed = summary_of(out)
    assert failed == 0 and r.returncode == 0, f"{out[-10000:]}\n{fixtures_server.log()[-3000:]}"
    assert "Not scored for 2026-07-28: 13 scenario(s) run, 0 failing" in out
    assert re.search(r"✓ json-schema-2020-12: \d+ passed, 0 failed", out)
    for scenario in (
        "server-stateless",
        "caching",
        "sep-2164-resource-not-found",
        "input-required-result-tampered-state",
        "tools-call-with-progress",
        "http-header-validation",
        "http-custom-header-server-validation",
    ):
        assert re.search(rf"✓ {scenario}: \d+ passed, 0 failed", out), scenario
    assert passed >= 191, passed


def test_suite_all_passes_in_full(fixtures_server: KforgeServer) -> None:
    """`--suite all`: every scenario (pending ones and the extensions included), each at its
    inferred revision."""
    r = run_conformance(fixtures_server.url + "/mcp", "--suite", "all")
    out = plain(r.stdout + r.stderr)
    passed, failed = summary_of(out)
    assert failed == 0 and r.returncode == 0, f"{out[-10000:]}\n{fixtures_server.log()[-3000:]}"
    assert re.search(r"✓ json-schema-2020-12: \d+ passed, 0 failed", out)
    assert re.search(r"✓ server-sse-polling: \d+ passed, 0 failed", out)
    for scenario in (
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
        "tasks-lifecycle",
        "tasks-mrtr-input",
        "tasks-mrtr-composition",
    ):
        assert re.search(rf"✓ {scenario}: \d+ passed, 0 failed", out), scenario
    assert passed >= 264, passed


def test_product_server_lists_no_fixtures(server: KforgeServer) -> None:
    """Without --conformance-fixtures the suite's fixture tools are absent (the product catalog
    stays apart), so its tool scenarios fail there."""
    r = run_conformance(server.url + "/mcp", "--scenario", "tools-call-simple-text")
    assert r.returncode != 0
    assert "[tools-call-simple-text] FAILURE" in plain(r.stdout + r.stderr)
