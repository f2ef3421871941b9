"""bench/mcp_overhead.py keeps working (a tiny run; no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from integration.kforge_server import REPO, kforge_binary


def test_mcp_overhead_bench_runs(tmp_path: Path) -> None:
    out = tmp_path / "mcp_overhead.json"
    args = ["--calls", "5", "--sessions", "3", "--seconds", "0.5", "--out", str(out)]
    r = subprocess.run(
        [sys.executable, str(REPO / "bench" / "mcp_overhead.py"), *args],
        env={**os.environ, "KFORGE_BIN": str(kforge_binary())},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-5000:]}"
    results = json.loads(out.read_text())
    for key in ("rest_get_stats", "mcp_http_tools_call", "mcp_stdio_tools_call"):
        assert results[key]["n"] == 5 and results[key]["p50_ms"] > 0, results[key]
    for key in ("sustained_rest", "sustained_mcp"):
        assert results[key]["calls_per_s"] > 0 and results[key]["server_cpu_us_per_call"] >= 0
    assert "sustained_mcp" in r.stdout
