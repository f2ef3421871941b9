"""The web UI (/ui, docs/ui.md) against the real binary with real cpu jobs.

The HTTP checks run here; the browser checks run in Debian's chromium through playwright-core
(tests/ui/ui_test.mjs; scripts/setup.sh installs both): token prompt, jobs list with filters and
pagination, live update of a new job (server-sent events), job page with its plots, source diff,
devices with the metrics highlights, a batch, workbench sessions (a real session made through
MCP: versions, results, a diff of two versions, the Markdown log), a kept bench report, and
hostile jobs and a hostile session whose sources, errors and log are HTML and script that must
show as text and never run. Screenshots go to build/ui-screenshots (KFORGE_UI_SHOTS to change).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from integration.kernels import model_source, torch_kernel, triton_add
from integration.kforge_server import KforgeServer
from integration.workbench_rest import make_session

REPO = Path(__file__).resolve().parents[2]
UI_TESTS = REPO / "tests" / "ui"
TOKEN = "ui-test-admin-token"
CHROMIUM = os.environ.get("KFORGE_CHROMIUM", "/usr/bin/chromium")
HOSTILE_SOURCE = """# <script>window.__pwned=1</script>
import torch
raise RuntimeError('<img src=x onerror="window.__pwned=2">')
"""
# Kernel names must be identifiers (a name with markup is a 400 at submit), so the third vector
# is the job's error: a cancellation reason, which the list and the job page both show.
HOSTILE_REASON = "<svg onload=window.__pwned=3>"


def submit(srv: KforgeServer, body: dict[str, Any]) -> str:
    with srv.client() as c:
        r = c.post("/evaluate" if "kernel" in body else "/compare", params={"wait": "false"},
                   json=body)  # fmt: skip
        assert r.status_code == 202, r.text
        return str(r.json()["job_id"])


@pytest.fixture(scope="module")
def ui_server() -> Iterator[tuple[KforgeServer, dict[str, Any]]]:
    srv = KforgeServer(admin_token=TOKEN).start()
    try:
        srv.wait_ready()
        timing = {"budget_ms": 50, "warmup_ms": 1, "max_trials": 20}
        relu = torch_kernel(model_source("return torch.relu(x)"))
        jobs = {
            "correct": submit(srv, {"kernel": relu, "num_correct_trials": 2, "timing": timing}),
            "compare": submit(srv, {
                "ref_kernel": relu,
                "custom_kernel": torch_kernel(model_source("return torch.clamp(x, min=0)")),
                "num_correct_trials": 3, "timing": timing,
            }),
            "hostile": submit(srv, {"kernel": {
                "source_code": HOSTILE_SOURCE, "kernel_type": "torch",
            }, "num_correct_trials": 1}),
            "cancelled": submit(srv, {"kernel": torch_kernel(
                model_source("import time\ntime.sleep(60)\nreturn x")
            ), "num_correct_trials": 1}),
            "broken": submit(srv, {"kernel": triton_add("this is not python ("),
                                   "num_correct_trials": 1}),
        }  # fmt: skip
        with srv.client() as c:
            r = c.post(f"/job/{jobs['cancelled']}/cancel", json={"reason": HOSTILE_REASON})
            assert r.status_code == 200 and r.json()["state"] == "cancelled", r.text
            candidates = [
                torch_kernel(model_source("return torch.clamp(x, min=0)")),
                torch_kernel(model_source("return x")),  # wrong: not ranked
            ]
            r = c.post("/batch", params={"wait": "false"}, json={
                "ref_kernel": relu, "candidates": candidates, "num_correct_trials": 2,
                "timing": timing,
            })  # fmt: skip
            assert r.status_code == 202, r.text
            batch_jobs = r.json()["jobs"]
            jobs["batch"] = r.json()["batch_id"]
            # A bench report (kept by the server) for the bench pages.
            r = c.post("/bench", json={
                "ops": ["add"], "sizes": ["small"], "runs": 2, "peaks": False,
                "torch_compile": False, "device": srv.devices,
            })  # fmt: skip
            assert r.status_code == 200, r.text
            jobs["report"] = r.json()["report_id"]
        srv.wait_jobs([*(v for k, v in jobs.items() if k not in ("batch", "report")), *batch_jobs])
        jobs["batch_jobs"] = batch_jobs
        # A workbench session made through MCP: two versions, v1 wrong with markup in its
        # source and in the development log's line about it (its first comment).
        jobs["session"] = make_session(srv.url, TOKEN, srv.devices, hostile=True)
        jobs["live_body"] = {
            "kernel": torch_kernel(model_source("import time\ntime.sleep(2)\nreturn x")),
            "num_correct_trials": 1,
            "measure_performance": False,
        }
        yield srv, jobs
    finally:
        srv.stop()


def test_assets_are_served_with_a_strict_policy_and_without_data(
    ui_server: tuple[KforgeServer, dict[str, Any]],
) -> None:
    srv, _ = ui_server
    assets = [("/ui", "text/html"), ("/ui/", "text/html"), ("/ui/app.js", "text/javascript"),
              ("/ui/style.css", "text/css")]  # fmt: skip
    for path, kind in assets:
        r = httpx.get(srv.url + path, timeout=30)  # no token: the assets are code, not data
        assert r.status_code == 200, (path, r.text)
        assert r.headers["content-type"].startswith(kind)
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(srv.url + "/ui/nope.js", timeout=30).status_code == 404
    assert httpx.get(srv.url + "/ui/..%2Fkforge.db", timeout=30).status_code == 404
    data = ["/jobs", "/stats", "/health", "/metrics", f"/job/{ui_server[1]['correct']}",
            "/jobs/events", "/workbench/sessions", f"/workbench/sessions/{ui_server[1]['session']}",
            "/bench/reports", f"/bench/reports/{ui_server[1]['report']}"]  # fmt: skip
    for path in data:
        assert httpx.get(srv.url + path, timeout=30).status_code == 401, path


def test_the_ui_never_turns_text_into_markup() -> None:
    """Pages build the DOM from text nodes only: no HTML parsing of anything, anywhere."""
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function"
    )
    for f in sorted((REPO / "ui").glob("*.js")):
        assert not sinks.search(f.read_text()), f"{f.name} uses an HTML or code sink"
    index = (REPO / "ui" / "index.html").read_text()
    assert "<script>" not in index and " style=" not in index and "http" not in index


def test_in_chromium(ui_server: tuple[KforgeServer, dict[str, Any]]) -> None:
    srv, jobs = ui_server
    node = shutil.which("node")
    assert node, "node not found: scripts/setup.sh installs it"
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} not found: scripts/setup.sh installs chromium"
    assert (UI_TESTS / "node_modules" / "playwright-core").exists(), (
        "tests/ui/node_modules missing: scripts/setup.sh runs npm ci there"
    )
    shots = Path(os.environ.get("KFORGE_UI_SHOTS", REPO / "build" / "ui-screenshots"))
    env = {**os.environ, "KFORGE_UI_URL": srv.url, "KFORGE_UI_TOKEN": TOKEN,
           "KFORGE_UI_JOBS": json.dumps(jobs), "KFORGE_UI_SHOTS": str(shots),
           "KFORGE_CHROMIUM": CHROMIUM}  # fmt: skip
    out = subprocess.run(
        [node, str(UI_TESTS / "ui_test.mjs")], cwd=UI_TESTS, env=env, capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip
    report = out.stdout + out.stderr
    print(report)
    assert out.returncode == 0, report
    assert report.count("\nok ") + report.startswith("ok ") == 10, report
    names = ["token-prompt", "jobs", "job", "diff", "hostile", "devices", "batch", "sessions",
             "session", "session-diff", "bench-reports", "bench-report"]  # fmt: skip
    for name in names:
        assert (shots / f"{name}.png").stat().st_size > 1000, name
